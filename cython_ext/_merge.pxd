# cython: language_level=3
"""C-level pieces of the merge iterator (see _merge.pyx): the CPython calls it
makes on raw pointers, the per-source struct, and byte-order key comparison."""

from libc.stdint cimport uint64_t


cdef extern from "Python.h":
    # Declared on raw PyObject* so that Cython adds no reference counting or
    # error checks of its own in the hot loop: each call site does both.
    ctypedef struct PyObject
    PyObject* PyIter_Next(PyObject* it)
    PyObject* PyErr_Occurred()
    bint PyTuple_Check(PyObject* o)
    Py_ssize_t PyTuple_GET_SIZE(PyObject* o)
    PyObject* PyTuple_GET_ITEM(PyObject* o, Py_ssize_t i)
    bint PyBytes_Check(PyObject* o)
    char* PyBytes_AS_STRING(PyObject* o)
    Py_ssize_t PyBytes_GET_SIZE(PyObject* o)
    Py_ssize_t PyList_GET_SIZE(PyObject* o)
    PyObject* PyList_GET_ITEM(PyObject* o, Py_ssize_t i)
    void _incref "Py_INCREF"(PyObject* o)
    void _decref "Py_DECREF"(PyObject* o)
    void _xdecref "Py_XDECREF"(PyObject* o)


cdef extern from *:
    # Called directly, never from a helper function: GCC deletes calls to a
    # function whose only effect is a prefetch, as having no side effects.
    void _prefetch "__builtin_prefetch"(const void* p) noexcept nogil


cdef struct _Source:
    PyObject* iterator          # owned; NULL for a list source, or once released
    PyObject* rows              # owned list, read by index (the fast path), or NULL
    Py_ssize_t pos              # next index into rows
    PyObject* row               # owned current row; NULL = exhausted
    const unsigned char* key    # the row's key bytes, kept alive by row
    Py_ssize_t key_len
    uint64_t w0, w1             # key bytes 0-7 and 8-15 as integers (_word); see _keycmp
    uint64_t seq                # the row's seq, valid once seq_ready
    bint seq_ready
    const char* prev_row        # addresses of the previous row's tuple and key,
    const char* prev_key        # for _stride_prefetch


cdef struct _Bound:
    const unsigned char* key    # into a bytes object the iterator keeps alive
    Py_ssize_t key_len
    uint64_t w0, w1


cdef inline uint64_t _word(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Up to 8 bytes at p as a big-endian integer, zero-padded: compares like the bytes."""
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    if n >= 8:  # the compiler turns this into one load + bswap
        return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
                | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
                | (<uint64_t>p[6] << 8) | <uint64_t>p[7])
    for i in range(n):
        w |= <uint64_t>p[i] << (56 - 8 * i)
    return w


cdef inline int _keycmp(uint64_t a0, uint64_t a1, const unsigned char* pa, Py_ssize_t la,
                        uint64_t b0, uint64_t b1, const unsigned char* pb, Py_ssize_t lb) noexcept nogil:
    """Bytewise order (<0, 0, >0) of keys pa, pb, given their first two words.

    The words hold the first 16 bytes zero-padded, which keeps the order: two
    words differ only where the keys differ, or where the shorter key ends
    and is a prefix of the longer. Most keys differ within 16 bytes, so most
    comparisons never leave registers; the rest go 8 bytes at a time rather
    than through memcmp, a libc call that was 14% of an early profile.
    """
    cdef Py_ssize_t n = la if la < lb else lb
    cdef Py_ssize_t i = 16
    if a0 != b0:
        return -1 if a0 < b0 else 1
    while a1 == b1:
        if i >= n:  # equal up to the shorter length: the shorter key sorts first
            return (la > lb) - (la < lb)
        a1 = _word(pa + i, n - i)
        b1 = _word(pb + i, n - i)
        i += 8
    return -1 if a1 < b1 else 1


cdef inline void _stride_prefetch(const char* current, const char* previous) noexcept nogil:
    """Prefetch the object expected 4 rows ahead, at the stride seen from previous to current.

    CPython allocates objects created one after another at a fixed stride
    (a batch decoded into tuples sits 80 bytes apart), so a source's next rows
    are predictable without reading ahead. A wrong guess only wastes a
    prefetch: they never fault.
    """
    cdef Py_ssize_t stride = <Py_ssize_t>current - <Py_ssize_t>previous  # as integers: no UB
    if -1024 < stride < 1024:
        _prefetch(current + 4 * stride)


cdef inline int _cmp_bound(const _Source* s, const _Bound* bound) noexcept nogil:
    """Order (<0, 0, >0) of s's current key against a bound."""
    return _keycmp(s.w0, s.w1, s.key, s.key_len, bound.w0, bound.w1, bound.key, bound.key_len)


cdef inline void _set_bound(_Bound* bound, PyObject* key) noexcept:
    """Point bound at key, a bytes object the caller keeps alive; None leaves it unset."""
    if PyBytes_Check(key):
        bound.key, bound.key_len = <const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
        bound.w0, bound.w1 = _word(bound.key, bound.key_len), _word(bound.key + 8, bound.key_len - 8)


cdef inline void _release(_Source* s) noexcept:
    """Drop the source's iterator or list (not its current row)."""
    _xdecref(s.iterator)
    _xdecref(s.rows)
    s.iterator = NULL
    s.rows = NULL


cdef inline int _load_seq(_Source* s) except -1:
    """Convert the current row's seq; called only when it is needed (see _merge.pyx)."""
    # Cython's conversion reads a small int's digits in place; the C-API
    # PyLong_AsUnsignedLongLong takes a slow generic path above 2**30.
    s.seq = <uint64_t><object>PyTuple_GET_ITEM(s.row, 1)
    s.seq_ready = True
    return 0
