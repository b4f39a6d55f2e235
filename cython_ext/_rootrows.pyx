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
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

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
