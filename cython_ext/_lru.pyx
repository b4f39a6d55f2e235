# cython: boundscheck=False, wraparound=False
"""The block cache's LRU core in C: a hit takes no lock.

Pure-Python twin (the spec, same results): ``kvstore.cache.PyLruCore``;
``kvstore.cache`` picks one at import time and builds ``BlockCache`` on it.

Why: every point get looks up one block, and the Python cache spent more on
``with lock:`` and a method call per hit than the whole compiled search in the
block (on the 2-core benchmark machine, ~1 µs of a ~3 µs get). Here a hit is a
dict probe, ``move_to_end`` and two counter increments, all C calls that run no
Python code, so under the GIL no other thread can run in between: the hit
needs no lock, and the counters stay exact. ``put`` and ``clear`` still take
a lock, because dropping an evicted value may run arbitrary Python code
(a finaliser), which may switch threads in the middle of the byte accounting.
Keys must be hashed and compared in C (tuples of ``str``/``int``/``bytes``,
as the SST reader uses); a key type with Python-level ``__hash__``/``__eq__``
would reintroduce thread switches into ``get``.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

import threading
from collections import OrderedDict


cdef class LruCore:
    """Least-recently-used map whose entries are charged a caller-given size.

    Args:
        capacity_bytes: the budget (>= 0; 0 caches nothing).

    Raises:
        TypeError: ``capacity_bytes`` is not an int.
        ValueError: ``capacity_bytes`` is negative.
    """

    cdef object _entries  # OrderedDict: key -> (value, nbytes); most recent last
    cdef object _move_to_end
    cdef object _lock
    cdef readonly long long capacity_bytes
    cdef long long _bytes
    cdef long long _hits
    cdef long long _misses
    cdef long long _evictions
    cdef long long _rejected

    def __init__(self, capacity_bytes):
        if not isinstance(capacity_bytes, int) or isinstance(capacity_bytes, bool):
            raise TypeError(f"capacity_bytes must be int, not {type(capacity_bytes).__name__}")
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._entries = OrderedDict()
        self._move_to_end = self._entries.move_to_end
        self._lock = threading.Lock()

    def get(self, key):
        """Return the value cached under ``key`` (marking it most recently used), or None."""
        cdef PyObject* entry = PyDict_GetItem(self._entries, key)
        if entry == NULL:
            self._misses += 1
            return None
        self._move_to_end(key)
        self._hits += 1
        return (<tuple>entry)[0]

    def put(self, key, value, nbytes):
        """Cache ``value`` under ``key``, charged ``nbytes``; replaces an existing entry.

        An entry larger than the whole budget is not cached.

        Raises:
            TypeError: ``nbytes`` is not an int.
            ValueError: ``nbytes`` is negative or ``value`` is None (None means "missing").
        """
        if not isinstance(nbytes, int) or isinstance(nbytes, bool):
            raise TypeError(f"nbytes must be int, not {type(nbytes).__name__}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if value is None:
            raise ValueError("value must not be None: get() returns None for a missing key")
        cdef long long size = nbytes
        # Values dropped here are released after the lock, outside the accounting.
        cdef list dropped = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= <long long>(<tuple>old)[1]
                dropped.append(old)
            if size > self.capacity_bytes:
                self._rejected += 1
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.capacity_bytes:
                _key, evicted = self._entries.popitem(last=False)
                self._bytes -= <long long>(<tuple>evicted)[1]
                self._evictions += 1
                dropped.append(evicted)

    def clear(self):
        """Drop every entry; the counters keep running."""
        with self._lock:
            entries = self._entries.copy()
            self._entries.clear()
            self._bytes = 0
        del entries

    def __len__(self):
        return len(self._entries)

    def counters(self):
        """``(hits, misses, evictions, rejected, entries, bytes, capacity_bytes)``, taken together."""
        with self._lock:
            return (self._hits, self._misses, self._evictions, self._rejected, len(self._entries), self._bytes,
                    self.capacity_bytes)
