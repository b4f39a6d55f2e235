# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The memtable's per-row insert in C: one pass over a version's rows.

Pure-Python twin (the spec): ``kvstore.memtable.apply_rows_py``;
``kvstore.memtable`` picks one at import time and
``tests/kvstore/test_memtable_compiled.py`` runs both on random row lists
(keys, seqs, duplicate keys, unordered input) and compares the dicts and
results.

Why: inserting a 1000-row version into the memtable was 1000 Python-level
``SortedDict`` inserts, ~30 % of the committer in the W1 bulk load. Here the
dict probe, the tuple prepend and the byte count are C calls; the key order
for scans is kept apart as sorted runs (``kvstore.memtable``).
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF


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


def apply_rows(dict data, list rows, Py_ssize_t row_overhead):
    """Insert ``rows`` into ``data``; see ``kvstore.memtable.apply_rows_py``."""
    cdef list new_keys = []
    cdef Py_ssize_t i, n = len(rows), nbytes = 0
    cdef object row_obj, key, seq, value
    cdef tuple row, current
    cdef PyObject* found
    cdef bytes previous = None
    cdef bint ordered = True
    max_seq = -1
    for i in range(n):
        row_obj = rows[i]
        if type(row_obj) is not tuple or PyTuple_GET_SIZE(row_obj) != 5 or type(<object>PyTuple_GET_ITEM(row_obj, 0)) is not bytes:
            raise TypeError(f"a memtable row must be a (key, seq, kind, value, expire) tuple with a bytes key, got {row_obj!r}")
        row = <tuple>row_obj
        key = <object>PyTuple_GET_ITEM(row, 0)
        seq = <object>PyTuple_GET_ITEM(row, 1)
        if ordered and previous is not None and <bytes>key < previous:
            ordered = False
        previous = <bytes>key
        found = PyDict_GetItem(data, key)
        if found is NULL:
            PyDict_SetItem(data, key, (row,))
            new_keys.append(key)
        else:
            current = <tuple>found
            if seq > (<tuple>PyTuple_GET_ITEM(current, 0))[1]:
                PyDict_SetItem(data, key, _prepend(row, current))
            else:
                PyDict_SetItem(data, key, _insert_by_seq(current, row))
        value = <object>PyTuple_GET_ITEM(row, 3)
        nbytes += len(<bytes>key) + row_overhead
        if value is not None:
            nbytes += len(value)
        if seq > max_seq:
            max_seq = seq
    return new_keys, nbytes, max_seq, ordered
