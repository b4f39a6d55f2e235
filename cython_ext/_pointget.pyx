# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The point-get path in C: memtable probe, bloom filter, block index, key
search inside an SST block's Arrow buffers, and visibility.

Pure-Python twins (the spec; the tests run both on the same random stores):
``kvstore.format.block_view.PyBlockView`` for :class:`BlockView`,
``SSTReader.get`` for :meth:`SSTProbe.get`, and ``kvstore.reader.get_row_py``
/ ``visible_value`` for :func:`get_row` / :func:`get_value`.
``kvstore.format.block_view`` and ``kvstore.reader`` pick one at import time.

Why this shape (measurements: benchmarks/results/PROFILE.md, "Engine-speed pass";
rerun with benchmarks/pointget_bench.py):

* A cached block is the Arrow record batch exactly as read from the file
  (zero-copy over the bytes the CRC was checked on), plus the addresses of
  its buffers. A get binary-searches the key offsets with ``memcmp`` and
  builds one ``bytes`` for the value: no Python row tuple, no key list, so
  the cache can charge a block its size on disk and a 64 MiB cache holds a
  ~60 MiB data set instead of a fifth of it.
* The whole lookup is one call from Python: the memtable (a dict probe), each
  L0 file and the one file of each sorted run whose range holds the key
  (range check, bloom filter with the same XXH64 kernel the writer used, the
  block index, then the block). The Python path made ~60 calls per get and
  validated the key at every layer; here the caller validates it once.
* On a store larger than the CPU caches a get costs its cache misses, not its
  instructions, so each step reads as few cache lines as it can: the block
  index and each block are searched through key heads in a static tree
  (``_keyindex.pxd``), a block's summaries (newest seq, all PUTs, one value
  length) spare the seq, kind and value-offset columns, a cached block is
  revisited through its cache entry (``_lru.pyx``) without hashing a key, and
  each ``Layers`` is indexed once (:class:`_LayersIndex`) instead of read
  attribute by attribute.
* The key's bloom hash is computed at most once per get, when a filter is
  first consulted, and reused for every file, because all files use the same
  hash (XXH64, seed 0) and differ only in ``num_bits``/``num_hashes``.

Thread-safety: a :class:`BlockView` and an :class:`SSTProbe` are immutable
after construction; the block cache lookup they call has its own lock.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.weakref cimport PyWeakref_GetObject
from libc.stdint cimport int32_t, int64_t, uint64_t, uint8_t, uintptr_t
from libc.string cimport memcmp, memset

from cython_ext._bloom cimport _xxh64
from cython_ext._keyindex cimport (KeyIndex, head_of, index_alloc, index_end_of_head, index_finish, index_first_head_at_least,
                                   index_free, index_prefix_order)
from cython_ext._lru cimport CacheEntry, LruCore

import sys
import time
import weakref

if sys.byteorder != "little":  # Arrow buffers are read in host order
    raise ImportError("cython_ext._pointget supports little-endian hosts only")

# Mirrors kvstore.format.rows (stored on disk: never renumber); a test checks
# that they agree. Not imported from there: cython_ext does not depend on kvstore.
cdef enum:
    _PUT = 1
    # BlockView.find results besides a row index:
    _NOT_HERE = -1      # the key has no visible version in this block or later ones
    _NEXT_BLOCK = -2    # the key's versions run on past the block's end: try the next block

PUT = _PUT
NOT_HERE = _NOT_HERE
NEXT_BLOCK = _NEXT_BLOCK


cdef int64_t _clock_ms() except? -1:
    """Milliseconds since the epoch, as ``kvstore.reader.now_ms`` computes them."""
    return <int64_t>(time.time() * 1000)


cdef inline int _cmp_bytes(object a, const uint8_t* b, Py_ssize_t blen) noexcept:
    """Compare the ``bytes`` object ``a`` with ``b[:blen]``."""
    return _cmp(<const uint8_t*>PyBytes_AS_STRING(a), PyBytes_GET_SIZE(a), b, blen)


cdef inline const uint8_t* _address(object buf) except? NULL:
    if buf is None:
        return NULL
    return <const uint8_t*><uintptr_t>buf.address


cdef inline bint _valid(const uint8_t* bitmap, Py_ssize_t bit) noexcept nogil:
    return bitmap == NULL or (bitmap[bit >> 3] >> (bit & 7)) & 1


cdef class BlockView:
    """One SST data block in its compact form: the Arrow batch as read.

    Args:
        batch: a ROW_SCHEMA record batch that passed ``validate(full=True)``
            (offsets inside their data buffers); the view keeps it alive and
            reads its buffers in place.
        nbytes: the bytes the batch's buffers occupy (what the cache charges).

    Raises:
        ValueError: a non-nullable column (key, seq, kind) holds nulls.
    """

    # Attributes: see _pointget.pxd (cython_ext._scan reads the buffers too).

    def __cinit__(self, batch, Py_ssize_t nbytes):
        keys, seqs, kinds, values, expires = batch.columns
        if keys.null_count or seqs.null_count or kinds.null_count:
            raise ValueError("key, seq and kind columns must not hold nulls")
        self.batch = batch
        self.num_rows = batch.num_rows
        self.nbytes = nbytes
        cdef Py_ssize_t offset = keys.offset
        buffers = keys.buffers()
        self._key_offsets = (<const int32_t*>_address(buffers[1])) + offset
        self._key_data = _address(buffers[2])
        offset = seqs.offset
        self._seqs = (<const uint64_t*>_address(seqs.buffers()[1])) + offset
        offset = kinds.offset
        self._kinds = _address(kinds.buffers()[1]) + offset
        offset = values.offset
        buffers = values.buffers()
        self._value_valid = _address(buffers[0]) if values.null_count else NULL
        self._value_bit0 = offset
        self._value_offsets = (<const int32_t*>_address(buffers[1])) + offset
        self._value_data = _address(buffers[2])
        offset = expires.offset
        buffers = expires.buffers()
        self._expire_valid = _address(buffers[0]) if expires.null_count else NULL
        self._expire_bit0 = offset
        # No data buffer (an all-null int64 column may come without one), or
        # no row that expires: NULL, and a get reads no bitmap.
        self._expires = NULL
        if buffers[1] is not None and expires.null_count < self.num_rows:
            self._expires = (<const int64_t*>_address(buffers[1])) + offset
        cdef Py_ssize_t i, n = self.num_rows
        self._only_puts = True
        for i in range(n):
            if self._seqs[i] > self._max_seq:
                self._max_seq = self._seqs[i]
            if self._kinds[i] != _PUT:
                self._only_puts = False
        self._value_len = -1
        if n > 0 and self._value_valid == NULL:
            self._value_len = self._value_offsets[1] - self._value_offsets[0]
            for i in range(1, n):
                if self._value_offsets[i + 1] - self._value_offsets[i] != self._value_len:
                    self._value_len = -1
                    break
            self._value_base = self._value_data + self._value_offsets[0] if self._value_data != NULL else NULL
        self._build_index()

    def __dealloc__(self):
        index_free(&self._index)

    cdef int _build_index(self) except -1:
        """The key index (see _keyindex.pxd) that :meth:`_find` searches.

        Why: a binary search over the key column touches, per step, an offset
        and a key in the data buffer (two cache misses in a block seen for
        the first time) and calls ``memcmp``. Keys in a block share a long
        prefix (the harness's 16-byte keys share 13 bytes in a 465-row
        block), so the 8 bytes after the shared prefix order the keys almost
        always by themselves, and often hold all the rest of each key.
        """
        cdef Py_ssize_t n = self.num_rows, i, start, klen
        if n == 0:
            return index_alloc(&self._index, 0, NULL, 0, NULL, 0)
        cdef const int32_t* offsets = self._key_offsets
        cdef const uint8_t* data = self._key_data
        index_alloc(&self._index, n, data + offsets[0], offsets[1] - offsets[0],
                    data + offsets[n - 1], offsets[n] - offsets[n - 1])
        cdef Py_ssize_t lcp = self._index.lcp, length = offsets[1] - offsets[0]
        cdef bint whole = length - lcp <= 8
        for i in range(n):
            start = offsets[i]
            klen = offsets[i + 1] - start
            whole = whole and klen == length
            self._index.heads[i] = head_of(data + start + lcp, klen - lcp)
        if whole and length <= 0x7FFFFFFF:
            self._index.key_len = <int32_t>length
        index_finish(&self._index)
        return 0

    # -- C level -----------------------------------------------------------------

    cdef int _cmp_key(self, Py_ssize_t i, const uint8_t* k, Py_ssize_t klen) noexcept nogil:
        cdef int32_t start = self._key_offsets[i]
        return _cmp(self._key_data + start, self._key_offsets[i + 1] - start, k, klen)

    cdef Py_ssize_t _search(self, const uint8_t* k, Py_ssize_t klen, uint64_t h) noexcept nogil:
        """``bisect_left`` over all keys for a key ``k`` that starts with the
        block's prefix and has head ``h``: on the heads, then ``memcmp``
        among equal heads (none when a head holds the whole key)."""
        cdef Py_ssize_t lo = index_first_head_at_least(&self._index, h), hi, mid
        if klen == self._index.key_len:
            return lo
        hi = index_end_of_head(&self._index, lo, h)
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._cmp_key(mid, k, klen) < 0:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef Py_ssize_t _lower_bound(self, const uint8_t* k, Py_ssize_t klen, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        """``bisect_left`` over keys ``[lo, hi)``."""
        if lo >= hi:
            return lo
        # Every key of the block starts with the prefix: a key that differs
        # from it sorts before or after all of them.
        cdef int order = index_prefix_order(&self._index, k, klen)
        if order < 0:
            return lo
        if order > 0:
            return hi
        cdef Py_ssize_t lcp = self._index.lcp
        cdef Py_ssize_t i = self._search(k, klen, head_of(k + lcp, klen - lcp))
        return lo if i < lo else hi if i > hi else i

    cdef Py_ssize_t _find(self, const uint8_t* k, Py_ssize_t klen, uint64_t snapshot_seq) noexcept nogil:
        cdef Py_ssize_t n = self.num_rows
        if n == 0:
            return _NEXT_BLOCK
        cdef int order = index_prefix_order(&self._index, k, klen)
        if order != 0:  # before every key (one follows) or after them all
            return _NOT_HERE if order < 0 else _NEXT_BLOCK
        cdef Py_ssize_t lcp = self._index.lcp
        cdef uint64_t h = head_of(k + lcp, klen - lcp)
        cdef Py_ssize_t i = self._search(k, klen, h)
        cdef bint all_visible = snapshot_seq >= self._max_seq
        if klen == self._index.key_len:  # equal heads are equal keys: no key bytes to read
            while i < n and self._index.heads[i] == h:
                if all_visible or self._seqs[i] <= snapshot_seq:
                    return i
                i += 1
        else:
            while i < n and self._cmp_key(i, k, klen) == 0:
                if all_visible or self._seqs[i] <= snapshot_seq:
                    return i
                i += 1
        return _NOT_HERE if i < n else _NEXT_BLOCK

    cdef bytes _key(self, Py_ssize_t i):
        cdef int32_t start = self._key_offsets[i]
        return PyBytes_FromStringAndSize(<const char*>self._key_data + start, self._key_offsets[i + 1] - start)

    cdef object _value(self, Py_ssize_t i):
        if self._value_len >= 0:  # fixed-length values: no offsets line to read first
            return PyBytes_FromStringAndSize(<const char*>self._value_base + i * self._value_len, self._value_len)
        if not _valid(self._value_valid, self._value_bit0 + i):
            return None
        cdef int32_t start = self._value_offsets[i]
        return PyBytes_FromStringAndSize(<const char*>self._value_data + start, self._value_offsets[i + 1] - start)

    cdef object _expire(self, Py_ssize_t i):
        if self._expires == NULL or not _valid(self._expire_valid, self._expire_bit0 + i):
            return None
        return self._expires[i]

    cdef tuple _row(self, Py_ssize_t i):
        return (self._key(i), self._seqs[i], self._kinds[i], self._value(i), self._expire(i))

    cdef object _visible_value(self, Py_ssize_t i, object now_ms):
        """The value row ``i`` shows a reader at ``now_ms`` (None: the clock, read
        only if the row can expire): None for a delete or an expired row."""
        if not self._only_puts and self._kinds[i] != _PUT:
            return None
        if self._expires != NULL and _valid(self._expire_valid, self._expire_bit0 + i):
            if self._expires[i] <= (_clock_ms() if now_ms is None else <int64_t>now_ms):
                return None
        return self._value(i)

    # -- Python level (the twin's interface) -------------------------------------

    def find(self, bytes key, uint64_t snapshot_seq):
        """Index of ``key``'s newest row with ``seq <= snapshot_seq``, else
        :data:`NOT_HERE` or :data:`NEXT_BLOCK`."""
        return self._find(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), snapshot_seq)

    def lower_bound(self, bytes key, Py_ssize_t lo=0, hi=None):
        """First index in ``[lo, hi)`` whose key is ``>= key`` (``bisect_left``)."""
        cdef Py_ssize_t stop = self.num_rows if hi is None else hi
        if lo < 0 or stop > self.num_rows or lo > stop:
            raise IndexError(f"bad range [{lo}, {stop}) for a block of {self.num_rows} rows")
        return self._lower_bound(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), lo, stop)

    def key_at(self, Py_ssize_t i):
        """The key of row ``i``."""
        self._check_index(i)
        return self._key(i)

    def row(self, Py_ssize_t i):
        """Row ``i`` as a ``(key, seq, kind, value, expire_at_ms)`` tuple."""
        self._check_index(i)
        return self._row(i)

    def rows(self, Py_ssize_t lo, Py_ssize_t hi, snapshot_seq=None):
        """Rows ``[lo, hi)`` as tuples, optionally only those with ``seq <= snapshot_seq``."""
        if lo < 0 or hi > self.num_rows or lo > hi:
            raise IndexError(f"bad range [{lo}, {hi}) for a block of {self.num_rows} rows")
        cdef uint64_t limit = 0xFFFFFFFFFFFFFFFF if snapshot_seq is None else snapshot_seq
        cdef list out = []
        cdef Py_ssize_t i
        for i in range(lo, hi):
            if self._seqs[i] <= limit:
                out.append(self._row(i))
        return out

    def visible_value(self, Py_ssize_t i, int64_t now_ms):
        """What a reader at ``now_ms`` sees in row ``i``: its value, or None (delete, expired)."""
        self._check_index(i)
        return self._visible_value(i, now_ms)

    cdef int _check_index(self, Py_ssize_t i) except -1:
        if not 0 <= i < self.num_rows:
            raise IndexError(f"row {i} out of range for a block of {self.num_rows} rows")
        return 0


cdef int _tuple_index(KeyIndex* index, tuple keys) except -1:
    """The key index (see _keyindex.pxd) of a sorted tuple of ``bytes``, as
    ``BlockView._build_index`` makes for a block: for the block index in a
    file's footer. ``index`` must be zeroed; free it with ``index_free``."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(keys), i, klen
    if n == 0:
        return index_alloc(index, 0, NULL, 0, NULL, 0)
    cdef bytes first = <bytes?>PyTuple_GET_ITEM(keys, 0)
    cdef bytes last = <bytes?>PyTuple_GET_ITEM(keys, n - 1)
    cdef const uint8_t* a = <const uint8_t*>PyBytes_AS_STRING(first)
    index_alloc(index, n, a, PyBytes_GET_SIZE(first), <const uint8_t*>PyBytes_AS_STRING(last), PyBytes_GET_SIZE(last))
    cdef Py_ssize_t lcp = index.lcp, length = PyBytes_GET_SIZE(first)
    cdef bint whole = length - lcp <= 8
    cdef bytes key
    for i in range(n):
        key = <bytes?>PyTuple_GET_ITEM(keys, i)
        klen = PyBytes_GET_SIZE(key)
        if klen < lcp or memcmp(PyBytes_AS_STRING(key), a, lcp) != 0:
            index_free(index)
            raise ValueError("block index keys are not sorted")
        whole = whole and klen == length
        index.heads[i] = head_of(<const uint8_t*>PyBytes_AS_STRING(key) + lcp, klen - lcp)
    if whole and length <= 0x7FFFFFFF:
        index.key_len = <int32_t>length
    index_finish(index)
    return 0


cdef Py_ssize_t _tuple_lower_bound(tuple keys, const KeyIndex* index, const uint8_t* k, Py_ssize_t klen) noexcept:
    """``bisect_left(keys, k)`` over a sorted tuple of ``bytes`` through its
    index from :func:`_tuple_index` (the search of ``BlockView._lower_bound``)."""
    cdef Py_ssize_t n = index.n, lo, hi, mid
    if n == 0:
        return 0
    cdef int order = index_prefix_order(index, k, klen)
    if order != 0:
        return 0 if order < 0 else n
    cdef uint64_t h = head_of(k + index.lcp, klen - index.lcp)
    lo = index_first_head_at_least(index, h)
    if klen == index.key_len:  # equal heads are equal keys
        return lo
    hi = index_end_of_head(index, lo, h)
    while lo < hi:  # equal heads: the rest of the bytes decide
        mid = (lo + hi) >> 1
        if _cmp_bytes(<object>PyTuple_GET_ITEM(keys, mid), k, klen) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


def tuple_lower_bound(tuple keys, bytes key):
    """``bisect_left(keys, key)`` through the key index (for the tests)."""
    cdef KeyIndex index
    memset(&index, 0, sizeof(KeyIndex))
    _tuple_index(&index, keys)
    try:
        return _tuple_lower_bound(keys, &index, <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
    finally:
        index_free(&index)


cdef class SSTProbe:
    """The point-lookup part of one SST's metadata, in C-friendly form.

    Args:
        meta: the file's ``SSTMeta`` (key range, seq range, bloom filter, block index).
        cache: the block cache (its ``get`` is called with ``(url, path, block)``), or None.
        url, path: the cache key prefix of the file's blocks.
    """

    cdef readonly bytes min_key
    cdef readonly bytes max_key
    cdef uint64_t _min_seq
    cdef bytes _bloom_bits
    cdef uint64_t _num_bits
    cdef int _num_hashes
    cdef tuple _first_keys
    cdef tuple _last_keys
    cdef Py_ssize_t _blocks
    # The key index of _last_keys (see _keyindex.pxd): the block-index
    # search compares integers in a few cache lines instead of chasing a
    # bytes object per step.
    cdef KeyIndex _last_index
    cdef object _cache_get
    # The compiled cache core (None for any other cache) and, per block, the
    # entry it last found for the block (None before): a hit revisits the
    # entry without building or hashing the key (see cython_ext/_lru.pyx).
    cdef LruCore _lru
    cdef list _handles
    cdef object _url
    cdef object _path

    def __cinit__(self, meta, cache, str url, str path):
        info = meta.info
        bloom = meta.bloom
        self.min_key = info.min_key
        self.max_key = info.max_key
        self._min_seq = info.min_seq
        self._bloom_bits = bloom.bits
        self._num_bits = bloom.num_bits
        self._num_hashes = bloom.num_hashes
        if self._num_bits == 0 or <uint64_t>len(self._bloom_bits) * 8 < self._num_bits:
            raise ValueError("bloom filter has fewer bits than num_bits")
        self._first_keys = tuple(meta.first_keys)
        self._last_keys = tuple(meta.last_keys)
        self._blocks = len(self._first_keys)
        if len(self._last_keys) != self._blocks:
            raise ValueError("first_keys and last_keys differ in length")
        _tuple_index(&self._last_index, self._last_keys)
        self._cache_get = None if cache is None else cache.get
        self._lru = cache if isinstance(cache, LruCore) else None
        self._handles = [None] * self._blocks
        self._url = url
        self._path = path

    def __dealloc__(self):
        index_free(&self._last_index)

    cdef bint _may_contain(self, const uint8_t* k, Py_ssize_t klen, uint64_t h) noexcept:
        if _cmp_bytes(self.min_key, k, klen) > 0 or _cmp_bytes(self.max_key, k, klen) < 0:
            return False
        cdef const uint8_t* bits = <const uint8_t*>PyBytes_AS_STRING(self._bloom_bits)
        cdef uint64_t h1 = h & 0xFFFFFFFFULL
        cdef uint64_t h2 = h >> 32
        cdef uint64_t b
        cdef int i
        for i in range(self._num_hashes):
            b = (h1 + <uint64_t>i * h2) % self._num_bits
            if not (bits[b >> 3] & (1 << (b & 7))):
                return False
        return True

    cdef object _cached(self, Py_ssize_t b):
        """Block ``b`` from the cache, or None."""
        cdef CacheEntry entry
        cdef object found
        if self._lru is not None:
            entry = <CacheEntry>PyList_GET_ITEM(self._handles, b)
            if entry is not None:
                found = self._lru.revisit(entry)
                if found is not None:
                    return found
            entry = self._lru.find((self._url, self._path, b))
            if entry is None:
                return None
            self._handles[b] = entry
            return entry.value
        if self._cache_get is None:
            return None
        return self._cache_get((self._url, self._path, b))

    cdef BlockView _get(self, object sst, const uint8_t* k, Py_ssize_t klen, uint64_t* h, uint64_t snapshot_seq,
                        Py_ssize_t* index, bint bloom_first):
        """The block holding the key's newest visible row (its index in ``index``), or None.

        ``bloom_first``: probe the bloom filter before anything else (an L0
        file, which usually does not hold the key). Else (the one file of a
        sorted run whose range holds the key) probe it only before reading a
        block the cache does not hold: a cached block answers as fast as the
        filter's ~7 scattered bit reads, and a present key (the common case
        at the bottom of the tree) then pays for no filter at all.

        ``h``: the key's bloom hash, or 0 if not computed yet (then it is, at
        most once, when the filter is needed; a key whose hash is 0 is merely
        hashed again).
        """
        if snapshot_seq < self._min_seq:
            return None
        cdef bint bloom_checked = bloom_first
        if bloom_first:
            if h[0] == 0:
                h[0] = _xxh64(k, klen, 0)
            if not self._may_contain(k, klen, h[0]):
                return None
        elif _cmp_bytes(self.min_key, k, klen) > 0 or _cmp_bytes(self.max_key, k, klen) < 0:
            return None
        # First block whose last key is >= key (bisect_left over last_keys).
        cdef Py_ssize_t lo = _tuple_lower_bound(self._last_keys, &self._last_index, k, klen), i
        cdef object found
        cdef BlockView block
        # A cached block answers for a key in the gap before its first key
        # too (``_find``: NOT_HERE), so the first key (a cold bytes object)
        # is compared only before a block read.
        while lo < self._blocks:
            found = self._cached(lo)
            if found is None:
                if _cmp_bytes(<object>PyTuple_GET_ITEM(self._first_keys, lo), k, klen) > 0:
                    return None
                if not bloom_checked:
                    if h[0] == 0:
                        h[0] = _xxh64(k, klen, 0)
                    if not self._may_contain(k, klen, h[0]):
                        return None
                    bloom_checked = True
                found = sst._load_block(lo)
            block = <BlockView?>found
            i = block._find(k, klen, snapshot_seq)
            if i >= 0:
                index[0] = i
                return block
            if i == _NOT_HERE:
                return None
            lo += 1  # the key's older versions continue in the next block
        return None

    def get(self, sst, bytes key, uint64_t snapshot_seq):
        """``SSTReader.get`` without argument checks: the row tuple, or None.

        ``sst`` is the reader that owns this probe (it loads missing blocks).
        """
        cdef Py_ssize_t klen = PyBytes_GET_SIZE(key)
        cdef const uint8_t* k = <const uint8_t*>PyBytes_AS_STRING(key)
        cdef Py_ssize_t index = 0
        cdef uint64_t h = 0
        cdef BlockView block = self._get(sst, k, klen, &h, snapshot_seq, &index, True)
        return None if block is None else block._row(index)


cdef class _LayersIndex:
    """One ``Layers`` as the lookup reads it: its SST probes in tuples.

    Why: the lookup used to read ``layers.l0``, ``layers.runs``, ``run.ssts``
    and each file's ``_probe`` as Python attributes on every get (one per
    step of the bisection over a run's files). ``Layers`` is immutable, so
    the index is built once per ``Layers`` object (see :func:`_index_of` and
    ``StoreGetter``) and then read with tuple indexing only.
    """

    cdef object memtable
    cdef tuple l0            # SSTReaders, newest first
    cdef tuple l0_probes     # their SSTProbes
    cdef tuple run_ssts      # per sorted run, newest first: its SSTReaders in key order
    cdef tuple run_probes    # ... and their SSTProbes

    def __cinit__(self, layers):
        self.memtable = layers.memtable
        self.l0 = tuple(layers.l0)
        self.l0_probes = tuple([_probe_of(sst) for sst in self.l0])
        ssts = [tuple(run.ssts) for run in layers.runs]
        self.run_ssts = tuple(ssts)
        self.run_probes = tuple([tuple([_probe_of(sst) for sst in run]) for run in ssts])


cdef SSTProbe _probe_of(sst):
    probe = sst._probe
    if not isinstance(probe, SSTProbe):  # None: a reader opened with implementation="python"
        raise TypeError(f"{sst!r} has no compiled probe: read it with kvstore.reader.get_row_py")
    return <SSTProbe>probe


# The index of the Layers the module-level get_row/get_value read last
# (snapshots and transactions read one Layers many times). Held through a
# weak reference to the Layers, and dropped with it: the index holds the
# files, and through them the block cache, which must not outlive the store.
cdef object _recent_layers = None   # weakref.ref to a Layers, or None
cdef _LayersIndex _recent_index = None


def _forget_recent(ref):
    global _recent_layers, _recent_index
    if ref is _recent_layers:
        _recent_layers = None
        _recent_index = None


cdef _LayersIndex _index_of(object layers):
    global _recent_layers, _recent_index
    cdef object ref = _recent_layers
    cdef _LayersIndex index = _recent_index
    if ref is not None and index is not None and PyWeakref_GetObject(ref) == <PyObject*>layers:
        return index
    index = _LayersIndex(layers)
    _recent_layers = None  # while both change, a concurrent reader sees no entry rather than a torn one
    _recent_index = index
    _recent_layers = weakref.ref(layers, _forget_recent)
    return index


cdef object _lookup(_LayersIndex layers, bytes key, uint64_t snapshot_seq, Py_ssize_t* index):
    """Newest row of ``key`` with ``seq <= snapshot_seq``: a memtable row tuple
    (``index`` set to -1), a :class:`BlockView` (``index`` = the row), or None."""
    cdef Py_ssize_t klen = PyBytes_GET_SIZE(key)
    cdef const uint8_t* k = <const uint8_t*>PyBytes_AS_STRING(key)
    cdef PyObject* versions = PyDict_GetItem(layers.memtable._rows, key)
    cdef Py_ssize_t i, n, r, lo, hi, mid
    cdef object row
    if versions != NULL:
        n = PyTuple_GET_SIZE(<object>versions)
        for i in range(n):
            row = <object>PyTuple_GET_ITEM(<object>versions, i)
            if <uint64_t>row[1] <= snapshot_seq:
                index[0] = -1
                return row
    cdef BlockView block
    cdef SSTProbe probe
    cdef tuple files = layers.l0_probes
    # The bloom hash, computed once, when a file first needs it (0: not yet).
    cdef uint64_t h = 0
    for i in range(PyTuple_GET_SIZE(files)):
        probe = <SSTProbe>PyTuple_GET_ITEM(files, i)
        block = probe._get(<object>PyTuple_GET_ITEM(layers.l0, i), k, klen, &h, snapshot_seq, index, True)
        if block is not None:
            return block
    for r in range(PyTuple_GET_SIZE(layers.run_probes)):
        files = <tuple>PyTuple_GET_ITEM(layers.run_probes, r)
        # The one SST whose range can hold the key: first with max_key >= key.
        lo, hi = 0, PyTuple_GET_SIZE(files)
        while lo < hi:
            mid = (lo + hi) >> 1
            if _cmp_bytes((<SSTProbe>PyTuple_GET_ITEM(files, mid)).max_key, k, klen) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < PyTuple_GET_SIZE(files):
            probe = <SSTProbe>PyTuple_GET_ITEM(files, lo)
            block = probe._get(<object>PyTuple_GET_ITEM(<tuple>PyTuple_GET_ITEM(layers.run_ssts, r), lo),
                               k, klen, &h, snapshot_seq, index, False)
            if block is not None:
                return block
    return None


def get_row(layers, bytes key, uint64_t snapshot_seq):
    """Newest row of ``key`` with ``seq <= snapshot_seq`` across ``layers``, or None.

    Requires: ``key`` already validated (non-empty, within the size limit).
    """
    cdef Py_ssize_t index = -1
    found = _lookup(_index_of(layers), key, snapshot_seq, &index)
    if found is None or index < 0:
        return found
    return (<BlockView>found)._row(index)


def get_value(layers, bytes key, uint64_t snapshot_seq, now_ms=None):
    """What a reader at ``snapshot_seq`` and ``now_ms`` sees for ``key``: the
    value, or None (no row, a delete, or an expired row). ``now_ms`` None:
    the wall clock, read only when the row found has an expiry.

    Requires: ``key`` already validated (non-empty, within the size limit).
    """
    cdef Py_ssize_t index = -1
    return _visible(_lookup(_index_of(layers), key, snapshot_seq, &index), index, now_ms)


cdef object _visible(object found, Py_ssize_t index, object now_ms):
    """What a reader sees in ``_lookup``'s result: the value, or None."""
    if found is None:
        return None
    if index >= 0:
        return (<BlockView>found)._visible_value(index, now_ms)
    row = <tuple>found
    if row[2] != _PUT:
        return None
    expire = row[4]
    if expire is not None and expire <= (_clock_ms() if now_ms is None else now_ms):
        return None
    return row[3]

cdef class StoreGetter:
    """``Store.get`` in one compiled call: the closed check, the key check,
    the read barrier, the handle's head and layers, and :func:`get_value`.

    A get through ``Store.get`` used to cost five Python-level calls around
    the compiled lookup (``_check_open``, ``check_key``, the ``last_seq``
    property, the state's attributes); at ~4 µs per get that was a tenth of it.
    The linearizable barrier (:meth:`set_barrier`) was three more (``sync``,
    the beacon's ``read``, the head's version), ~0.15 µs of a ~1.1 µs get.

    Args:
        state: the handle's ``EngineState`` (read: ``head``, then ``layers``).
        check_key: the Python key validator; called only for keys that are
            not a non-empty ``bytes`` of at most ``max_key_bytes`` (it
            converts ``bytearray``/``memoryview`` or raises the user-facing error).
        max_key_bytes: the key size limit.
        raise_closed: called (and expected to raise) once :attr:`closed` is set.

    Pure-Python twin: ``kvstore.reader.StoreGetterPy``.
    """

    cdef object _state
    cdef object _check_key
    cdef Py_ssize_t _max_key_bytes
    cdef object _raise_closed
    cdef bint _closed
    # The read barrier (set_barrier): None = no barrier; else called before
    # the lookup, unless the beacon shows no version newer than the head.
    cdef object _sync
    cdef Py_buffer _beacon_buffer
    cdef const uint64_t* _beacon
    # The index of the state's layers as last read, and those layers (held:
    # compared by identity, so they must not be freed and their address reused).
    cdef object _indexed_layers
    cdef _LayersIndex _index
    # What :meth:`read` adds to a get (bind_store): the handle's lease
    # filter and its consistency barrier for an explicit ``consistency``.
    cdef object _lease_reads
    cdef object _sync_for

    def __cinit__(self, state, check_key, Py_ssize_t max_key_bytes, raise_closed):
        self._state = state
        self._check_key = check_key
        self._max_key_bytes = max_key_bytes
        self._raise_closed = raise_closed
        self._closed = False
        self._sync = None
        self._beacon = NULL

    def __dealloc__(self):
        self._release_beacon()

    cdef void _release_beacon(self) noexcept:
        if self._beacon != NULL:
            self._beacon = NULL
            PyBuffer_Release(&self._beacon_buffer)

    @property
    def closed(self):
        return self._closed

    @closed.setter
    def closed(self, bint value):
        """Set by ``Store.close`` before the beacon's mapping is closed: a
        closed getter lets go of it (and never reads it again)."""
        self._closed = value
        if value:
            self._release_beacon()

    def set_barrier(self, beacon, sync):
        """Make :meth:`get` linearizable: call ``sync()`` first, unless
        ``beacon`` (a ``HeadBeacon``, or None: always call) shows no version
        newer than the head. ``sync`` None: no barrier.

        The beacon's mapping is read as an aligned little-endian 8-byte load,
        as ``HeadBeacon.read`` does; elsewhere ``sync`` is called every time.
        """
        self._release_beacon()
        self._sync = sync
        if sync is None or beacon is None or sys.byteorder != "little" or self._closed:
            return
        PyObject_GetBuffer(beacon.mapping, &self._beacon_buffer, PyBUF_SIMPLE)
        if self._beacon_buffer.len < 8 or (<uintptr_t>self._beacon_buffer.buf) % 8:
            PyBuffer_Release(&self._beacon_buffer)
            return
        self._beacon = <const uint64_t*>self._beacon_buffer.buf

    def bind_store(self, lease_reads, sync_for):
        """Make :meth:`read` the whole of ``Store.get``.

        Args:
            lease_reads: the handle's ``LeaseReads`` (read: ``seen``, ``value``).
            sync_for: ``Store._sync``: validates an explicit ``consistency``
                and brings the view up to date when it asks for that.
        """
        self._lease_reads = lease_reads
        self._sync_for = sync_for

    def read(self, key, consistency=None):
        """``Store.get(key, consistency)`` (see there), after :meth:`bind_store`.

        ``Store.__init__`` binds the handle's ``get`` to this method: a get
        is then one call from Python, with no Python frame of its own (it
        was ~0.1 µs of a ~1 µs get on a settled store).
        """
        cdef uint64_t seq = 0
        if consistency is None:
            value = self._get(key, True, &seq)
        else:
            if consistency != "serializable":
                self._sync_for(consistency)
            value = self._get(key, False, &seq)
        if value is None:
            return None
        # LeaseReads.active's common case, inlined: the view the value was
        # read in holds no lease record (then no row carries a lease marker).
        lease_reads = self._lease_reads
        seen = <tuple?>lease_reads.seen
        seen_seq = seen[0]
        if not seen[1] and type(seen_seq) is int and seen_seq >= 0 and <uint64_t>seen_seq == seq:
            return value
        state = self._state
        return lease_reads.value(key, value, state.layers, state.head[1])

    def get(self, key):
        """The value ``key`` has in the state's current view, or None."""
        cdef uint64_t seq
        return self._get(key, False, &seq)

    def get_synced(self, key):
        """:meth:`get` behind the barrier of :meth:`set_barrier` (none set: the same as :meth:`get`)."""
        cdef uint64_t seq
        return self._get(key, True, &seq)

    cdef object _get(self, object key, bint synced, uint64_t* seq_out):
        """The value of ``key``, or None; ``seq_out``: the seq it was read at."""
        if self._closed:
            self._raise_closed()
            raise RuntimeError("raise_closed returned")  # it must raise; never read a closed store
        if type(key) is not bytes or PyBytes_GET_SIZE(key) == 0 or PyBytes_GET_SIZE(key) > self._max_key_bytes:
            key = self._check_key(key)
            if self._closed:  # closed while Python code ran: the beacon may be gone
                self._raise_closed()
                raise RuntimeError("raise_closed returned")
        state = self._state
        cdef const uint64_t* beacon
        cdef tuple head = <tuple?>state.head
        if synced and self._sync is not None:
            # Loaded after the last step that could run Python code (and so
            # let Store.close release the mapping): NULL once released.
            beacon = self._beacon
            if beacon == NULL or beacon[0] > <uint64_t>head[0]:
                self._sync()
                head = <tuple?>state.head
        # Head before layers, as Store._view: apply_root installs a version's
        # rows before it moves the head, so layers read after the head hold
        # every row up to its seq (newer ones are filtered by seq).
        cdef uint64_t seq = <uint64_t>head[1]
        seq_out[0] = seq
        layers = state.layers
        cdef _LayersIndex layers_index = self._index
        if layers is not self._indexed_layers:
            layers_index = _LayersIndex(layers)
            self._index = layers_index
            self._indexed_layers = layers
        cdef Py_ssize_t index = -1
        return _visible(_lookup(layers_index, <bytes?>key, seq, &index), index, None)
