# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""``WriteBatch.put_many``'s loop, in C.

``put_pairs(mutations, pairs, put, max_key, max_value)`` stores each plain
``(key, value)`` pair of the iterator ``pairs`` as ``mutations[key] =
(put, value, None)``, as ``WriteBatch.put`` does (the caller passes the PUT
kind: this module imports nothing of ``kvstore``, which imports it), until it meets an item that
is not a 2-tuple of ``bytes`` within the size limits: it returns that item
(consumed from ``pairs``) for the caller to validate, or None at the end.
Pure-Python twin: ``kvstore.batch.put_pairs_py``.

Why: a 1000-row bulk write paid ~0.6 us a row for the ``put`` method calls,
on the commit's critical path (the caller builds its next batch only after
the previous one is durable).

``mutation_rows(groups)`` turns the committer's ``(seq, mutations)`` groups
into row tuples in storage order (key ascending, seq descending); twin:
``kvstore.batch.mutation_rows_py``. The comprehension and ``list.sort`` it
replaces cost ~0.45 us a row, again on every commit's critical path; here
the sort compares the keys' first 16 bytes as two integers.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport uint64_t
from cython_ext._keyref cimport KeyRef, key_less, key_ref_set
from cpython.dict cimport PyDict_SetItem
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE


def put_pairs(dict mutations, pairs, object put, Py_ssize_t max_key, Py_ssize_t max_value):
    """See the module docstring."""
    cdef object item, key, value
    cdef Py_ssize_t size
    for item in pairs:
        if not PyTuple_CheckExact(item) or PyTuple_GET_SIZE(item) != 2:
            return item
        key = <object>PyTuple_GET_ITEM(item, 0)
        value = <object>PyTuple_GET_ITEM(item, 1)
        if not PyBytes_CheckExact(key) or not PyBytes_CheckExact(value):
            return item
        size = PyBytes_GET_SIZE(key)
        if size == 0 or size > max_key or PyBytes_GET_SIZE(value) > max_value:
            return item
        PyDict_SetItem(mutations, key, (put, value, None))
    return None


# -- a commit's rows in storage order -------------------------------------------


cdef void _stable_sort(KeyRef* refs, KeyRef* spare, Py_ssize_t n) noexcept nogil:
    """Bottom-up merge sort, stable (ties keep their input order); the result
    ends in ``refs``. Width-1 runs are fine: n is a commit's rows."""
    cdef Py_ssize_t width = 1, lo, mid, hi, i, j, out
    cdef KeyRef* src = refs
    cdef KeyRef* dst = spare
    cdef KeyRef* tmp
    cdef bint sorted_already = True
    for i in range(1, n):
        if key_less(&refs[i], &refs[i - 1]):
            sorted_already = False
            break
    if sorted_already:
        return
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            i, j, out = lo, mid, lo
            while i < mid and j < hi:
                if key_less(&src[j], &src[i]):
                    dst[out] = src[j]
                    j += 1
                else:
                    dst[out] = src[i]
                    i += 1
                out += 1
            while i < mid:
                dst[out] = src[i]
                i += 1
                out += 1
            while j < hi:
                dst[out] = src[j]
                j += 1
                out += 1
            lo = hi
        tmp = src
        src = dst
        dst = tmp
        width *= 2
    if src != refs:
        for i in range(n):
            refs[i] = src[i]


def mutation_rows(list groups):
    """The rows of ``groups`` in storage order, or None if one is not plain.

    See ``kvstore.batch.mutation_rows_py`` (the spec). "Plain": every key is
    ``bytes`` and every mutation a 3-tuple; for anything else this returns
    None and the caller runs the twin, which raises the error naming it.
    """
    cdef Py_ssize_t n = 0, i = 0, g
    cdef object group, seq, mutations, key, mutation
    cdef tuple row
    for g in range(len(groups)):
        group = groups[g]
        if type(group) is not tuple or PyTuple_GET_SIZE(group) != 2 or type(<object>PyTuple_GET_ITEM(group, 1)) is not dict:
            return None
        n += len(<dict>PyTuple_GET_ITEM(group, 1))
    cdef KeyRef* refs = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef KeyRef* spare = <KeyRef*>PyMem_Malloc((n if n else 1) * sizeof(KeyRef))
    cdef list rows = PyList_New(n)  # filled below; a None slot would never be read
    if refs == NULL or spare == NULL:
        PyMem_Free(refs)
        PyMem_Free(spare)
        raise MemoryError()
    try:
        for g in range(len(groups)):
            group = groups[g]
            seq = <object>PyTuple_GET_ITEM(group, 0)
            mutations = <object>PyTuple_GET_ITEM(group, 1)
            for key, mutation in (<dict>mutations).items():
                if type(key) is not bytes or type(mutation) is not tuple or PyTuple_GET_SIZE(mutation) != 3 or i >= n:
                    for g in range(i):
                        Py_XDECREF(refs[g].obj)  # the list's slots are still empty (NULL)
                    return None
                row = (key, seq, <object>PyTuple_GET_ITEM(mutation, 0), <object>PyTuple_GET_ITEM(mutation, 1),
                       <object>PyTuple_GET_ITEM(mutation, 2))
                Py_INCREF(row)  # owned by refs until it is placed in the list
                key_ref_set(&refs[i], <PyObject*>row, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
                i += 1
        if i != n:  # the dicts changed size meanwhile: let the twin build them
            for g in range(i):
                Py_XDECREF(refs[g].obj)
            return None
        # With the GIL held: it takes microseconds, and releasing it would let a
        # busy thread (a flush) keep it for a switch interval (5 ms).
        _stable_sort(refs, spare, n)
        for g in range(n):
            PyList_SET_ITEM(rows, g, <object>refs[g].obj)  # steals the reference taken above
        return rows
    finally:
        PyMem_Free(refs)
        PyMem_Free(spare)
