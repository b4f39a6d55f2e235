# cython: boundscheck=False, wraparound=False, cdivision=True
"""CRC32C (Castagnoli) over bytes-like objects: the CPU's CRC32 instruction
where there is one (x86-64 with SSE4.2, checked at import), else slicing-by-8.

Used for every block and metadata section of lakekv files, so it runs over
every byte an SST writes or reads: the instruction does ~8 GB/s here against
~1.4 GB/s for the tables (a 64 KiB block: ~8 us instead of ~45 us).
Pure-Python twin: ``kvstore.format.checksum._crc32c_py`` (same results,
~1000x slower).
"""

from libc.stdint cimport uint32_t, uint64_t, uint8_t
from libc.string cimport memcpy

import sys

if sys.byteorder != "little":  # _update loads 8 bytes at a time as little-endian
    raise ImportError("cython_ext._checksum supports little-endian hosts only")

cdef uint32_t _TABLE[8][256]


cdef void _init_tables() noexcept:
    cdef uint32_t poly = 0x82F63B78  # reflected Castagnoli polynomial
    cdef uint32_t crc
    cdef int i, j, k
    for i in range(256):
        crc = i
        for j in range(8):
            crc = (crc >> 1) ^ (poly if (crc & 1) else 0)
        _TABLE[0][i] = crc
    for i in range(256):
        crc = _TABLE[0][i]
        for k in range(1, 8):
            crc = _TABLE[0][crc & 0xFF] ^ (crc >> 8)
            _TABLE[k][i] = crc


_init_tables()


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <nmmintrin.h>
    /* Compiled for SSE4.2 whatever the build flags; only called when the CPU has it. */
    __attribute__((target("sse4.2")))
    static uint32_t lakekv_crc32c_hw(uint32_t crc, const uint8_t *p, Py_ssize_t n) {
        uint64_t c = (uint32_t)~crc;
        uint64_t word;
        while (n >= 8) {
            memcpy(&word, p, 8);
            c = _mm_crc32_u64(c, word);
            p += 8;
            n -= 8;
        }
        uint32_t c32 = (uint32_t)c;
        while (n > 0) {
            c32 = _mm_crc32_u8(c32, *p);
            p++;
            n--;
        }
        return ~c32;
    }
    static int lakekv_crc32c_hw_available(void) { return __builtin_cpu_supports("sse4.2"); }
    #else
    static uint32_t lakekv_crc32c_hw(uint32_t crc, const uint8_t *p, Py_ssize_t n) { return crc; }
    static int lakekv_crc32c_hw_available(void) { return 0; }
    #endif
    """
    uint32_t lakekv_crc32c_hw(uint32_t crc, const uint8_t* p, Py_ssize_t n) noexcept nogil
    int lakekv_crc32c_hw_available() noexcept nogil


cdef bint _HW = lakekv_crc32c_hw_available() != 0
HARDWARE = bool(_HW)
"""True when crc32c runs on the CPU's CRC32 instruction."""


cdef uint32_t _update(uint32_t crc, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t word
    crc = ~crc
    # Slicing-by-8: one table lookup per byte but eight independent lookups
    # per iteration, which the CPU overlaps (~1.5-2 GB/s vs ~400 MB/s).
    while n >= 8:
        memcpy(&word, p, 8)  # unaligned-safe load; assumes little-endian hosts
        word ^= crc
        crc = (_TABLE[7][word & 0xFF] ^ _TABLE[6][(word >> 8) & 0xFF]
               ^ _TABLE[5][(word >> 16) & 0xFF] ^ _TABLE[4][(word >> 24) & 0xFF]
               ^ _TABLE[3][(word >> 32) & 0xFF] ^ _TABLE[2][(word >> 40) & 0xFF]
               ^ _TABLE[1][(word >> 48) & 0xFF] ^ _TABLE[0][word >> 56])
        p += 8
        n -= 8
    while n > 0:
        crc = _TABLE[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return ~crc


def crc32c(data, unsigned int crc=0):
    """Return the CRC32C of ``data`` (any contiguous bytes-like), continuing from ``crc``.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    if n == 0:
        return crc
    with nogil:
        if _HW:
            crc = lakekv_crc32c_hw(crc, &view[0], n)
        else:
            crc = _update(crc, &view[0], n)
    return crc
