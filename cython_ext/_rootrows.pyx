# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The delta rows of a format-3 root file, encoded and decoded in C.

Layout (``kvstore.format.root``'s module docstring): ``varint N``, ``u8``
section flags (1: every row's seq is ``first_seq``, and rows omit it), then
per row::

    u8 lead: < 0x80 a PUT with a value and no expiry, sharing ``lead`` key
    bytes with the previous row; else 0x80 | flags (kind | 4: null value |
    8: expiry) followed by varint shared-prefix length,
    varint suffix length, suffix bytes, [varint seq - first_seq],
    [varint value length, value bytes], [varint zigzag(expire_at_ms)]

Pure-Python twins (the spec): ``kvstore.format.root.encode_rows_py`` and
``decode_rows_py``; the tests run random rows and random bytes through both
and compare the bytes, the rows and the errors.

Why: the Python loop made several ``struct.pack`` calls and ``bytearray``
appends per row; a 1000-row bulk commit spent more time encoding its root
than building its rows. Here one pass checks the rows and sizes the output,
a second writes it. Decoding a root is on every reader's path (open, poll,
export), one Python-level varint at a time costs ~0.5 us a row.

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
from libc.stdint cimport int64_t, uint32_t, uint64_t, INT64_MAX
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
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

# The per-row work of encode_rows, in C on borrowed references: Cython's
# reference counting of five fields a row doubled the encoder's time.
cdef extern from *:
    """
    #include <Python.h>
    #include <string.h>
    typedef struct {
        uint64_t delta;  /* seq - first_seq */
        int kind;
        int has_expiry;
        int64_t expiry;
        Py_ssize_t shared;  /* key bytes shared with the previous row's key */
    } lakekv_fields;

    /* 1 and the row's integers in *out when the row is a 5-tuple of exact
       types whose ints fit int64 and the format; 0: run the exact checks. */
    static int lakekv_plain_row(PyObject *row, int64_t first, lakekv_fields *out) {
        PyObject *key, *seq, *kind, *value, *expire;
        int overflow = 0;
        long long s, k, e = 0;
        if (first < 0 || !PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5) return 0;
        key = PyTuple_GET_ITEM(row, 0);
        seq = PyTuple_GET_ITEM(row, 1);
        kind = PyTuple_GET_ITEM(row, 2);
        value = PyTuple_GET_ITEM(row, 3);
        expire = PyTuple_GET_ITEM(row, 4);
        if (!PyBytes_CheckExact(key) || (value != Py_None && !PyBytes_CheckExact(value))) return 0;
        if (!PyLong_CheckExact(seq) || !PyLong_CheckExact(kind)) return 0;
        if (expire != Py_None && !PyLong_CheckExact(expire)) return 0;
        s = PyLong_AsLongLongAndOverflow(seq, &overflow);
        if (overflow || s < first) return 0;
        k = PyLong_AsLongLongAndOverflow(kind, &overflow);
        if (overflow || (k != 1 && k != 2)) return 0;
        if (expire != Py_None) {
            e = PyLong_AsLongLongAndOverflow(expire, &overflow);
            if (overflow) return 0;
        }
        out->delta = (uint64_t)(s - first);
        out->kind = (int)k;
        out->has_expiry = expire != Py_None;
        out->expiry = (int64_t)e;
        return 1;
    }

    static inline Py_ssize_t lakekv_varint_size(uint64_t v) {
        Py_ssize_t n = 1;
        while (v > 0x7F) { v >>= 7; n++; }
        return n;
    }

    static inline char *lakekv_put_varint(char *p, uint64_t v) {
        while (v > 0x7F) { *p++ = (char)((v & 0x7F) | 0x80); v >>= 7; }
        *p++ = (char)v;
        return p;
    }

    static inline uint64_t lakekv_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

    /* The length of the common prefix of a and b, 8 bytes at a time. */
    static inline Py_ssize_t lakekv_shared(const char *a, Py_ssize_t a_len, const char *b, Py_ssize_t b_len) {
        Py_ssize_t n = a_len < b_len ? a_len : b_len, i = 0;
        uint64_t x, y;
        while (i + 8 <= n) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y) {
    #if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                return i + (__builtin_ctzll(x ^ y) >> 3);
    #else
                break;
    #endif
            }
            i += 8;
        }
        while (i < n && a[i] == b[i]) i++;
        return i;
    }

    /* Whether a checked row takes the one-byte lead: a PUT with a value, no
       expiry, sharing under 0x80 bytes. */
    static inline int lakekv_plain_lead(PyObject *row, const lakekv_fields *f) {
        return f->kind == 1 && PyTuple_GET_ITEM(row, 3) != Py_None && !f->has_expiry && f->shared < 0x80;
    }

    /* The encoded size of a checked row without its seq field; sets
       f->shared from *previous, the previous row's key (NULL for the first row). */
    static Py_ssize_t lakekv_row_size(PyObject *row, lakekv_fields *f, PyObject **previous) {
        PyObject *key = PyTuple_GET_ITEM(row, 0), *value = PyTuple_GET_ITEM(row, 3);
        Py_ssize_t size = PyBytes_GET_SIZE(key), shared = 0, total;
        if (*previous != NULL)
            shared = lakekv_shared(PyBytes_AS_STRING(*previous), PyBytes_GET_SIZE(*previous), PyBytes_AS_STRING(key), size);
        *previous = key;
        f->shared = shared;
        total = 1 + (lakekv_plain_lead(row, f) ? 0 : lakekv_varint_size((uint64_t)shared));
        total += lakekv_varint_size((uint64_t)(size - shared)) + size - shared;
        if (value != Py_None)
            total += lakekv_varint_size((uint64_t)PyBytes_GET_SIZE(value)) + PyBytes_GET_SIZE(value);
        if (f->has_expiry)
            total += lakekv_varint_size(lakekv_zigzag(f->expiry));
        return total;
    }

    /* Write a row sized by lakekv_row_size (plus its seq field unless
       one_seq) at p; returns the end. */
    static char *lakekv_write_row(char *p, PyObject *row, const lakekv_fields *f, int one_seq) {
        PyObject *key = PyTuple_GET_ITEM(row, 0), *value = PyTuple_GET_ITEM(row, 3);
        Py_ssize_t size = PyBytes_GET_SIZE(key), shared = f->shared;
        int flags = f->kind;
        if (lakekv_plain_lead(row, f)) {
            *p++ = (char)shared;
        } else {
            if (value == Py_None) flags |= 0x04;
            if (f->has_expiry) flags |= 0x08;
            *p++ = (char)(0x80 | flags);
            p = lakekv_put_varint(p, (uint64_t)shared);
        }
        p = lakekv_put_varint(p, (uint64_t)(size - shared));
        memcpy(p, PyBytes_AS_STRING(key) + shared, (size_t)(size - shared));
        p += size - shared;
        if (!one_seq) p = lakekv_put_varint(p, f->delta);
        if (value != Py_None) {
            size = PyBytes_GET_SIZE(value);
            p = lakekv_put_varint(p, (uint64_t)size);
            memcpy(p, PyBytes_AS_STRING(value), (size_t)size);
            p += size;
        }
        if (f->has_expiry) p = lakekv_put_varint(p, lakekv_zigzag(f->expiry));
        return p;
    }
    """
    ctypedef struct lakekv_fields:
        uint64_t delta
        int kind
        bint has_expiry
        int64_t expiry
        Py_ssize_t shared
    int lakekv_plain_row(PyObject* row, int64_t first, lakekv_fields* out) noexcept
    Py_ssize_t lakekv_row_size(PyObject* row, lakekv_fields* f, PyObject** previous) noexcept
    char* lakekv_write_row(char* p, PyObject* row, const lakekv_fields* f, int one_seq) noexcept
    Py_ssize_t lakekv_varint_size(uint64_t v) noexcept
    char* lakekv_put_varint(char* p, uint64_t v) noexcept


cdef bint _HW_CRC = lakekv_crc32c_hw_available() != 0
# Whether seal_root's CRC runs on the CPU's CRC32C instruction (else cython_ext._checksum).
HARDWARE_CRC = bool(_HW_CRC)

cdef enum:
    _PUT = 1
    _DELETE = 2
    _KIND_BITS = 0x03
    _NULL_VALUE = 0x04
    _HAS_EXPIRY = 0x08
    _FLAGGED_LEAD = 0x80
    _ONE_SEQ = 0x01

cdef object _U64_MAX = 2**64 - 1
cdef uint64_t _U32_MAX = 0xFFFFFFFF
cdef object _PUT_OBJ = 1
cdef object _DELETE_OBJ = 2

# Declared without Cython's exception check: an int that does not fit int64
# is not an error here but a reason to run the exact (Python) checks.
cdef extern from "Python.h":
    long long _as_i64 "PyLong_AsLongLong"(object) noexcept


cdef inline char* _put_u32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v & 0xFF)
    p[1] = <char>((v >> 8) & 0xFF)
    p[2] = <char>((v >> 16) & 0xFF)
    p[3] = <char>((v >> 24) & 0xFF)
    return p + 4


cdef int _check_row(object row, object first_seq, lakekv_fields* out) except -1:
    """Check a row that ``lakekv_plain_row`` did not take (bools, int
    subclasses, ints past int64, bad rows) exactly as ``encode_rows_py``
    does (same errors, same order) and put its integers in ``out``."""
    cdef object key, seq, kind, value, expire
    if type(row) is not tuple or PyTuple_GET_SIZE(row) != 5:
        raise ValueError(f"root row {row!r} is not a (key, seq, kind, value, expire) tuple")
    key = <object>PyTuple_GET_ITEM(row, 0)
    seq = <object>PyTuple_GET_ITEM(row, 1)
    kind = <object>PyTuple_GET_ITEM(row, 2)
    value = <object>PyTuple_GET_ITEM(row, 3)
    expire = <object>PyTuple_GET_ITEM(row, 4)
    if type(key) is not bytes or (value is not None and type(value) is not bytes):
        raise ValueError(f"root row ({key!r}, {seq!r}) needs a bytes key and a bytes or None value")
    if not isinstance(seq, int) or not isinstance(kind, int) or not (kind == _PUT or kind == _DELETE) \
            or seq < first_seq or seq - first_seq > _U64_MAX:
        raise ValueError(f"root row ({key!r}, {seq!r}) does not fit format 3")
    if expire is not None and (not isinstance(expire, int) or not (-(2**63) <= expire < 2**63)):
        raise ValueError(f"root row ({key!r}, {seq!r}) has expiry {expire!r}, not an int64")
    out.delta = <uint64_t>(int(seq - first_seq))
    out.kind = _PUT if kind == _PUT else _DELETE
    out.has_expiry = expire is not None
    out.expiry = <int64_t>(int(expire)) if expire is not None else 0
    return 0


def encode_rows(list rows, first_seq):
    """``varint N`` then the N rows; see ``kvstore.format.root.encode_rows_py``."""
    # A snapshot: checking an unusual row runs Python code (an int
    # subclass's comparisons) that could change the list between the passes.
    cdef tuple snapshot = tuple(rows)
    cdef Py_ssize_t n = PyTuple_GET_SIZE(snapshot), i, total, seq_bytes = 0
    cdef bint one_seq
    cdef PyObject* row
    cdef PyObject* previous = NULL
    cdef lakekv_fields* fields
    cdef int64_t first = -1  # first_seq as a C integer; -1: not an int in 0..2**63-1
    cdef bytes out
    cdef char* start
    cdef char* p
    if type(first_seq) is int:
        first = _as_i64(first_seq)
        if first == -1 and PyErr_Occurred():
            PyErr_Clear()
    fields = <lakekv_fields*>PyMem_Malloc(sizeof(lakekv_fields) * (n if n > 0 else 1))
    if fields == NULL:
        raise MemoryError()
    try:
        # Pass 1: check every row and size the output.
        total = lakekv_varint_size(<uint64_t>n) + 1
        one_seq = True
        for i in range(n):
            row = PyTuple_GET_ITEM(snapshot, i)
            if not lakekv_plain_row(row, first, &fields[i]):
                _check_row(<object>row, first_seq, &fields[i])
            total += lakekv_row_size(row, &fields[i], &previous)
            seq_bytes += lakekv_varint_size(fields[i].delta)
            if fields[i].delta != 0:
                one_seq = False
        if not one_seq:
            total += seq_bytes
        # Pass 2: write.
        out = PyBytes_FromStringAndSize(NULL, total)
        start = PyBytes_AS_STRING(out)
        p = lakekv_put_varint(start, <uint64_t>n)
        p[0] = <char>(_ONE_SEQ if one_seq else 0)
        p += 1
        for i in range(n):
            p = lakekv_write_row(p, PyTuple_GET_ITEM(snapshot, i), &fields[i], one_seq)
    finally:
        PyMem_Free(fields)
    return out


cdef int _read_varint(const unsigned char* data, Py_ssize_t* pos, Py_ssize_t end, uint64_t* out) except -1:
    """The varint at ``pos[0]`` into ``out``; ``pos[0]`` moves past it."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t at = pos[0]
    while True:
        if at >= end:
            raise ValueError("a varint runs past the end of the rows")
        byte = data[at]
        at += 1
        if shift == 63 and byte > 1:
            raise ValueError("a varint overflows 64 bits")
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            pos[0] = at
            out[0] = result
            return 0
        shift += 7


def decode_rows(bytes data, Py_ssize_t pos, Py_ssize_t end, first_seq):
    """The rows of a format-3 delta section at ``data[pos:end]``; see
    ``kvstore.format.root.decode_rows_py`` (same rows, same ValueErrors)."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    if not (0 <= pos <= end <= size):
        raise ValueError(f"rows at {pos}..{end} are outside {size} bytes")
    cdef const unsigned char* base = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef uint64_t count, i, shared, length, offset, zigzag
    cdef int flags, kind, lead, section
    cdef int64_t first = -1
    cdef bytes key, previous = b""
    cdef object value, expire, seq
    cdef list rows = []
    if type(first_seq) is int:
        first = _as_i64(first_seq)
        if first == -1 and PyErr_Occurred():
            PyErr_Clear()
    _read_varint(base, &pos, end, &count)
    if pos >= end:
        raise ValueError("the section flags are missing")
    section = base[pos]
    pos += 1
    if section & ~_ONE_SEQ:
        raise ValueError(f"the rows have section flags {section:#04x}")
    i = 0
    while i < count:
        i += 1
        if pos >= end:
            raise ValueError("a row's lead byte is missing")
        lead = base[pos]
        pos += 1
        if lead < _FLAGGED_LEAD:
            flags = _PUT
            shared = <uint64_t>lead
        else:
            flags = lead & ~_FLAGGED_LEAD
            kind = flags & _KIND_BITS
            if flags & ~(_KIND_BITS | _NULL_VALUE | _HAS_EXPIRY) or not (kind == _PUT or kind == _DELETE):
                raise ValueError(f"a row has flags {flags:#04x}")
            _read_varint(base, &pos, end, &shared)
        if shared > <uint64_t>PyBytes_GET_SIZE(previous):
            raise ValueError(f"a key shares {shared} bytes with a {PyBytes_GET_SIZE(previous)}-byte key")
        _read_varint(base, &pos, end, &length)
        if length > <uint64_t>(end - pos):
            raise ValueError("a key runs past the end of the rows")
        key = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>(shared + length))
        memcpy(PyBytes_AS_STRING(key), PyBytes_AS_STRING(previous), <size_t>shared)
        memcpy(PyBytes_AS_STRING(key) + shared, base + pos, <size_t>length)
        pos += <Py_ssize_t>length
        previous = key
        offset = 0
        if not section & _ONE_SEQ:
            _read_varint(base, &pos, end, &offset)
        kind = flags & _KIND_BITS
        value = None
        if not flags & _NULL_VALUE:
            _read_varint(base, &pos, end, &length)
            if length > <uint64_t>(end - pos):
                raise ValueError("a value runs past the end of the rows")
            value = PyBytes_FromStringAndSize(<const char*>(base + pos), <Py_ssize_t>length)
            pos += <Py_ssize_t>length
        expire = None
        if flags & _HAS_EXPIRY:
            _read_varint(base, &pos, end, &zigzag)
            expire = <int64_t>((zigzag >> 1) ^ (0 - (zigzag & 1)))
        if first >= 0 and offset <= <uint64_t>(INT64_MAX - first):
            seq = <int64_t>(first + <int64_t>offset)
        else:
            seq = first_seq + offset
        rows.append((key, seq, _PUT_OBJ if kind == _PUT else _DELETE_OBJ, value, expire))
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the last row")
    return rows


def seal_root(bytes magic, bytes header, bytes encoded_rows):
    """``magic``, ``u32`` header length, ``header``, ``encoded_rows``, then ``u32``
    CRC32C of all of it: a root file (format 2 or 3). See the module docstring."""
    cdef Py_ssize_t m = PyBytes_GET_SIZE(magic), h = PyBytes_GET_SIZE(header), r = PyBytes_GET_SIZE(encoded_rows)
    if <uint64_t>h > _U32_MAX:
        raise ValueError(f"a root header of {h} bytes does not fit a root file")
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
