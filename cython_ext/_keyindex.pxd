# cython: language_level=3
"""The key-head index the point get searches: sorted keys as 8-byte integers
in a static search tree (header only: cimported by ``_pointget``).

Every key of a sorted set starts with the prefix all of them share (``lcp``
bytes, the first and last key's common prefix); its *head* is the next 8
bytes, big-endian, zero-padded, so heads order like the keys they start
(equal heads: the rest of the bytes decide). When every key has the same
length and ends within its head (``key_len`` >= 0, e.g. 16-byte keys with a
13-byte shared prefix), equal heads mean equal keys and no key byte is read.

Why a tree, not a binary search over the heads: a point get on a large store
finds its block cold in the CPU caches, and a binary search over a block's
~450 heads touches ~6 cache lines before the last steps share one. The
heads (the tree's leaves) are grouped by 8, one 64-byte line each; each
level above holds the largest head of each group below, grouped by 8 again,
up to a root of at most 8. A search reads one line per level: 3 for a
~450-row block.

Layout of ``tree`` (one 64-byte aligned allocation): the root level first,
then each level below, the leaves last; each level padded to a multiple of
8 with ``UINT64_MAX``. Level sizes follow from ``n`` alone (``_levels``),
so the search reads no other metadata.
"""

from libc.stdint cimport int32_t, uint64_t, uint8_t
from libc.stdlib cimport free
from libc.string cimport memcpy

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

cdef enum:
    # Levels needed for 2**31 keys with 8 per group (ceil(31 / 3) = 11), plus one.
    _MAX_LEVELS = 12
    # Prefixes up to this long are copied into the index (the harness's 16-byte keys share 13 bytes).
    _INLINE_PREFIX = 16


cdef struct KeyIndex:
    uint64_t* heads          # the leaves: head of key i at heads[i]
    uint64_t* tree           # the whole allocation (root first), NULL when n == 0
    Py_ssize_t n
    int32_t lcp
    int32_t key_len          # every key's length when equal heads mean equal keys, else -1
    const uint8_t* prefix    # the shared prefix (lcp bytes): prefix_copy, or the first key's bytes
    uint8_t prefix_copy[_INLINE_PREFIX]  # a copy beside the other fields: no cold line for the prefix


cdef inline uint64_t head_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """The first 8 bytes of ``p[:n]`` as a big-endian integer, zero-padded."""
    cdef uint64_t h = 0
    cdef Py_ssize_t i
    for i in range(8):
        h = (h << 8) | (p[i] if i < n else 0)
    return h


cdef inline int _levels(Py_ssize_t n, Py_ssize_t* real, Py_ssize_t* offset) noexcept nogil:
    """How many levels a tree over ``n`` heads has (0 for n == 0); for each
    level (0 = leaves), its real entries and its offset in the allocation;
    ``offset[levels]`` is the allocation's length in heads."""
    cdef int levels = 0, l
    cdef Py_ssize_t r = n
    if n == 0:
        offset[0] = 0
        return 0
    while True:
        real[levels] = r
        levels += 1
        if r <= 8:
            break
        r = (r + 7) >> 3
    # Root first: level l starts after every level above it.
    cdef Py_ssize_t at = 0
    for l in range(levels - 1, -1, -1):
        offset[l] = at
        at += (real[l] + 7) & ~(<Py_ssize_t>7)
    offset[levels] = at
    return levels


cdef inline int index_alloc(KeyIndex* x, Py_ssize_t n, const uint8_t* first, Py_ssize_t first_len,
                            const uint8_t* last, Py_ssize_t last_len) except -1:
    """Prepare ``x`` for ``n`` sorted keys from ``first`` to ``last``: the
    shared prefix, and room for the heads (which the caller then writes to
    ``x.heads[0:n]``, before :func:`index_finish`). ``x`` must be zeroed."""
    cdef Py_ssize_t real[_MAX_LEVELS]
    cdef Py_ssize_t offset[_MAX_LEVELS + 1]
    cdef Py_ssize_t j = 0
    cdef void* memory = NULL
    x.n = n
    x.key_len = -1
    if n == 0:
        return 0
    while j < first_len and j < last_len and first[j] == last[j]:
        j += 1
    if j > 0x7FFFFFFF:
        raise ValueError("keys longer than 2 GiB")
    x.lcp = <int32_t>j
    if j <= _INLINE_PREFIX:
        memcpy(x.prefix_copy, first, j)
        x.prefix = x.prefix_copy
    else:
        x.prefix = first
    cdef int levels = _levels(n, real, offset)
    if posix_memalign(&memory, 64, offset[levels] * sizeof(uint64_t)) != 0:
        raise MemoryError()
    x.tree = <uint64_t*>memory
    x.heads = x.tree + offset[0]
    return 0


cdef inline void index_finish(KeyIndex* x) noexcept nogil:
    """Fill the levels above the heads (see the module docstring)."""
    cdef Py_ssize_t real[_MAX_LEVELS]
    cdef Py_ssize_t offset[_MAX_LEVELS + 1]
    cdef int levels = _levels(x.n, real, offset), l
    cdef Py_ssize_t i, size
    cdef uint64_t* level
    cdef uint64_t* below
    for l in range(levels):
        level = x.tree + offset[l]
        size = (real[l] + 7) & ~(<Py_ssize_t>7)
        if l > 0:
            below = x.tree + offset[l - 1]
            for i in range(real[l]):
                level[i] = below[i * 8 + 7]  # the group's largest head (padding counts as largest)
        for i in range(real[l], size):
            level[i] = 0xFFFFFFFFFFFFFFFFULL


cdef inline void index_free(KeyIndex* x) noexcept nogil:
    free(x.tree)
    x.tree = NULL
    x.heads = NULL


cdef inline Py_ssize_t index_first_head_at_least(const KeyIndex* x, uint64_t h) noexcept nogil:
    """First ``i`` with ``heads[i] >= h``, else ``n``: one line per level."""
    cdef Py_ssize_t real[_MAX_LEVELS]
    cdef Py_ssize_t offset[_MAX_LEVELS + 1]
    cdef int levels = _levels(x.n, real, offset), l, j
    cdef Py_ssize_t g = 0, c
    cdef const uint64_t* node
    for l in range(levels - 1, -1, -1):
        node = x.tree + offset[l] + g * 8
        c = 0
        for j in range(8):  # branch-free: how many heads of the group are below h
            c += node[j] < h
        g = g * 8 + c
        if g >= real[l]:  # every real entry is below h
            return x.n
    return g


cdef inline Py_ssize_t index_end_of_head(const KeyIndex* x, Py_ssize_t i, uint64_t h) noexcept nogil:
    """First ``j >= i`` with ``heads[j] > h``, else ``n`` (``heads[i:j]`` equal ``h``
    when ``heads[i] >= h``): a few steps forward, then a binary search."""
    cdef Py_ssize_t hi = x.n, stop = i + 8, mid
    while i < hi and i < stop:
        if x.heads[i] > h:
            return i
        i += 1
    while i < hi:
        mid = (i + hi) >> 1
        if x.heads[mid] <= h:
            i = mid + 1
        else:
            hi = mid
    return i


cdef inline int index_prefix_order(const KeyIndex* x, const uint8_t* k, Py_ssize_t klen) noexcept nogil:
    """Where ``k`` sorts against keys that all start with the prefix: -1 before
    them all, 1 after them all, 0 when ``k`` starts with the prefix too."""
    cdef Py_ssize_t m = klen if klen < x.lcp else x.lcp
    cdef Py_ssize_t i
    for i in range(m):  # prefixes are short: inline, no call
        if k[i] != x.prefix[i]:
            return -1 if k[i] < x.prefix[i] else 1
    return -1 if klen < x.lcp else 0
