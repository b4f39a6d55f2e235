# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The memtable's per-row insert in C: one pass over a version's rows.

Pure-Python twin (the spec): ``kvstore.memtable.apply_rows_py``;
``kvstore.memtable`` picks one at import time and
``tests/kvstore/test_memtable_compiled.py`` runs both on random row lists
(keys, seqs, duplicate keys, unordered input) and compares the dicts and
results.

``merge_runs`` merges the sorted key runs into one, without the GIL; its
twin is ``kvstore.memtable.merge_runs_py``.

Why: inserting a 1000-row version into the memtable was 1000 Python-level
``SortedDict`` inserts, ~30 % of the committer in the W1 bulk load. Here the
dict probe, the tuple prepend and the byte count are C calls; the key order
for scans is kept apart as sorted runs (``kvstore.memtable``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport uint64_t
from libc.string cimport memcmp
from cython_ext._keyref cimport KeyRef, key_less, key_ref_set


cdef tuple _prepend(object row, tuple current):
    # (row,) + current without building the one-tuple first.
    cdef Py_ssize_t n = PyTuple_GET_SIZE(current)
    cdef tuple out = PyTuple_New(n + 1)
    cdef Py_ssize_t i
    cdef object item
    Py_INCREF(row)
    PyTuple_SET_ITEM(out, 0, row)
    for i in range(n):
        item = <object>PyTuple_GET_ITEM(current, i)
        Py_INCREF(item)
        PyTuple_SET_ITEM(out, i + 1, item)
    return out


cdef tuple _insert_by_seq(tuple versions, tuple row):
    # Rare path (one key twice in a batch, or a version applied again): same
    # rule as the twin's ``_insert_by_seq``.
    cdef list items = list(versions)
    cdef Py_ssize_t index = 0
    seq = row[1]
    while index < len(items) and items[index][1] > seq:
        index += 1
    if index < len(items) and items[index][1] == seq:
        items[index] = row  # re-applying the same version is idempotent
    else:
        items.insert(index, row)
    return tuple(items)


cdef extern from "Python.h":
    # Declared without Cython's exception check: -1 with an error set is a
    # seq that is not a plain int64, and the rows then take the Python compare.
    long long _as_i64 "PyLong_AsLongLong"(object) noexcept
    # Inserts ``default`` if ``key`` is absent (one probe); a borrowed reference
    # to the value now under ``key``, NULL on error.
    PyObject* PyDict_SetDefault(object d, object key, object default) except NULL


cdef inline bint _key_less(bytes a, bytes b) noexcept:
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b)
    cdef int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), na if na < nb else nb)
    return c < 0 or (c == 0 and na < nb)


def apply_rows(dict data, list rows, Py_ssize_t row_overhead):
    """Insert ``rows`` into ``data``; see ``kvstore.memtable.apply_rows_py``."""
    cdef list new_keys = []
    cdef Py_ssize_t i, n = len(rows), nbytes = 0
    cdef object row_obj, key, seq, value
    cdef tuple row, current, single
    cdef PyObject* found
    cdef bytes previous = None
    cdef bint ordered = True
    cdef long long seq_c, max_seq_c = -1
    cdef bint plain_seqs = True  # every seq so far an int in 0..2**63-1: max_seq kept as a C integer
    max_seq = -1
    for i in range(n):
        row_obj = rows[i]
        if type(row_obj) is not tuple or PyTuple_GET_SIZE(row_obj) != 5 or type(<object>PyTuple_GET_ITEM(row_obj, 0)) is not bytes:
            raise TypeError(f"a memtable row must be a (key, seq, kind, value, expire) tuple with a bytes key, got {row_obj!r}")
        row = <tuple>row_obj
        key = <object>PyTuple_GET_ITEM(row, 0)
        seq = <object>PyTuple_GET_ITEM(row, 1)
        if ordered and previous is not None and _key_less(<bytes>key, previous):
            ordered = False
        previous = <bytes>key
        # One probe for a new key (the bulk-load case): insert (row,) unless the key is there.
        single = PyTuple_New(1)
        Py_INCREF(row)
        PyTuple_SET_ITEM(single, 0, row)
        found = PyDict_SetDefault(data, key, single)
        if found == <PyObject*>single:
            new_keys.append(key)
        else:
            current = <tuple>found
            if seq > (<tuple>PyTuple_GET_ITEM(current, 0))[1]:
                PyDict_SetItem(data, key, _prepend(row, current))
            else:
                PyDict_SetItem(data, key, _insert_by_seq(current, row))
        value = <object>PyTuple_GET_ITEM(row, 3)
        nbytes += PyBytes_GET_SIZE(key) + row_overhead
        if value is not None:
            nbytes += len(value)
        if plain_seqs and type(seq) is int:
            seq_c = _as_i64(seq)
            if seq_c == -1 and PyErr_Occurred():
                PyErr_Clear()
                plain_seqs = False
            elif seq_c < 0:
                plain_seqs = False
            elif seq_c > max_seq_c:
                max_seq_c = seq_c
                max_seq = seq
            continue
        plain_seqs = False
        if seq > max_seq:
            max_seq = seq
    if not plain_seqs:  # some seq was not a plain int64: recompute exactly, with Python compares
        max_seq = -1
        for i in range(n):
            seq = (<tuple>rows[i])[1]
            if seq > max_seq:
                max_seq = seq
    return new_keys, nbytes, max_seq, ordered


def merge_runs(list runs):
    """One sorted list of the keys of ``runs`` (sorted lists of bytes).

    Same result as ``sorted(itertools.chain(*runs))``, the pure-Python twin
    (``kvstore.memtable.merge_runs_py``). The merge itself runs without the
    GIL: bottom-up pairwise merges of the runs over ``(pointer, length)``
    references, so merging a large memtable's runs does not stall the
    committer thread the way one long ``list.sort`` holding the GIL would.

    Requires: the runs' keys are bytes (the memtable's are).
    """
    cdef Py_ssize_t k = len(runs), n = 0, i, j, r
    cdef list run
    for r in range(k):
        n += len(<list>runs[r])
    cdef KeyRef* refs = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef KeyRef* spare = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef Py_ssize_t* bounds = <Py_ssize_t*>PyMem_Malloc((k + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t width, count, a, a_end, b_end, out
    cdef KeyRef* tmp
    cdef object key
    cdef list merged
    if refs == NULL or spare == NULL or bounds == NULL:
        PyMem_Free(refs)
        PyMem_Free(spare)
        PyMem_Free(bounds)
        raise MemoryError()
    try:
        i = 0
        for r in range(k):
            run = <list>runs[r]
            bounds[r] = i
            for j in range(len(run)):
                key = run[j]
                if type(key) is not bytes:
                    raise TypeError(f"memtable run keys must be bytes, got {type(key).__name__}")
                key_ref_set(&refs[i], <PyObject*>key, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
                i += 1
        bounds[k] = n
        count = k
        with nogil:
            # Merge runs pairwise until one is left; ``bounds`` holds the
            # current runs' starts (count + 1 entries).
            while count > 1:
                out = 0
                width = 0
                while width < count:
                    a = bounds[width]
                    a_end = bounds[width + 1]
                    b_end = bounds[width + 2] if width + 1 < count else a_end
                    i, j = a, a_end
                    bounds[width // 2] = out
                    while i < a_end and j < b_end:
                        if key_less(&refs[j], &refs[i]):
                            spare[out] = refs[j]
                            j += 1
                        else:
                            spare[out] = refs[i]
                            i += 1
                        out += 1
                    while i < a_end:
                        spare[out] = refs[i]
                        i += 1
                        out += 1
                    while j < b_end:
                        spare[out] = refs[j]
                        j += 1
                        out += 1
                    width += 2
                count = (count + 1) // 2
                bounds[count] = n
                tmp = refs
                refs = spare
                spare = tmp
        merged = PyList_New(n)
        for i in range(n):
            Py_INCREF(<object>refs[i].obj)
            PyList_SET_ITEM(merged, i, <object>refs[i].obj)
        return merged
    finally:
        PyMem_Free(refs)
        PyMem_Free(spare)
        PyMem_Free(bounds)
