# cython: boundscheck=False, wraparound=False, cdivision=True
"""Bloom-filter kernels for SST files: XXH64 plus double hashing.

Pure-Python twin (the reference, same results bit for bit):
``kvstore.format.bloom._xxh64_py`` / ``_add_keys_py`` / ``_may_contain_py``;
``kvstore.format.bloom`` documents the scheme and picks one at import time.

Bit ``b`` of a filter of ``num_bits`` bits lives in byte ``b >> 3`` under mask
``1 << (b & 7)``; a key sets bits ``(h1 + i*h2) % num_bits`` for
``i in range(num_hashes)``, where ``h = XXH64(key, seed=0)``,
``h1 = h & 0xFFFFFFFF`` and ``h2 = h >> 32``.
"""

from libc.stdint cimport int32_t, uint32_t, uint64_t, uint8_t
from libc.string cimport memcpy

import sys

if sys.byteorder != "little":  # _read64/_read32 and Arrow's offsets are read as little-endian
    raise ImportError("cython_ext._bloom supports little-endian hosts only")

# XXH64 constants, from the xxHash specification (never change: stored filters depend on them).
cdef uint64_t P1 = 0x9E3779B185EBCA87ULL
cdef uint64_t P2 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t P3 = 0x165667B19E3779F9ULL
cdef uint64_t P4 = 0x85EBCA77C2B2AE63ULL
cdef uint64_t P5 = 0x27D4EB2F165667C5ULL


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)  # unaligned-safe load
    return v


cdef inline uint32_t _read32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t _round(uint64_t acc, uint64_t lane) noexcept nogil:
    acc += lane * P2
    acc = _rotl(acc, 31)
    return acc * P1


cdef inline uint64_t _merge(uint64_t acc, uint64_t v) noexcept nogil:
    acc ^= _round(0, v)
    return acc * P1 + P4


cdef uint64_t _xxh64(const uint8_t* p, Py_ssize_t n, uint64_t seed) noexcept nogil:
    cdef const uint8_t* end = p + n
    cdef uint64_t v1, v2, v3, v4, h
    if n >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while end - p >= 32:
            v1 = _round(v1, _read64(p))
            v2 = _round(v2, _read64(p + 8))
            v3 = _round(v3, _read64(p + 16))
            v4 = _round(v4, _read64(p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + P5
    h += <uint64_t>n
    while end - p >= 8:
        h ^= _round(0, _read64(p))
        h = _rotl(h, 27) * P1 + P4
        p += 8
    if end - p >= 4:
        h ^= <uint64_t>_read32(p) * P1
        h = _rotl(h, 23) * P2 + P3
        p += 4
    while p < end:
        h ^= <uint64_t>p[0] * P5
        h = _rotl(h, 11) * P1
        p += 1
    h ^= h >> 33
    h *= P2
    h ^= h >> 29
    h *= P3
    h ^= h >> 32
    return h


cdef inline void _set_bits(uint8_t* bits, uint64_t num_bits, int num_hashes, uint64_t h) noexcept nogil:
    cdef uint64_t h1 = h & 0xFFFFFFFFULL
    cdef uint64_t h2 = h >> 32
    cdef uint64_t b
    cdef int i
    for i in range(num_hashes):
        b = (h1 + <uint64_t>i * h2) % num_bits
        bits[b >> 3] |= <uint8_t>(1 << (b & 7))


def xxh64(data, unsigned long long seed=0):
    """Return XXH64 of ``data`` (any contiguous bytes-like) as an int in [0, 2**64).

    >>> hex(xxh64(b"abc"))
    '0x44bc2cf5ad770999'
    """
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    if n == 0:
        return _xxh64(NULL, 0, seed)
    return _xxh64(&view[0], n, seed)


def add_binary_array(bytearray bits, unsigned long long num_bits, int num_hashes,
                     offsets, data, Py_ssize_t array_offset, Py_ssize_t length):
    """Add every value of an Arrow ``binary`` array to the filter, in place.

    Args:
        bits: the filter bytes, ``ceil(num_bits / 8)`` long.
        num_bits: filter size in bits (> 0).
        num_hashes: bits set per key.
        offsets: the array's int32 offsets buffer (``array.buffers()[1]``).
        data: the array's value-data buffer (``array.buffers()[2]``; may be None
            when every value is empty).
        array_offset: the array's slice offset (``array.offset``).
        length: number of values (``len(array)``).
    """
    cdef const uint8_t[::1] offs_view = memoryview(offsets).cast("B")
    cdef const uint8_t[::1] data_view
    cdef uint8_t[::1] bits_view = bits  # exported: the bytearray cannot be resized meanwhile
    cdef const uint8_t* data_ptr = NULL
    cdef const uint8_t* offs_ptr
    cdef uint8_t* bits_ptr
    cdef int32_t start, stop
    cdef Py_ssize_t i, data_len = 0, bad = -1
    if length <= 0:
        return
    if num_bits == 0 or <unsigned long long>len(bits) * 8 < num_bits:
        raise ValueError(f"bits holds {len(bits) * 8} bits, fewer than num_bits={num_bits}")
    if offs_view.shape[0] < (array_offset + length + 1) * 4:
        raise ValueError("offsets buffer is shorter than the array it describes")
    if data is not None:
        data_view = memoryview(data).cast("B")
        data_len = data_view.shape[0]
        if data_len > 0:
            data_ptr = &data_view[0]
    bits_ptr = &bits_view[0]
    offs_ptr = &offs_view[0]
    # Without the GIL: a flush hashes every key of a large SST here (~0.1 s
    # for 400,000 keys), and a commit waiting for the GIL meanwhile would stall.
    with nogil:
        for i in range(array_offset, array_offset + length):
            memcpy(&start, offs_ptr + i * 4, 4)
            memcpy(&stop, offs_ptr + (i + 1) * 4, 4)
            if start < 0 or stop < start or (stop > 0 and data_ptr == NULL) or (data_ptr != NULL and stop > data_len):
                bad = i
                break
            _set_bits(bits_ptr, num_bits, num_hashes, _xxh64(data_ptr + start if data_ptr != NULL else NULL,
                                                             stop - start, 0))
    if bad >= 0:
        raise ValueError(f"offsets of value {bad} point outside the data buffer")


def may_contain(const uint8_t[::1] bits, unsigned long long num_bits, int num_hashes, key):
    """Return False if ``key`` was certainly never added, True if it may have been."""
    cdef const uint8_t[::1] key_view = memoryview(key).cast("B")
    cdef Py_ssize_t n = key_view.shape[0]
    cdef uint64_t h
    if num_bits == 0 or <unsigned long long>bits.shape[0] * 8 < num_bits:
        raise ValueError(f"bits holds {bits.shape[0] * 8} bits, fewer than num_bits={num_bits}")
    h = _xxh64(&key_view[0] if n > 0 else NULL, n, 0)
    cdef uint64_t h1 = h & 0xFFFFFFFFULL
    cdef uint64_t h2 = h >> 32
    cdef uint64_t b
    cdef int i
    for i in range(num_hashes):
        b = (h1 + <uint64_t>i * h2) % num_bits
        if not (bits[b >> 3] & (1 << (b & 7))):
            return False
    return True
