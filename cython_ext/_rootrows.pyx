# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The delta rows of a format-2 root file, encoded in C.

Layout (``kvstore.format.root``'s module docstring), per row, little-endian::

    u32 key length, key bytes, u32 seq - first_seq, u8 kind,
    u32 value length + 1 (0 = null), value bytes, i64 expire_at_ms (-1 = never)

Pure-Python twin (the spec): ``kvstore.format.root.encode_rows_py``; the
tests encode random rows with both and compare the bytes and the errors.

Why: the Python loop made three ``struct.pack`` calls and four ``bytearray``
appends per row; a 1000-row bulk commit spent more time encoding its root
than building its rows. Here one pass sizes the output, a second writes it.

``seal_root(magic, header, encoded_rows)`` assembles the whole file (magic,
``u32`` header length, header, rows, ``u32`` CRC32C) in one buffer; twin:
``kvstore.format.root.seal_root_py``. Assembling it in a ``bytearray`` cost
three copies of a 137 KB bulk root, and ``cython_ext._checksum`` (a table
CRC, ~2 GB/s) releases the GIL, which a busy flush thread then keeps for up
to a switch interval (5 ms) while the committer waits. Here the CRC uses the
CPU's CRC32C instruction where there is one (x86-64 with SSE 4.2), with the
GIL held; elsewhere it calls ``cython_ext._checksum``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __attribute__((target("sse4.2")))
    static uint32_t lakekv_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
        uint64_t c = ~crc;
        while (n >= 8) {
            uint64_t word;
            __builtin_memcpy(&word, p, 8);
            c = __builtin_ia32_crc32di(c, word);
            p += 8;
            n -= 8;
        }
        uint32_t c32 = (uint32_t)c;
        while (n > 0) {
            c32 = __builtin_ia32_crc32qi(c32, *p);
            p++;
            n--;
        }
        return ~c32;
    }
    static int lakekv_crc32c_hw_available(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sse4.2");
    }
    #else
    static uint32_t lakekv_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) { return 0; }
    static int lakekv_crc32c_hw_available(void) { return 0; }
    #endif
    """
    uint32_t lakekv_crc32c_hw(uint32_t crc, const unsigned char* p, size_t n) nogil
    int lakekv_crc32c_hw_available() nogil

cdef bint _HW_CRC = lakekv_crc32c_hw_available() != 0
# Whether seal_root's CRC runs on the CPU's CRC32C instruction (else cython_ext._checksum).
HARDWARE_CRC = bool(_HW_CRC)

cdef enum:
    _PUT = 1
    _DELETE = 2

cdef uint64_t _U32_MAX = 0xFFFFFFFF

# Declared without Cython's exception check: an int that does not fit int64
# is not an error here but a reason to run the exact (Python) checks.
cdef extern from "Python.h":
    long long _as_i64 "PyLong_AsLongLong"(object) noexcept
cdef int64_t _NO_EXPIRY = -1


cdef inline char* _put_u32(char* p, uint32_t v):
    p[0] = <char>(v & 0xFF)
    p[1] = <char>((v >> 8) & 0xFF)
    p[2] = <char>((v >> 16) & 0xFF)
    p[3] = <char>((v >> 24) & 0xFF)
    return p + 4


cdef inline char* _put_i64(char* p, int64_t v):
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <char>((u >> (8 * i)) & 0xFF)
    return p + 8


cdef inline bint _plain_fields(object seq, object kind, object expire, int64_t first) noexcept:
    """Whether the row's seq, kind and expiry are exact ints that fit format 2,
    checked with C integers (the Python comparisons below cost ~0.4 us a row).
    False means "not sure": the caller runs the exact checks."""
    cdef long long s, k, e
    if first < 0 or type(seq) is not int or type(kind) is not int:
        return False
    s = _as_i64(seq)
    if s == -1 and PyErr_Occurred():
        PyErr_Clear()
        return False
    if s < first or <uint64_t>(s - first) > _U32_MAX:
        return False
    k = _as_i64(kind)
    if k != _PUT and k != _DELETE:
        if k == -1 and PyErr_Occurred():
            PyErr_Clear()
        return False
    if expire is not None:
        if type(expire) is not int:
            return False
        e = _as_i64(expire)
        if e == -1 and PyErr_Occurred():
            PyErr_Clear()
            return False
    return True


def encode_rows(list rows, first_seq):
    """``u32 N`` then the N rows; see ``kvstore.format.root.encode_rows_py``."""
    cdef Py_ssize_t n = len(rows), i, total = 4
    cdef object row, key, seq, kind, value, expire
    cdef int64_t first = -1  # first_seq as a C integer; -1: not an int in 0..2**63-1
    if <uint64_t>n > _U32_MAX:
        raise ValueError(f"{n} rows do not fit a root file")
    if type(first_seq) is int:
        first = _as_i64(first_seq)
        if first == -1 and PyErr_Occurred():
            PyErr_Clear()
    # Pass 1: check every row and size the output.
    for i in range(n):
        row = rows[i]
        if type(row) is not tuple or PyTuple_GET_SIZE(row) != 5:
            raise ValueError(f"root row {row!r} is not a (key, seq, kind, value, expire) tuple")
        key = <object>PyTuple_GET_ITEM(row, 0)
        seq = <object>PyTuple_GET_ITEM(row, 1)
        kind = <object>PyTuple_GET_ITEM(row, 2)
        value = <object>PyTuple_GET_ITEM(row, 3)
        expire = <object>PyTuple_GET_ITEM(row, 4)
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise ValueError(f"root row ({key!r}, {seq!r}) needs a bytes key and a bytes or None value")
        if _plain_fields(seq, kind, expire, first) and PyBytes_GET_SIZE(key) <= <Py_ssize_t>_U32_MAX \
                and (value is None or PyBytes_GET_SIZE(value) < <Py_ssize_t>_U32_MAX):
            total += 4 + PyBytes_GET_SIZE(key) + 4 + 1 + 4 + 8
            if value is not None:
                total += PyBytes_GET_SIZE(value)
            continue
        if not (kind == _PUT or kind == _DELETE) or seq < first_seq or seq - first_seq > _U32_MAX:
            raise ValueError(f"root row ({key!r}, {seq}) does not fit format 2")
        if expire is not None and not (-(2**63) <= expire < 2**63):
            raise ValueError(f"root row ({key!r}, {seq}) has expiry {expire!r}, outside int64")
        if PyBytes_GET_SIZE(key) > _U32_MAX or (value is not None and PyBytes_GET_SIZE(value) >= _U32_MAX):
            raise ValueError(f"root row ({key!r}, {seq}) is too large for format 2")
        total += 4 + PyBytes_GET_SIZE(key) + 4 + 1 + 4 + 8
        if value is not None:
            total += PyBytes_GET_SIZE(value)
    # Pass 2: write.
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t size
    p = _put_u32(p, <uint32_t>n)
    for i in range(n):
        row = rows[i]
        key = <object>PyTuple_GET_ITEM(row, 0)
        value = <object>PyTuple_GET_ITEM(row, 3)
        expire = <object>PyTuple_GET_ITEM(row, 4)
        size = PyBytes_GET_SIZE(key)
        p = _put_u32(p, <uint32_t>size)
        memcpy(p, PyBytes_AS_STRING(key), size)
        p += size
        seq = <object>PyTuple_GET_ITEM(row, 1)
        if first >= 0 and type(seq) is int:
            # Pass 1 put it in first..first + 2**32, so it fits int64: no Python int for the difference.
            p = _put_u32(p, <uint32_t>(<uint64_t>(_as_i64(seq) - first)))
        else:
            p = _put_u32(p, <uint32_t>(<uint64_t>(seq - first_seq)))
        p[0] = <char>(<int>(<object>PyTuple_GET_ITEM(row, 2)))
        p += 1
        if value is None:
            p = _put_u32(p, 0)
        else:
            size = PyBytes_GET_SIZE(value)
            p = _put_u32(p, <uint32_t>(size + 1))
            memcpy(p, PyBytes_AS_STRING(value), size)
            p += size
        p = _put_i64(p, _NO_EXPIRY if expire is None else <int64_t>expire)
    return out


def seal_root(bytes magic, bytes header, bytes encoded_rows):
    """``magic``, ``u32`` header length, ``header``, ``encoded_rows``, then ``u32``
    CRC32C of all of it: a format-2 root file. See the module docstring."""
    cdef Py_ssize_t m = PyBytes_GET_SIZE(magic), h = PyBytes_GET_SIZE(header), r = PyBytes_GET_SIZE(encoded_rows)
    if <uint64_t>h > _U32_MAX:
        raise ValueError(f"a root header of {h} bytes does not fit format 2")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, m + 4 + h + r + 4)
    cdef char* start = PyBytes_AS_STRING(out)
    cdef char* p = start
    memcpy(p, PyBytes_AS_STRING(magic), m)
    p = _put_u32(p + m, <uint32_t>h)
    memcpy(p, PyBytes_AS_STRING(header), h)
    p += h
    memcpy(p, PyBytes_AS_STRING(encoded_rows), r)
    p += r
    cdef uint32_t crc
    if _HW_CRC:
        crc = lakekv_crc32c_hw(0, <const unsigned char*>start, <size_t>(p - start))
    else:
        from cython_ext._checksum import crc32c
        crc = crc32c(memoryview(out)[: p - start])
    _put_u32(p, crc)
    return out
