# cython: language_level=3
"""The block cache's LRU core (see _lru.pyx), for the point-get path, which
keeps an entry's handle and revisits it without hashing its key."""

from cpython.object cimport PyObject


cdef struct Link:
    # The recency ring: prev/next of an entry, or of the core's sentinel.
    Link* prev
    Link* next
    PyObject* entry  # the CacheEntry this link is part of (borrowed)


cdef class CacheEntry:
    # Hot fields first: a hit through a handle reads the link and the value.
    cdef Link link
    cdef object value  # None once the entry was evicted, replaced or cleared
    cdef object key
    cdef long long nbytes


cdef class LruCore:
    cdef dict _entries  # key -> CacheEntry
    cdef Link _ring     # sentinel: _ring.next is the least recently used entry, _ring.prev the most
    cdef object _lock
    cdef readonly long long capacity_bytes
    cdef long long _bytes
    cdef long long _hits
    cdef long long _misses
    cdef long long _evictions
    cdef long long _rejected

    cdef CacheEntry find(self, object key)
    cdef object revisit(self, CacheEntry entry)
    cdef int _drop(self, CacheEntry entry, list dropped) except -1
