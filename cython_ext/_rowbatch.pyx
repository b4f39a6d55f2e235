# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""Row tuples to the five Arrow arrays of ``ROW_SCHEMA``, in C.

``rows_to_arrays(rows)`` returns ``(key, seq, kind, value, expire_at_ms)``
arrays for a list of ``(key, seq, kind, value, expire)`` tuples, or None when
any row is not of the plain form it handles (a tuple of exactly five items, a
``bytes`` key, an ``int`` seq in 0..2**64-1, an ``int`` kind in 0..255, a
``bytes`` or None value, an ``int`` expiry in int64 or None) or the keys or
values of the list exceed 2 GiB (32-bit Arrow offsets). On None the caller
runs the pure-Python twin, ``kvstore.format.sst_writer._rows_to_batch_py``,
which builds the same batch or raises the error that names the bad row; the
tests compare the two on random rows.

Why: writing an SST from row tuples (every flush of the memtable, every
compaction) converted each 4096-row chunk with ``zip(*rows)``, five
``set(map(type, column))`` checks and five ``pa.array`` calls: ~7 us a row,
most of a flush's CPU, all of it holding the GIL while the committer needs it.
Here one pass checks and sizes the rows, a second fills the buffers.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.long cimport PyLong_CheckExact
from cpython.exc cimport PyErr_Occurred, PyErr_Clear
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

import pyarrow as pa

cdef Py_ssize_t _OFFSET_MAX = 0x7FFFFFFF

# Declared without Cython's exception check: an int that does not fit is not
# an error here but a reason to hand the rows to the Python twin.
cdef extern from "Python.h":
    unsigned long long _as_u64 "PyLong_AsUnsignedLongLong"(object) noexcept
    long long _as_i64 "PyLong_AsLongLong"(object) noexcept


cdef inline bint _is_none_or_exact(object obj, bint want_bytes):
    if obj is None:
        return True
    return PyBytes_CheckExact(obj) if want_bytes else PyLong_CheckExact(obj)


cdef inline bint _u64(object obj, uint64_t* out):
    """``obj`` (an exact int) as uint64; False if it does not fit."""
    cdef uint64_t v = _as_u64(obj)
    if v == <uint64_t>-1 and PyErr_Occurred():
        PyErr_Clear()
        return False
    out[0] = v
    return True


cdef inline bint _i64(object obj, int64_t* out):
    """``obj`` (an exact int) as int64; False if it does not fit."""
    cdef int64_t v = _as_i64(obj)
    if v == -1 and PyErr_Occurred():
        PyErr_Clear()
        return False
    out[0] = v
    return True


def rows_to_arrays(list rows):
    """The ROW_SCHEMA arrays of ``rows``, or None (see the module docstring)."""
    cdef Py_ssize_t n = len(rows), i, key_bytes = 0, value_bytes = 0, size
    cdef bint value_nulls = False, expire_nulls = False
    cdef object row, key, seq, kind, value, expire
    cdef uint64_t u = 0
    cdef int64_t s = 0
    # Pass 1: every row of the plain form, and the buffer sizes.
    for i in range(n):
        row = rows[i]
        if not PyTuple_CheckExact(row) or PyTuple_GET_SIZE(row) != 5:
            return None
        key = <object>PyTuple_GET_ITEM(row, 0)
        seq = <object>PyTuple_GET_ITEM(row, 1)
        kind = <object>PyTuple_GET_ITEM(row, 2)
        value = <object>PyTuple_GET_ITEM(row, 3)
        expire = <object>PyTuple_GET_ITEM(row, 4)
        if not PyBytes_CheckExact(key) or not PyLong_CheckExact(seq) or not PyLong_CheckExact(kind):
            return None
        if not _is_none_or_exact(value, True) or not _is_none_or_exact(expire, False):
            return None
        if not _u64(seq, &u) or not _u64(kind, &u) or u > 255:
            return None
        if expire is None:
            expire_nulls = True
        elif not _i64(expire, &s):
            return None
        key_bytes += PyBytes_GET_SIZE(key)
        if value is None:
            value_nulls = True
        else:
            value_bytes += PyBytes_GET_SIZE(value)
        if key_bytes > _OFFSET_MAX or value_bytes > _OFFSET_MAX:
            return None
    # Pass 2: fill the buffers (bytes objects handed to Arrow without a copy).
    cdef bytes key_offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
    cdef bytes key_data = PyBytes_FromStringAndSize(NULL, key_bytes)
    cdef bytes seqs = PyBytes_FromStringAndSize(NULL, n * 8)
    cdef bytes kinds = PyBytes_FromStringAndSize(NULL, n)
    cdef bytes value_offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
    cdef bytes value_data = PyBytes_FromStringAndSize(NULL, value_bytes)
    cdef bytes expires = PyBytes_FromStringAndSize(NULL, n * 8)
    cdef Py_ssize_t bitmap_bytes = (n + 7) // 8
    cdef bytes value_valid = PyBytes_FromStringAndSize(NULL, bitmap_bytes) if value_nulls else None
    cdef bytes expire_valid = PyBytes_FromStringAndSize(NULL, bitmap_bytes) if expire_nulls else None
    cdef int32_t* k_off = <int32_t*>PyBytes_AS_STRING(key_offsets)
    cdef char* k_dat = PyBytes_AS_STRING(key_data)
    cdef uint64_t* seq_out = <uint64_t*>PyBytes_AS_STRING(seqs)
    cdef uint8_t* kind_out = <uint8_t*>PyBytes_AS_STRING(kinds)
    cdef int32_t* v_off = <int32_t*>PyBytes_AS_STRING(value_offsets)
    cdef char* v_dat = PyBytes_AS_STRING(value_data)
    cdef int64_t* exp_out = <int64_t*>PyBytes_AS_STRING(expires)
    cdef uint8_t* v_valid = <uint8_t*>PyBytes_AS_STRING(value_valid) if value_nulls else NULL
    cdef uint8_t* e_valid = <uint8_t*>PyBytes_AS_STRING(expire_valid) if expire_nulls else NULL
    cdef Py_ssize_t k_pos = 0, v_pos = 0
    if v_valid != NULL:
        memset(v_valid, 0, bitmap_bytes)
    if e_valid != NULL:
        memset(e_valid, 0, bitmap_bytes)
    k_off[0] = 0
    v_off[0] = 0
    for i in range(n):
        row = rows[i]
        key = <object>PyTuple_GET_ITEM(row, 0)
        value = <object>PyTuple_GET_ITEM(row, 3)
        expire = <object>PyTuple_GET_ITEM(row, 4)
        size = PyBytes_GET_SIZE(key)
        memcpy(k_dat + k_pos, PyBytes_AS_STRING(key), size)
        k_pos += size
        k_off[i + 1] = <int32_t>k_pos
        _u64(<object>PyTuple_GET_ITEM(row, 1), &seq_out[i])
        _u64(<object>PyTuple_GET_ITEM(row, 2), &u)
        kind_out[i] = <uint8_t>u
        if value is not None:
            size = PyBytes_GET_SIZE(value)
            memcpy(v_dat + v_pos, PyBytes_AS_STRING(value), size)
            v_pos += size
            if v_valid != NULL:
                v_valid[i >> 3] |= <uint8_t>(1 << (i & 7))
        v_off[i + 1] = <int32_t>v_pos
        if expire is None:
            exp_out[i] = 0
        else:
            _i64(expire, &exp_out[i])
            if e_valid != NULL:
                e_valid[i >> 3] |= <uint8_t>(1 << (i & 7))
    py_buffer = pa.py_buffer
    return (
        pa.Array.from_buffers(pa.binary(), n, [None, py_buffer(key_offsets), py_buffer(key_data)]),
        pa.Array.from_buffers(pa.uint64(), n, [None, py_buffer(seqs)]),
        pa.Array.from_buffers(pa.uint8(), n, [None, py_buffer(kinds)]),
        pa.Array.from_buffers(
            pa.binary(), n, [None if value_valid is None else py_buffer(value_valid), py_buffer(value_offsets), py_buffer(value_data)]
        ),
        pa.Array.from_buffers(pa.int64(), n, [None if expire_valid is None else py_buffer(expire_valid), py_buffer(expires)]),
    )
