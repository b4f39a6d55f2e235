# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""Merge one window of sorted segments into the live ``(key, value)`` pairs,
reading SST blocks in place.

Pure-Python twin (the spec): ``kvstore.iterators.arrow_scan.merge_segments_py``;
``kvstore.iterators.arrow_scan`` picks one at import time, and the tests run
both against ``kvstore.reader.scan_rows`` on random stores.

A *source* is a list of segments ``(seg, lo, hi)`` in key order, where ``seg``
is either a ``cython_ext._pointget.BlockView`` (rows ``lo..hi-1`` of a cached
SST block, read through its Arrow buffers) or a list of row tuples (the
memtable's). Within a source rows are ordered by key ascending, then seq
descending. The caller guarantees that every version of a key in the window
is in the window (it cuts windows at key boundaries).

Why: the row path built a Python tuple per row in the block, a second per row
in the merge, and (for Arrow output) two Python lists to convert back. Here
the merge compares keys with ``memcmp`` on the buffers, picks each key's
newest version with ``seq <= snapshot_seq`` across sources (a linear scan over
the few source heads, as leveldb's merger does for small k), drops tombstones
and expired rows, and writes only the survivors: straight into the key and
value buffers of two Arrow arrays, or into ``(key, value)`` tuples.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int32_t, int64_t, uint64_t, uint8_t
from libc.string cimport memcpy

from cython_ext._pointget cimport BlockView

import pyarrow as pa

cdef enum:
    _PUT = 1

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Unsigned bytewise order of two keys, 8 bytes at a time: keys are short,
       and libc's memcmp call cost more than the comparison (the merge
       compares every row's key with each other source's). */
    static inline int lakekv_key_order(const uint8_t *a, Py_ssize_t alen, const uint8_t *b, Py_ssize_t blen) {
        Py_ssize_t n = alen < blen ? alen : blen, i = 0;
        uint64_t x, y;
        for (; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y) {
    #if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                x = __builtin_bswap64(x);
                y = __builtin_bswap64(y);
                return x < y ? -1 : 1;
    #else
                return memcmp(a + i, b + i, 8) < 0 ? -1 : 1;
    #endif
            }
        }
        for (; i < n; i++) {
            if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
        }
        return (alen > blen) - (alen < blen);
    }
    """
    int lakekv_key_order(const uint8_t* a, Py_ssize_t alen, const uint8_t* b, Py_ssize_t blen) noexcept nogil


cdef struct _Cursor:
    # The segment being read: a BlockView or a list of row tuples (borrowed;
    # the caller's segment lists keep them alive during the call).
    PyObject* seg
    bint is_block
    Py_ssize_t pos
    Py_ssize_t hi
    Py_ssize_t next_segment
    const uint8_t* key
    Py_ssize_t key_len
    # For a block segment, its buffers: advancing a row is then plain C
    # (casting ``seg`` back to a BlockView per row cost a reference count each).
    const int32_t* key_offsets
    const uint8_t* key_data
    const uint64_t* seqs


cdef class _Out:
    """Growing arrays of (pointer, length) for the surviving keys and values."""

    cdef const uint8_t** keys
    cdef Py_ssize_t* key_lens
    cdef const uint8_t** values
    cdef Py_ssize_t* value_lens
    cdef Py_ssize_t n
    cdef Py_ssize_t capacity
    cdef Py_ssize_t key_bytes
    cdef Py_ssize_t value_bytes

    def __dealloc__(self):
        PyMem_Free(self.keys)
        PyMem_Free(self.key_lens)
        PyMem_Free(self.values)
        PyMem_Free(self.value_lens)

    cdef int append(self, const uint8_t* k, Py_ssize_t klen, const uint8_t* v, Py_ssize_t vlen) except -1:
        cdef Py_ssize_t cap
        if self.n == self.capacity:
            cap = self.capacity * 2 if self.capacity else 1024
            self.keys = <const uint8_t**>_grow(self.keys, cap * sizeof(void*))
            self.values = <const uint8_t**>_grow(self.values, cap * sizeof(void*))
            self.key_lens = <Py_ssize_t*>_grow(self.key_lens, cap * sizeof(Py_ssize_t))
            self.value_lens = <Py_ssize_t*>_grow(self.value_lens, cap * sizeof(Py_ssize_t))
            self.capacity = cap
        self.keys[self.n] = k
        self.key_lens[self.n] = klen
        self.values[self.n] = v
        self.value_lens[self.n] = vlen
        self.key_bytes += klen
        self.value_bytes += vlen
        self.n += 1
        return 0


cdef void* _grow(void* p, size_t size) except NULL:
    cdef void* q = PyMem_Realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q


cdef inline int _advance(_Cursor* c, list segments) except -1:
    """Move ``c`` to its next row: plain C within a block segment."""
    cdef int32_t start
    c.pos += 1
    if c.is_block and c.pos < c.hi:
        start = c.key_offsets[c.pos]
        c.key = c.key_data + start
        c.key_len = c.key_offsets[c.pos + 1] - start
        return 0
    return _load(c, segments)


cdef int _load(_Cursor* c, list segments) except -1:
    """Point ``c`` at its current row, moving to the next non-empty segment as needed; key NULL when done."""
    cdef object seg
    cdef BlockView block
    cdef int32_t start
    cdef object row
    while c.pos >= c.hi:
        if c.next_segment >= len(segments):
            c.key = NULL
            return 0
        entry = <tuple>segments[c.next_segment]
        c.next_segment += 1
        seg = entry[0]
        c.seg = <PyObject*>seg
        c.is_block = isinstance(seg, BlockView)
        if not c.is_block and not isinstance(seg, list):
            raise TypeError(f"segments must be BlockViews or lists of rows, not {type(seg).__name__}")
        c.pos = entry[1]
        c.hi = entry[2]
        if c.is_block:
            block = <BlockView>seg
            c.key_offsets = block._key_offsets
            c.key_data = block._key_data
            c.seqs = block._seqs
    if c.is_block:
        start = c.key_offsets[c.pos]
        c.key = c.key_data + start
        c.key_len = c.key_offsets[c.pos + 1] - start
    else:
        row = (<list>c.seg)[c.pos]
        key = <bytes>(<tuple>row)[0]
        c.key = <const uint8_t*>PyBytes_AS_STRING(key)
        c.key_len = PyBytes_GET_SIZE(key)
    return 0


cdef inline uint64_t _seq(_Cursor* c):
    if c.is_block:
        return c.seqs[c.pos]
    return <uint64_t>(<tuple>(<list>c.seg)[c.pos])[1]


def merge_segments(list sources, uint64_t snapshot_seq, int64_t now_ms, bint pairs):
    """The live ``(key, value)`` pairs of one window, in key order.

    Args:
        sources: one list of ``(seg, lo, hi)`` segments per source (see the module docstring).
        snapshot_seq: rows with a larger seq are invisible.
        now_ms: rows with ``expire_at_ms <= now_ms`` are expired.
        pairs: True: return a list of ``(key, value)`` tuples; False: return
            ``(keys, values)`` as two Arrow ``binary`` arrays.

    Raises:
        TypeError: a segment is neither a BlockView nor a list.
    """
    cdef Py_ssize_t k = len(sources), i, t, nties
    cdef _Cursor* cursors = <_Cursor*>PyMem_Malloc(max(k, 1) * sizeof(_Cursor))
    if cursors == NULL:
        raise MemoryError()
    # The sources whose current key is the smallest (found while looking for it).
    cdef Py_ssize_t* ties = <Py_ssize_t*>PyMem_Malloc(max(k, 1) * sizeof(Py_ssize_t))
    if ties == NULL:
        PyMem_Free(cursors)
        raise MemoryError()
    cdef _Out out = _Out()
    cdef list result = [] if pairs else None
    cdef const uint8_t* key
    cdef Py_ssize_t key_len
    cdef uint64_t seq, best_seq
    cdef bint found
    cdef int order
    cdef _Cursor* c
    cdef _Cursor* winner
    cdef Py_ssize_t winner_pos
    cdef PyObject* winner_seg = NULL
    cdef bint winner_block
    cdef BlockView block
    cdef object row, value
    cdef int32_t vstart
    cdef const uint8_t* vptr
    cdef Py_ssize_t vlen
    cdef bint live
    try:
        for i in range(k):
            cursors[i].pos = 0
            cursors[i].hi = 0
            cursors[i].next_segment = 0
            cursors[i].seg = NULL
            _load(&cursors[i], <list>sources[i])
        while True:
            # The smallest current key among the sources, and every source
            # holding it: one comparison per other source (sources rarely
            # share a key, so most rows take k - 1 comparisons here and one
            # more to see that their source moved past the key).
            key = NULL
            key_len = 0
            nties = 0
            for i in range(k):
                c = &cursors[i]
                if c.key == NULL:
                    continue
                if key == NULL:
                    order = -1
                else:
                    order = lakekv_key_order(c.key, c.key_len, key, key_len)
                if order < 0:
                    key, key_len = c.key, c.key_len
                    ties[0] = i
                    nties = 1
                elif order == 0:
                    ties[nties] = i
                    nties += 1
            if key == NULL:
                break
            # Each source holding the key: its newest visible version; keep the newest overall.
            # The key bytes stay valid while we advance: they live in a block or a bytes object
            # that the caller's segment lists keep alive.
            found = False
            best_seq = 0
            for t in range(nties):
                i = ties[t]
                c = &cursors[i]
                while True:  # the current row holds the key; so may the next ones (older versions)
                    seq = _seq(c)
                    if seq <= snapshot_seq and (not found or seq > best_seq):
                        found, best_seq = True, seq
                        winner_seg, winner_pos, winner_block = c.seg, c.pos, c.is_block
                    _advance(c, <list>sources[i])
                    if c.key == NULL or lakekv_key_order(c.key, c.key_len, key, key_len) != 0:
                        break
            if not found:
                continue
            if winner_block:
                block = <BlockView>winner_seg
                live = block._kinds[winner_pos] == _PUT and not (
                    block._expires != NULL and _valid_bit(block._expire_valid, block._expire_bit0 + winner_pos)
                    and block._expires[winner_pos] <= now_ms)
                if not live:
                    continue
                vstart = block._value_offsets[winner_pos]
                vptr = block._value_data + vstart
                vlen = block._value_offsets[winner_pos + 1] - vstart
                vstart = block._key_offsets[winner_pos]
                if pairs:
                    result.append((PyBytes_FromStringAndSize(<const char*>block._key_data + vstart,
                                                             block._key_offsets[winner_pos + 1] - vstart),
                                   PyBytes_FromStringAndSize(<const char*>vptr, vlen)))
                else:
                    out.append(block._key_data + vstart, block._key_offsets[winner_pos + 1] - vstart, vptr, vlen)
            else:
                row = (<list>winner_seg)[winner_pos]
                if (<tuple>row)[2] != _PUT:
                    continue
                expire = (<tuple>row)[4]
                if expire is not None and expire <= now_ms:
                    continue
                if pairs:
                    result.append(((<tuple>row)[0], (<tuple>row)[3]))
                else:
                    value = (<tuple>row)[3]
                    key_obj = (<tuple>row)[0]
                    out.append(<const uint8_t*>PyBytes_AS_STRING(key_obj), PyBytes_GET_SIZE(key_obj),
                               <const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    finally:
        PyMem_Free(ties)
        PyMem_Free(cursors)
    if pairs:
        return result
    return _binary_array(out, True), _binary_array(out, False)


cdef inline bint _valid_bit(const uint8_t* bitmap, Py_ssize_t bit) noexcept nogil:
    return bitmap == NULL or (bitmap[bit >> 3] >> (bit & 7)) & 1


cdef object _binary_array(_Out out, bint keys):
    """An Arrow ``binary`` array of the collected keys (or values), copied into fresh buffers."""
    cdef Py_ssize_t n = out.n, i, total = out.key_bytes if keys else out.value_bytes
    if total > 0x7FFFFFFF:
        raise OverflowError("a scan window holds more than 2 GiB of keys or values")
    offsets = bytearray((n + 1) * 4)
    data = bytearray(total)
    cdef int32_t* offs = <int32_t*>(<char*>offsets)
    cdef uint8_t* dst = <uint8_t*>(<char*>data) if total else NULL
    cdef const uint8_t** ptrs = out.keys if keys else out.values
    cdef Py_ssize_t* lens = out.key_lens if keys else out.value_lens
    cdef int32_t pos = 0
    for i in range(n):
        offs[i] = pos
        if lens[i]:
            memcpy(dst + pos, ptrs[i], lens[i])
        pos += <int32_t>lens[i]
    offs[n] = pos
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
