# cython: language_level=3
"""C-level entry points of _bloom.pyx, for other extensions (the point-get path)."""

from libc.stdint cimport uint64_t, uint8_t


cdef uint64_t _xxh64(const uint8_t* p, Py_ssize_t n, uint64_t seed) noexcept nogil
