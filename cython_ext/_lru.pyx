# cython: boundscheck=False, wraparound=False
"""The block cache's LRU core in C: a hit takes no lock, and a revisit through
a kept handle hashes nothing.

Pure-Python twin (the spec, same results): ``kvstore.cache.PyLruCore``;
``kvstore.cache`` picks one at import time and builds ``BlockCache`` on it.

Why: every point get looks up one block, and the Python cache spent more on
``with lock:`` and a method call per hit than the whole compiled search in the
block (on the 2-core benchmark machine, ~1 µs of a ~3 µs get). Here a hit is a
dict probe, an unlink and relink in the recency ring and two counter
increments, all C code that runs no Python code, so under the GIL no other
thread can run in between: the hit needs no lock, and the counters stay exact.
``put`` and ``clear`` still take a lock, because dropping an evicted value may
run arbitrary Python code (a finaliser), which may switch threads in the
middle of the byte accounting; they drop values only after the accounting.
Keys must be hashed and compared in C (tuples of ``str``/``int``/``bytes``,
as the SST reader uses); a key type with Python-level ``__hash__``/``__eq__``
would reintroduce thread switches into ``get``.

Handles (:meth:`LruCore.find`, :meth:`LruCore.revisit`, C level only): the
point get (``cython_ext._pointget``) keeps each block's :class:`CacheEntry`
and revisits it directly. A dict probe on a ``(url, path, block)`` key hashed
the tuple twice (``OrderedDict.move_to_end`` hashes again) and read about ten
cold cache lines of a large dict; a revisit reads the entry and its two
neighbours in the ring. An entry that left the cache has no value, so a stale
handle is a miss, never a wrong block.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

import threading


cdef inline void _unlink(Link* link) noexcept nogil:
    link.prev.next = link.next
    link.next.prev = link.prev


cdef inline void _append(Link* ring, Link* link) noexcept nogil:
    """Make ``link`` the most recently used (just before the sentinel)."""
    link.prev = ring.prev
    link.next = ring
    ring.prev.next = link
    ring.prev = link


cdef class CacheEntry:
    """One cached value with its key and charge (handles: see the module docstring)."""

    def __cinit__(self):
        self.link.entry = <PyObject*>self


cdef class LruCore:
    """Least-recently-used map whose entries are charged a caller-given size.

    Args:
        capacity_bytes: the budget (>= 0; 0 caches nothing).

    Raises:
        TypeError: ``capacity_bytes`` is not an int.
        ValueError: ``capacity_bytes`` is negative.
    """

    def __cinit__(self, *args, **kwargs):
        self._entries = {}
        self._ring.prev = &self._ring
        self._ring.next = &self._ring
        self._ring.entry = NULL

    def __init__(self, capacity_bytes):
        if not isinstance(capacity_bytes, int) or isinstance(capacity_bytes, bool):
            raise TypeError(f"capacity_bytes must be int, not {type(capacity_bytes).__name__}")
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._lock = threading.Lock()

    cdef CacheEntry find(self, object key):
        """:meth:`get`, returning the entry (a handle for :meth:`revisit`) or None."""
        cdef PyObject* found = PyDict_GetItem(self._entries, key)
        if found == NULL:
            self._misses += 1
            return None
        cdef CacheEntry entry = <CacheEntry>found
        _unlink(&entry.link)
        _append(&self._ring, &entry.link)
        self._hits += 1
        return entry

    cdef object revisit(self, CacheEntry entry):
        """The value of ``entry`` (from :meth:`find` of this core), counted and
        marked most recently used as :meth:`get` does; None, and nothing
        counted, if it has left the cache since (then :meth:`find` its key)."""
        if entry.value is None:
            return None
        _unlink(&entry.link)
        _append(&self._ring, &entry.link)
        self._hits += 1
        return entry.value

    def get(self, key):
        """Return the value cached under ``key`` (marking it most recently used), or None."""
        cdef CacheEntry entry = self.find(key)
        return None if entry is None else entry.value

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
        cdef CacheEntry entry
        # Values (and entries) dropped here are released after the lock, outside the accounting.
        cdef list dropped = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._drop(<CacheEntry>old, dropped)
            if size > self.capacity_bytes:
                self._rejected += 1
                return
            entry = CacheEntry()
            entry.key = key
            entry.value = value
            entry.nbytes = size
            self._entries[key] = entry
            _append(&self._ring, &entry.link)
            self._bytes += size
            while self._bytes > self.capacity_bytes:
                entry = <CacheEntry>self._ring.next.entry
                del self._entries[entry.key]
                self._drop(entry, dropped)
                self._evictions += 1

    cdef int _drop(self, CacheEntry entry, list dropped) except -1:
        """Take ``entry`` (already out of the dict) out of the ring and the
        accounting; its value goes to ``dropped`` to be released later."""
        _unlink(&entry.link)
        self._bytes -= entry.nbytes
        dropped.append(entry.value)
        dropped.append(entry)
        entry.value = None  # a kept handle now reads as a miss
        return 0

    def clear(self):
        """Drop every entry; the counters keep running."""
        cdef list dropped = []
        with self._lock:
            for entry in self._entries.values():
                self._drop(<CacheEntry>entry, dropped)
            self._entries.clear()
            self._bytes = 0
        del dropped

    def __len__(self):
        return len(self._entries)

    def counters(self):
        """``(hits, misses, evictions, rejected, entries, bytes, capacity_bytes)``, taken together."""
        with self._lock:
            return (self._hits, self._misses, self._evictions, self._rejected, len(self._entries), self._bytes,
                    self.capacity_bytes)
