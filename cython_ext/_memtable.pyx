# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The memtable's per-row insert in C: one pass over a version's rows.

Pure-Python twin (the spec): ``kvstore.memtable.apply_rows_py``;
``kvstore.memtable`` picks one at import time and
``tests/kvstore/test_memtable_compiled.py`` runs both on random row lists
(keys, seqs, duplicate keys, unordered input) and compares the dicts and
results.

``merge_runs`` merges the sorted key runs into one, without the GIL; its
twin is ``kvstore.memtable.merge_runs_py``.

``flush_cursor`` sorts the rows a flush writes (from the apply log, without
the GIL) and fills their ``ROW_SCHEMA`` Arrow buffers batch by batch; its
twin is ``kvstore.flush_rows.flush_batches_py`` and
``tests/kvstore/test_flush_rows.py`` compares them.

Why: inserting a 1000-row version into the memtable was 1000 Python-level
``SortedDict`` inserts, ~30 % of the committer in the W1 bulk load. Here the
dict probe, the tuple prepend and the byte count are C calls; the key order
for scans is kept apart as sorted runs (``kvstore.memtable``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset
from cython_ext._keyref cimport KeyRef, key_less, key_ref_set, key_word

import pyarrow as pa


cdef tuple _prepend(object row, tuple current):
    # (row,) + current without building the one-tuple first.
    cdef Py_ssize_t n = PyTuple_GET_SIZE(current)
    cdef tuple out = PyTuple_New(n + 1)
    cdef Py_ssize_t i
    cdef object item
    Py_INCREF(row)
    PyTuple_SET_ITEM(out, 0, row)
    for i in range(n):
        item = <object>PyTuple_GET_ITEM(current, i)
        Py_INCREF(item)
        PyTuple_SET_ITEM(out, i + 1, item)
    return out


cdef tuple _insert_by_seq(tuple versions, tuple row):
    # Rare path (one key twice in a batch, or a version applied again): same
    # rule as the twin's ``_insert_by_seq``.
    cdef list items = list(versions)
    cdef Py_ssize_t index = 0
    seq = row[1]
    while index < len(items) and items[index][1] > seq:
        index += 1
    if index < len(items) and items[index][1] == seq:
        items[index] = row  # re-applying the same version is idempotent
    else:
        items.insert(index, row)
    return tuple(items)


cdef extern from "Python.h":
    # Declared without Cython's exception check: -1 with an error set is a
    # seq that is not a plain int64, and the rows then take the Python compare.
    long long _as_i64 "PyLong_AsLongLong"(object) noexcept
    # Inserts ``default`` if ``key`` is absent (one probe); a borrowed reference
    # to the value now under ``key``, NULL on error.
    PyObject* PyDict_SetDefault(object d, object key, object default) except NULL


cdef extern from "Python.h":
    int PyObject_IS_GC(object)
    int PyObject_GC_IsTracked(object)
    void PyObject_GC_UnTrack(void*)


cdef inline void _untrack_if_atomic(tuple t) noexcept:
    """Stop the cyclic GC tracking ``t`` if nothing in it can be part of a cycle.

    CPython untracks such tuples itself, but only when a collection first
    examines them. Untracked here, every row and version tuple is never
    examined, and the memtable's dict, whose values are all untracked, stays
    untracked too (CPython tracks a dict only once it holds a tracked value):
    a collection during a bulk load no longer walks every row of the
    memtable (gen-2 pauses of 60-350 ms holding the GIL, measured in W1).
    """
    cdef Py_ssize_t i
    cdef object item
    for i in range(PyTuple_GET_SIZE(t)):
        item = <object>PyTuple_GET_ITEM(t, i)
        if PyObject_IS_GC(item) and (type(item) is not tuple or PyObject_GC_IsTracked(item)):
            return
    if PyObject_GC_IsTracked(t):
        PyObject_GC_UnTrack(<void*>t)


cdef inline bint _key_less(bytes a, bytes b) noexcept:
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b)
    cdef int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), na if na < nb else nb)
    return c < 0 or (c == 0 and na < nb)


def apply_rows(dict data, list rows, Py_ssize_t row_overhead):
    """Insert ``rows`` into ``data``; see ``kvstore.memtable.apply_rows_py``."""
    cdef list new_keys = []
    cdef Py_ssize_t i, n = len(rows), nbytes = 0
    cdef object row_obj, key, seq, value
    cdef tuple row, current, single
    cdef PyObject* found
    cdef bytes previous = None
    cdef bint ordered = True
    cdef long long seq_c, max_seq_c = -1
    cdef bint plain_seqs = True  # every seq so far an int in 0..2**63-1: max_seq kept as a C integer
    max_seq = -1
    for i in range(n):
        row_obj = rows[i]
        if type(row_obj) is not tuple or PyTuple_GET_SIZE(row_obj) != 5 or type(<object>PyTuple_GET_ITEM(row_obj, 0)) is not bytes:
            raise TypeError(f"a memtable row must be a (key, seq, kind, value, expire) tuple with a bytes key, got {row_obj!r}")
        row = <tuple>row_obj
        key = <object>PyTuple_GET_ITEM(row, 0)
        seq = <object>PyTuple_GET_ITEM(row, 1)
        if ordered and previous is not None and _key_less(<bytes>key, previous):
            ordered = False
        previous = <bytes>key
        _untrack_if_atomic(row)
        # One probe for a new key (the bulk-load case): insert (row,) unless the key is there.
        single = PyTuple_New(1)
        Py_INCREF(row)
        PyTuple_SET_ITEM(single, 0, row)
        _untrack_if_atomic(single)
        found = PyDict_SetDefault(data, key, single)
        if found == <PyObject*>single:
            new_keys.append(key)
        else:
            current = <tuple>found
            if seq > (<tuple>PyTuple_GET_ITEM(current, 0))[1]:
                current = _prepend(row, current)
            else:
                current = _insert_by_seq(current, row)
            _untrack_if_atomic(current)
            PyDict_SetItem(data, key, current)
        value = <object>PyTuple_GET_ITEM(row, 3)
        nbytes += PyBytes_GET_SIZE(key) + row_overhead
        if value is not None:
            nbytes += len(value)
        if plain_seqs and type(seq) is int:
            seq_c = _as_i64(seq)
            if seq_c == -1 and PyErr_Occurred():
                PyErr_Clear()
                plain_seqs = False
            elif seq_c < 0:
                plain_seqs = False
            elif seq_c > max_seq_c:
                max_seq_c = seq_c
                max_seq = seq
            continue
        plain_seqs = False
        if seq > max_seq:
            max_seq = seq
    if not plain_seqs:  # some seq was not a plain int64: recompute exactly, with Python compares
        max_seq = -1
        for i in range(n):
            seq = (<tuple>rows[i])[1]
            if seq > max_seq:
                max_seq = seq
    return new_keys, nbytes, max_seq, ordered


def merge_runs(list runs):
    """One sorted list of the keys of ``runs`` (sorted lists of bytes).

    Same result as ``sorted(itertools.chain(*runs))``, the pure-Python twin
    (``kvstore.memtable.merge_runs_py``). The merge itself runs without the
    GIL: bottom-up pairwise merges of the runs over ``(pointer, length)``
    references, so merging a large memtable's runs does not stall the
    committer thread the way one long ``list.sort`` holding the GIL would.

    Requires: the runs' keys are bytes (the memtable's are).
    """
    cdef Py_ssize_t k = len(runs), n = 0, i, j, r
    cdef list run
    for r in range(k):
        n += len(<list>runs[r])
    cdef KeyRef* refs = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef KeyRef* spare = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef Py_ssize_t* bounds = <Py_ssize_t*>PyMem_Malloc((k + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t width, count, a, a_end, b_end, out
    cdef KeyRef* tmp
    cdef object key
    cdef list merged
    if refs == NULL or spare == NULL or bounds == NULL:
        PyMem_Free(refs)
        PyMem_Free(spare)
        PyMem_Free(bounds)
        raise MemoryError()
    try:
        i = 0
        for r in range(k):
            run = <list>runs[r]
            bounds[r] = i
            for j in range(len(run)):
                key = run[j]
                if type(key) is not bytes:
                    raise TypeError(f"memtable run keys must be bytes, got {type(key).__name__}")
                key_ref_set(&refs[i], <PyObject*>key, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
                i += 1
        bounds[k] = n
        count = k
        with nogil:
            # Merge runs pairwise until one is left; ``bounds`` holds the
            # current runs' starts (count + 1 entries).
            while count > 1:
                out = 0
                width = 0
                while width < count:
                    a = bounds[width]
                    a_end = bounds[width + 1]
                    b_end = bounds[width + 2] if width + 1 < count else a_end
                    i, j = a, a_end
                    bounds[width // 2] = out
                    while i < a_end and j < b_end:
                        if key_less(&refs[j], &refs[i]):
                            spare[out] = refs[j]
                            j += 1
                        else:
                            spare[out] = refs[i]
                            i += 1
                        out += 1
                    while i < a_end:
                        spare[out] = refs[i]
                        i += 1
                        out += 1
                    while j < b_end:
                        spare[out] = refs[j]
                        j += 1
                        out += 1
                    width += 2
                count = (count + 1) // 2
                bounds[count] = n
                tmp = refs
                refs = spare
                spare = tmp
        merged = PyList_New(n)
        for i in range(n):
            Py_INCREF(<object>refs[i].obj)
            PyList_SET_ITEM(merged, i, <object>refs[i].obj)
        return merged
    finally:
        PyMem_Free(refs)
        PyMem_Free(spare)
        PyMem_Free(bounds)


# -- flush: the rows of a seq range as ROW_SCHEMA column buffers ---------------

cdef extern from "Python.h":
    # Macros on borrowed pointers, callable without the GIL on objects that
    # are kept alive (the cursor's ``_owned`` list holds every row).
    PyObject* _tuple_item "PyTuple_GET_ITEM"(PyObject* t, Py_ssize_t i) nogil
    char* _bytes_data "PyBytes_AS_STRING"(PyObject* b) nogil
    Py_ssize_t _bytes_size "PyBytes_GET_SIZE"(PyObject* b) nogil
    unsigned long long _as_u64 "PyLong_AsUnsignedLongLong"(object) noexcept

cdef enum:
    _OFFSET_MAX = 0x7FFFFFFF  # 32-bit Arrow offsets: a batch's keys, and its values, stay under 2 GiB
    # How far ahead the row loops prefetch a row's tuple (its key and value
    # half as far): the rows' objects are scattered, so each row is a few
    # cache misses. Filling 200k rows took 38 ms without, 17 ms with it.
    _PREFETCH_ROWS = 8
    # Rows taken between two releases of the GIL while a cursor is built
    # (~0.1 ms of work): the committer never waits long behind a flush.
    _ROWS_PER_GIL_HOLD = 2048

cdef extern from *:
    void _prefetch "__builtin_prefetch"(const void* address) nogil


cdef struct FlushRow:
    # The key's first 16 bytes big-endian (as in KeyRef): most comparisons
    # end here without touching the row.
    uint64_t head
    uint64_t tail
    uint64_t seq
    PyObject* row  # borrowed: FlushCursor._owned keeps it alive
    # Sizes, read when the row is taken (in apply order, where the objects
    # sit close together), so sizing a batch does not touch the row again.
    uint32_t key_size
    uint32_t value_size  # _NO_VALUE for a None value


cdef uint32_t _NO_VALUE = 0xFFFFFFFF


cdef inline int _key_cmp(const FlushRow* a, const FlushRow* b) noexcept nogil:
    """<0, 0, >0 as ``a``'s key sorts before, equal to, after ``b``'s."""
    if a.head != b.head:
        return -1 if a.head < b.head else 1
    if a.tail != b.tail:
        return -1 if a.tail < b.tail else 1
    if a.row == b.row:
        return 0
    cdef PyObject* ka = _tuple_item(a.row, 0)
    cdef PyObject* kb = _tuple_item(b.row, 0)
    cdef Py_ssize_t na = _bytes_size(ka), nb = _bytes_size(kb)
    cdef Py_ssize_t n = na if na < nb else nb
    cdef int c = 0
    if n > 16:  # equal in the first 16 bytes (zero-padded): compare the rest
        c = memcmp(_bytes_data(ka) + 16, _bytes_data(kb) + 16, n - 16)
    if c != 0:
        return c
    return -1 if na < nb else (1 if na > nb else 0)


cdef inline int _storage_cmp(const FlushRow* a, const FlushRow* b) noexcept nogil:
    """Storage order: key ascending, then seq descending."""
    cdef int c = _key_cmp(a, b)
    if c != 0:
        return c
    return -1 if a.seq > b.seq else (1 if a.seq < b.seq else 0)


cdef Py_ssize_t _natural_merge_sort(FlushRow* rows, FlushRow* spare, Py_ssize_t n, Py_ssize_t* bounds) noexcept nogil:
    """Sort ``rows`` into storage order, stably; return 0 if the result is in ``rows``, 1 if in ``spare``.

    Bottom-up merges of the natural runs (each applied version, already
    sorted, is at least one; versions of disjoint key ranges in order make
    one run and cost one pass). ``bounds`` has room for n + 1 entries.
    """
    cdef Py_ssize_t count = 0, i, j, a, a_end, b_end, out, width
    cdef FlushRow* tmp
    cdef int where = 0
    bounds[0] = 0
    for i in range(1, n):
        if _storage_cmp(&rows[i], &rows[i - 1]) < 0:
            count += 1
            bounds[count] = i
    count += 1
    bounds[count] = n
    while count > 1:
        out = 0
        width = 0
        while width < count:
            a = bounds[width]
            a_end = bounds[width + 1]
            b_end = bounds[width + 2] if width + 1 < count else a_end
            i, j = a, a_end
            bounds[width // 2] = out
            while i < a_end and j < b_end:
                if _storage_cmp(&rows[j], &rows[i]) < 0:  # strict: equal rows keep their apply order
                    spare[out] = rows[j]
                    j += 1
                else:
                    spare[out] = rows[i]
                    i += 1
                out += 1
            if i < a_end:
                memcpy(&spare[out], &rows[i], (a_end - i) * sizeof(FlushRow))
                out += a_end - i
            if j < b_end:
                memcpy(&spare[out], &rows[j], (b_end - j) * sizeof(FlushRow))
                out += b_end - j
            width += 2
        count = (count + 1) // 2
        bounds[count] = n
        tmp = rows
        rows = spare
        spare = tmp
        where = 1 - where
    return where


cdef Py_ssize_t _retain(FlushRow* rows, Py_ssize_t n, uint64_t floor) noexcept nogil:
    """Keep, in place, what a flush writes of sorted ``rows``; return how many.

    Per key: every version above ``floor`` and the newest at or below it (the
    boundary version). Of rows repeating a ``(key, seq)`` (a version applied
    twice) the last applied is kept, as the memtable's dict keeps it.
    """
    cdef Py_ssize_t i, out = 0
    cdef bint boundary_taken = False
    cdef int c
    for i in range(n):
        if i + 1 < n:
            c = _key_cmp(&rows[i], &rows[i + 1])
            if c == 0 and rows[i].seq == rows[i + 1].seq:
                continue  # a later apply of the same (key, seq) follows
        else:
            c = -1
        if rows[i].seq > floor:
            rows[out] = rows[i]
            out += 1
        elif not boundary_taken:
            rows[out] = rows[i]
            out += 1
            boundary_taken = True
        if c != 0:  # the next row starts another key
            boundary_taken = False
    return out


cdef inline bint _u64(object obj, uint64_t* out):
    """``obj`` (an exact int) as uint64; False if it does not fit."""
    cdef uint64_t v = _as_u64(obj)
    if v == <uint64_t>-1 and PyErr_Occurred():
        PyErr_Clear()
        return False
    out[0] = v
    return True


cdef inline bint _plain_fields(object key, object kind, object value, object expire):
    """Whether a row's fields other than its seq are of the form the buffers take (as ``_rowbatch``)."""
    cdef uint64_t kind_c
    if not PyBytes_CheckExact(key) or PyBytes_GET_SIZE(key) > _OFFSET_MAX:
        return False
    if value is not None and (not PyBytes_CheckExact(value) or PyBytes_GET_SIZE(value) > _OFFSET_MAX):
        return False  # (over 2 GiB: more than one Arrow binary array holds)
    if not PyLong_CheckExact(kind) or not _u64(kind, &kind_c) or kind_c > 255:
        return False
    if expire is not None:
        if not PyLong_CheckExact(expire):
            return False
        _as_i64(expire)
        if PyErr_Occurred():
            PyErr_Clear()
            return False
    return True


cdef class FlushCursor:
    """The rows a flush writes, sorted and filtered, handed out as column buffers.

    Built by :func:`flush_cursor`; :meth:`take` returns the next batch's
    arrays until none are left.
    """

    cdef FlushRow* _rows
    cdef Py_ssize_t _count
    cdef Py_ssize_t _pos
    cdef list _owned  # every row _rows points at, kept alive whatever the memtable's lists do

    def __cinit__(self):
        self._rows = NULL
        self._count = 0
        self._pos = 0

    def __dealloc__(self):
        PyMem_Free(self._rows)

    @property
    def count(self):
        """Rows in total (taken or not)."""
        return self._count

    def take(self, Py_ssize_t max_rows, Py_ssize_t max_bytes):
        """The ``(key, seq, kind, value, expire_at_ms)`` arrays of up to ``max_rows`` more rows, or None when done.

        Fewer rows when the batch's keys, or its values, would pass
        ``max_bytes`` (at most 2 GiB - 1, what 32-bit Arrow offsets reach); a
        single row larger than that makes its own batch.
        """
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        if not 1 <= max_bytes <= _OFFSET_MAX:
            raise ValueError(f"max_bytes must be in 1..{_OFFSET_MAX}, got {max_bytes}")
        cdef Py_ssize_t start = self._pos, end = start, key_bytes = 0, value_bytes = 0, ks, vs
        if start >= self._count:
            return None
        cdef FlushRow* rows = self._rows
        # Pass 1 (over the sorted array only): how many rows fit, and the buffer sizes.
        while end < self._count and end - start < max_rows:
            ks = rows[end].key_size
            vs = 0 if rows[end].value_size == _NO_VALUE else rows[end].value_size
            if end > start and (key_bytes + ks > max_bytes or value_bytes + vs > max_bytes):
                break
            key_bytes += ks
            value_bytes += vs
            end += 1
        self._pos = end
        rows += start
        cdef Py_ssize_t n = end - start, i
        # Pass 2: fill the buffers (bytes objects handed to Arrow without a copy).
        cdef bytes key_offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
        cdef bytes key_data = PyBytes_FromStringAndSize(NULL, key_bytes)
        cdef bytes seqs = PyBytes_FromStringAndSize(NULL, n * 8)
        cdef bytes kinds = PyBytes_FromStringAndSize(NULL, n)
        cdef bytes value_offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
        cdef bytes value_data = PyBytes_FromStringAndSize(NULL, value_bytes)
        cdef bytes expires = PyBytes_FromStringAndSize(NULL, n * 8)
        cdef Py_ssize_t bitmap_bytes = (n + 7) // 8
        cdef bytes value_valid = PyBytes_FromStringAndSize(NULL, bitmap_bytes)
        cdef bytes expire_valid = PyBytes_FromStringAndSize(NULL, bitmap_bytes)
        cdef int32_t* k_off = <int32_t*>PyBytes_AS_STRING(key_offsets)
        cdef char* k_dat = PyBytes_AS_STRING(key_data)
        cdef uint64_t* seq_out = <uint64_t*>PyBytes_AS_STRING(seqs)
        cdef uint8_t* kind_out = <uint8_t*>PyBytes_AS_STRING(kinds)
        cdef int32_t* v_off = <int32_t*>PyBytes_AS_STRING(value_offsets)
        cdef char* v_dat = PyBytes_AS_STRING(value_data)
        cdef int64_t* exp_out = <int64_t*>PyBytes_AS_STRING(expires)
        cdef uint8_t* v_valid = <uint8_t*>PyBytes_AS_STRING(value_valid)
        cdef uint8_t* e_valid = <uint8_t*>PyBytes_AS_STRING(expire_valid)
        cdef Py_ssize_t k_pos = 0, v_pos = 0
        cdef Py_ssize_t value_nulls = 0, expire_nulls = 0
        cdef PyObject* row
        cdef PyObject* ahead
        cdef PyObject* key
        cdef PyObject* expire
        memset(v_valid, 0, bitmap_bytes)
        memset(e_valid, 0, bitmap_bytes)
        k_off[0] = 0
        v_off[0] = 0
        for i in range(n):
            # The rows are in key order, their objects in apply order: every
            # row is a few cache misses (tuple, key, value). Prefetch the
            # tuple _PREFETCH_ROWS ahead and, once it is in, its key and value.
            if i + 2 * _PREFETCH_ROWS < n:
                _prefetch(rows[i + 2 * _PREFETCH_ROWS].row)
            if i + _PREFETCH_ROWS < n:
                ahead = rows[i + _PREFETCH_ROWS].row
                _prefetch(_tuple_item(ahead, 0))
                _prefetch(_tuple_item(ahead, 3))
            row = rows[i].row
            key = _tuple_item(row, 0)
            ks = rows[i].key_size
            memcpy(k_dat + k_pos, _bytes_data(key), ks)
            k_pos += ks
            k_off[i + 1] = <int32_t>k_pos
            seq_out[i] = rows[i].seq
            # Checked when the cursor was built: an int in 0..255.
            kind_out[i] = <uint8_t>_as_u64(<object>_tuple_item(row, 2))
            if rows[i].value_size == _NO_VALUE:
                value_nulls += 1
            else:
                vs = rows[i].value_size
                memcpy(v_dat + v_pos, _bytes_data(_tuple_item(row, 3)), vs)
                v_pos += vs
                v_valid[i >> 3] |= <uint8_t>(1 << (i & 7))
            v_off[i + 1] = <int32_t>v_pos
            expire = _tuple_item(row, 4)
            if expire == <PyObject*>None:
                exp_out[i] = 0
                expire_nulls += 1
            else:
                exp_out[i] = _as_i64(<object>expire)  # checked: fits int64
                e_valid[i >> 3] |= <uint8_t>(1 << (i & 7))
        py_buffer = pa.py_buffer
        return (
            pa.Array.from_buffers(pa.binary(), n, [None, py_buffer(key_offsets), py_buffer(key_data)]),
            pa.Array.from_buffers(pa.uint64(), n, [None, py_buffer(seqs)]),
            pa.Array.from_buffers(pa.uint8(), n, [None, py_buffer(kinds)]),
            pa.Array.from_buffers(
                pa.binary(), n,
                [py_buffer(value_valid) if value_nulls else None, py_buffer(value_offsets), py_buffer(value_data)],
            ),
            pa.Array.from_buffers(pa.int64(), n, [py_buffer(expire_valid) if expire_nulls else None, py_buffer(expires)]),
        )


def flush_cursor(list versions, object low, object high, object floor):
    """The rows a flush writes from ``versions``, or None if some row is not of the plain form.

    ``versions``: lists of rows, in apply order (``Memtable``'s apply log).
    Takes the rows with ``low < seq <= high``, sorts them into storage order
    and keeps per key every version above ``floor`` and the newest at or
    below it; see ``kvstore.flush_rows.flush_rows_py``, the twin. On None (a
    version that is not a list, a row that is not a 5-tuple of bytes key,
    int seq and kind in range, bytes-or-None value, int64-or-None expiry)
    the caller takes the twin.

    Requires: ``low``, ``high`` and ``floor`` in 0..2**64 - 1.
    """
    cdef uint64_t low_c = low, high_c = high, floor_c = floor, seq, last_seq = 0
    cdef Py_ssize_t total = 0, n = 0, v, i, m, taken_at_release = 0
    cdef list rows
    cdef PyObject* row
    cdef PyObject* ahead
    cdef PyObject* seq_obj
    cdef PyObject* last_seq_obj = NULL
    versions = list(versions)  # our own: nothing resizes it while the GIL is given up below
    for v in range(len(versions)):
        if type(versions[v]) is not list:
            return None  # the twin takes any iterables of rows
        total += PyList_GET_SIZE(<list>versions[v])
    cdef FlushCursor cursor = FlushCursor.__new__(FlushCursor)
    cdef list owned = []
    cdef FlushRow* buf = <FlushRow*>PyMem_Malloc((total if total else 1) * sizeof(FlushRow))
    cdef FlushRow* spare = NULL
    cdef Py_ssize_t* bounds = NULL
    cdef PyObject* key
    cdef PyObject* value
    if buf == NULL:
        raise MemoryError()
    cursor._rows = buf  # freed with the cursor from here on
    for v in range(len(versions)):
        rows = <list>versions[v]
        m = PyList_GET_SIZE(rows)
        for i in range(m):
            # Prefetch the tuple _PREFETCH_ROWS ahead and, once it is in, its key and value.
            if i + 2 * _PREFETCH_ROWS < m:
                _prefetch(PyList_GET_ITEM(rows, i + 2 * _PREFETCH_ROWS))
            if i + _PREFETCH_ROWS < m:
                ahead = PyList_GET_ITEM(rows, i + _PREFETCH_ROWS)
                if type(<object>ahead) is tuple and PyTuple_GET_SIZE(<object>ahead) == 5:
                    _prefetch(_tuple_item(ahead, 0))
                    _prefetch(_tuple_item(ahead, 3))
            row = PyList_GET_ITEM(rows, i)
            if type(<object>row) is not tuple or PyTuple_GET_SIZE(<object>row) != 5:
                return None
            seq_obj = _tuple_item(row, 1)
            if seq_obj != last_seq_obj:  # the rows of one commit share their seq object
                if not PyLong_CheckExact(<object>seq_obj) or not _u64(<object>seq_obj, &last_seq):
                    return None
                last_seq_obj = seq_obj
            seq = last_seq
            key = _tuple_item(row, 0)
            value = _tuple_item(row, 3)
            if not _plain_fields(<object>key, <object>_tuple_item(row, 2), <object>value, <object>_tuple_item(row, 4)):
                return None
            if seq <= low_c or seq > high_c:
                continue
            if n == total:
                raise RuntimeError("a memtable version grew while a flush read it")
            owned.append(<object>row)
            buf[n].head = key_word(<const unsigned char*>_bytes_data(key), _bytes_size(key), 0)
            buf[n].tail = key_word(<const unsigned char*>_bytes_data(key), _bytes_size(key), 8)
            buf[n].seq = seq
            buf[n].row = row
            buf[n].key_size = <uint32_t>_bytes_size(key)
            buf[n].value_size = _NO_VALUE if value == <PyObject*>None else <uint32_t>_bytes_size(value)
            n += 1
        if n - taken_at_release >= _ROWS_PER_GIL_HOLD:
            # Let the committer in: a flush runs beside a bulk load, and
            # this loop never gives up the GIL on its own.
            with nogil:
                taken_at_release = n
            last_seq_obj = NULL  # (the cached seq's object may be gone and its address reused)
    cursor._owned = owned
    spare = <FlushRow*>PyMem_Malloc((n if n else 1) * sizeof(FlushRow))
    bounds = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
    if spare == NULL or bounds == NULL:
        PyMem_Free(spare)
        PyMem_Free(bounds)
        raise MemoryError()
    cdef int sorted_into = 0
    with nogil:
        if n > 1:
            sorted_into = _natural_merge_sort(buf, spare, n, bounds)
        if sorted_into == 1:  # the sorted rows are in spare: keep that array
            cursor._rows, spare = spare, buf
        n = _retain(cursor._rows, n, floor_c)
    PyMem_Free(spare)
    PyMem_Free(bounds)
    cursor._count = n
    return cursor
