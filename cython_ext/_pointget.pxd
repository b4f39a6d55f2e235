# cython: language_level=3
"""The compact SST block (see _pointget.pyx) and the key comparison, for other
extensions that read its buffers in place (cython_ext._scan)."""

from libc.stdint cimport int32_t, int64_t, uint64_t, uint8_t
from libc.string cimport memcmp

from cython_ext._keyindex cimport KeyIndex


cdef inline int _cmp(const uint8_t* a, Py_ssize_t alen, const uint8_t* b, Py_ssize_t blen) noexcept nogil:
    """Byte-order comparison (what ``bytes`` comparison does): <0, 0, >0."""
    cdef Py_ssize_t n = alen if alen < blen else blen
    cdef int c = 0
    if n > 0:
        c = memcmp(a, b, n)
    if c != 0:
        return c
    return (alen > blen) - (alen < blen)


cdef class BlockView:
    # What a point get reads, first (the object's first cache lines): the
    # key index (see _keyindex.pxd), then the columns of the row it finds.
    cdef KeyIndex _index
    cdef readonly Py_ssize_t num_rows
    # Summaries that spare a get a cold cache line each: the largest seq (a
    # reader at or past it needs no row's seq) and whether every row is a PUT.
    cdef uint64_t _max_seq
    cdef bint _only_puts
    # Every value non-null and ``_value_len`` bytes long (else -1): value i
    # then starts at ``_value_base + i * _value_len``, with no offset to read.
    cdef Py_ssize_t _value_len
    cdef const uint8_t* _value_base
    # Buffer addresses of the batch's columns, already offset by the column's
    # slice offset; the bitmaps are NULL when the column has no nulls, else
    # read at bit ``*_bit0 + i``. ``_expires`` is NULL when no row expires.
    cdef const uint64_t* _seqs
    cdef const uint8_t* _kinds
    cdef const int32_t* _value_offsets
    cdef const uint8_t* _value_data
    cdef const uint8_t* _value_valid
    cdef Py_ssize_t _value_bit0
    cdef const int64_t* _expires
    cdef const uint8_t* _expire_valid
    cdef Py_ssize_t _expire_bit0
    cdef const int32_t* _key_offsets
    cdef const uint8_t* _key_data
    cdef readonly object batch
    cdef readonly Py_ssize_t nbytes

    cdef int _build_index(self) except -1
    cdef int _cmp_key(self, Py_ssize_t i, const uint8_t* k, Py_ssize_t klen) noexcept nogil
    cdef Py_ssize_t _search(self, const uint8_t* k, Py_ssize_t klen, uint64_t h) noexcept nogil
    cdef Py_ssize_t _lower_bound(self, const uint8_t* k, Py_ssize_t klen, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil
    cdef Py_ssize_t _find(self, const uint8_t* k, Py_ssize_t klen, uint64_t snapshot_seq) noexcept nogil
    cdef bytes _key(self, Py_ssize_t i)
    cdef object _value(self, Py_ssize_t i)
    cdef object _expire(self, Py_ssize_t i)
    cdef tuple _row(self, Py_ssize_t i)
    cdef object _visible_value(self, Py_ssize_t i, object now_ms)
    cdef int _check_index(self, Py_ssize_t i) except -1
