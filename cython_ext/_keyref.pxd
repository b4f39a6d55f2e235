# cython: language_level=3
"""A key (or the row it starts) with its first 16 bytes as two integers, for
sorting keys in C (header only: cimported by ``_memtable`` and ``_writebatch``).

Comparing two 16-byte big-endian words orders like comparing the bytes, so
most comparisons end without touching the keys' memory (a cache miss per key
otherwise); only keys equal in their first 16 bytes compare the rest.
"""

from cpython.object cimport PyObject
from libc.stdint cimport uint64_t
from libc.string cimport memcmp


cdef struct KeyRef:
    PyObject* obj  # the key, or the row it is the key of (borrowed or owned: the user says)
    const char* data
    Py_ssize_t size
    # The key's first 16 bytes, big-endian, zero-padded.
    uint64_t head
    uint64_t tail


cdef inline uint64_t key_word(const unsigned char* p, Py_ssize_t size, Py_ssize_t start) noexcept nogil:
    """Bytes ``start .. start + 8`` of a key of ``size`` bytes, big-endian, zero-padded."""
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    for i in range(start, start + 8):
        w = (w << 8) | (p[i] if i < size else 0)
    return w


cdef inline void key_ref_set(KeyRef* ref, PyObject* obj, const char* data, Py_ssize_t size) noexcept nogil:
    ref.obj = obj
    ref.data = data
    ref.size = size
    ref.head = key_word(<const unsigned char*>data, size, 0)
    ref.tail = key_word(<const unsigned char*>data, size, 8)


cdef inline bint key_less(const KeyRef* x, const KeyRef* y) noexcept nogil:
    """Whether ``x``'s key sorts before ``y``'s (bytewise, then shorter first)."""
    if x.head != y.head:
        return x.head < y.head
    if x.tail != y.tail:
        return x.tail < y.tail
    # Equal in the first 16 bytes (zero-padded), so equal up to the shorter
    # length when it is under 16; compare the rest, then the lengths.
    cdef Py_ssize_t n = x.size if x.size < y.size else y.size
    cdef int c = 0
    if n > 16:
        c = memcmp(x.data + 16, y.data + 16, n - 16)
    return c < 0 or (c == 0 and x.size < y.size)
