# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The point-get path in C: memtable probe, bloom filter, block index, binary
search inside an SST block's Arrow buffers, and visibility.

Pure-Python twins (the spec; the tests run both on the same random stores):
``kvstore.format.block_view.PyBlockView`` for :class:`BlockView`,
``SSTReader.get`` for :meth:`SSTProbe.get`, and ``kvstore.reader.get_row_py``
/ ``visible_value`` for :func:`get_row` / :func:`get_value`.
``kvstore.format.block_view`` and ``kvstore.reader`` pick one at import time.

Why this shape (measurements: benchmarks/results/PROFILE.md, "Engine-speed pass";
rerun with benchmarks/pointget_bench.py):

* A cached block is the Arrow record batch exactly as read from the file
  (zero-copy over the bytes the CRC was checked on), plus the addresses of
  its buffers. A get binary-searches the key offsets with ``memcmp`` and
  builds one ``bytes`` for the value: no Python row tuple, no key list, so
  the cache can charge a block its size on disk and a 64 MiB cache holds a
  ~60 MiB data set instead of a fifth of it.
* The whole lookup is one call from Python: the memtable (a dict probe), each
  L0 file and the one file of each sorted run whose range holds the key
  (range check, bloom filter with the same XXH64 kernel the writer used, the
  block index by ``memcmp`` bisection, then the block). The Python path made
  ~60 calls per get and validated the key at every layer; here the caller
  validates it once.
* The key's bloom hash is computed once per get and reused for every file,
  because all files use the same hash (XXH64, seed 0) and differ only in
  ``num_bits``/``num_hashes``.

Thread-safety: a :class:`BlockView` and an :class:`SSTProbe` are immutable
after construction; the block cache lookup they call has its own lock.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.weakref cimport PyWeakref_GetObject
from libc.stdint cimport int32_t, int64_t, uint64_t, uint8_t, uintptr_t
from libc.string cimport memcmp

from cython_ext._bloom cimport _xxh64
from cython_ext._lru cimport CacheEntry, LruCore

import sys
import time
import weakref

if sys.byteorder != "little":  # Arrow buffers are read in host order
    raise ImportError("cython_ext._pointget supports little-endian hosts only")

# Mirrors kvstore.format.rows (stored on disk: never renumber); a test checks
# that they agree. Not imported from there: cython_ext does not depend on kvstore.
cdef enum:
    _PUT = 1
    # BlockView.find results besides a row index:
    _NOT_HERE = -1      # the key has no visible version in this block or later ones
    _NEXT_BLOCK = -2    # the key's versions run on past the block's end: try the next block

PUT = _PUT
NOT_HERE = _NOT_HERE
NEXT_BLOCK = _NEXT_BLOCK


cdef int64_t _clock_ms() except? -1:
    """Milliseconds since the epoch, as ``kvstore.reader.now_ms`` computes them."""
    return <int64_t>(time.time() * 1000)


cdef inline int _cmp_bytes(object a, const uint8_t* b, Py_ssize_t blen) noexcept:
    """Compare the ``bytes`` object ``a`` with ``b[:blen]``."""
    return _cmp(<const uint8_t*>PyBytes_AS_STRING(a), PyBytes_GET_SIZE(a), b, blen)


cdef inline const uint8_t* _address(object buf) except? NULL:
    if buf is None:
        return NULL
    return <const uint8_t*><uintptr_t>buf.address


cdef inline uint64_t _head(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """The first 8 bytes of ``p[:n]`` as a big-endian integer, zero-padded:
    heads order like the byte strings they start (equal heads: compare the rest)."""
    cdef uint64_t h = 0
    cdef Py_ssize_t i
    for i in range(8):
        h = (h << 8) | (p[i] if i < n else 0)
    return h


cdef inline bint _valid(const uint8_t* bitmap, Py_ssize_t bit) noexcept nogil:
    return bitmap == NULL or (bitmap[bit >> 3] >> (bit & 7)) & 1


cdef class BlockView:
    """One SST data block in its compact form: the Arrow batch as read.

    Args:
        batch: a ROW_SCHEMA record batch that passed ``validate(full=True)``
            (offsets inside their data buffers); the view keeps it alive and
            reads its buffers in place.
        nbytes: the bytes the batch's buffers occupy (what the cache charges).

    Raises:
        ValueError: a non-nullable column (key, seq, kind) holds nulls.
    """

    # Attributes: see _pointget.pxd (cython_ext._scan reads the buffers too).

    def __cinit__(self, batch, Py_ssize_t nbytes):
        keys, seqs, kinds, values, expires = batch.columns
        if keys.null_count or seqs.null_count or kinds.null_count:
            raise ValueError("key, seq and kind columns must not hold nulls")
        self.batch = batch
        self.num_rows = batch.num_rows
        self.nbytes = nbytes
        cdef Py_ssize_t offset = keys.offset
        buffers = keys.buffers()
        self._key_offsets = (<const int32_t*>_address(buffers[1])) + offset
        self._key_data = _address(buffers[2])
        offset = seqs.offset
        self._seqs = (<const uint64_t*>_address(seqs.buffers()[1])) + offset
        offset = kinds.offset
        self._kinds = _address(kinds.buffers()[1]) + offset
        offset = values.offset
        buffers = values.buffers()
        self._value_valid = _address(buffers[0]) if values.null_count else NULL
        self._value_bit0 = offset
        self._value_offsets = (<const int32_t*>_address(buffers[1])) + offset
        self._value_data = _address(buffers[2])
        offset = expires.offset
        buffers = expires.buffers()
        self._expire_valid = _address(buffers[0]) if expires.null_count else NULL
        self._expire_bit0 = offset
        # An all-null int64 column may come without a data buffer.
        self._expires = NULL
        if buffers[1] is not None:
            self._expires = (<const int64_t*>_address(buffers[1])) + offset
        self._build_heads()

    def __dealloc__(self):
        PyMem_Free(self._heads)

    cdef int _build_heads(self) except -1:
        """The key-head index that :meth:`_lower_bound` searches first.

        Why: a binary search over the key column touches, per step, an offset
        and a key in the data buffer (two cache misses in a block seen for
        the first time) and calls ``memcmp``. Keys in a block share a long
        prefix (the harness's 16-byte keys share 13 bytes in a 465-row
        block), so the 8 bytes after the shared prefix order the keys almost
        always by themselves: one array of integers, compared inline.
        """
        cdef Py_ssize_t n = self.num_rows, i, j, start, klen, last_len, first_len
        if n == 0:
            return 0
        self._heads = <uint64_t*>PyMem_Malloc(n * sizeof(uint64_t))
        if self._heads == NULL:
            raise MemoryError()
        start = self._key_offsets[0]
        first_len = self._key_offsets[1] - start
        self._prefix = self._key_data + start
        # Keys are sorted, so the prefix all keys share is the first and last key's.
        cdef const uint8_t* last = self._key_data + self._key_offsets[n - 1]
        last_len = self._key_offsets[n] - self._key_offsets[n - 1]
        j = 0
        while j < first_len and j < last_len and self._prefix[j] == last[j]:
            j += 1
        self._lcp = j
        for i in range(n):
            start = self._key_offsets[i]
            klen = self._key_offsets[i + 1] - start
            self._heads[i] = _head(self._key_data + start + self._lcp, klen - self._lcp)
        return 0

    # -- C level -----------------------------------------------------------------

    cdef int _cmp_key(self, Py_ssize_t i, const uint8_t* k, Py_ssize_t klen) noexcept nogil:
        cdef int32_t start = self._key_offsets[i]
        return _cmp(self._key_data + start, self._key_offsets[i + 1] - start, k, klen)

    cdef Py_ssize_t _lower_bound(self, const uint8_t* k, Py_ssize_t klen, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        """``bisect_left`` over keys ``[lo, hi)``: on the key heads, then ``memcmp`` among equal heads."""
        cdef Py_ssize_t mid, m, stop = hi
        cdef int c
        cdef uint64_t h
        if lo >= hi:
            return lo
        # Every key of the block starts with the prefix: a key that differs
        # from it within its first ``_lcp`` bytes sorts before or after all of them.
        m = klen if klen < self._lcp else self._lcp
        c = memcmp(k, self._prefix, m) if m > 0 else 0
        if c < 0 or (c == 0 and klen < self._lcp):
            return lo
        if c > 0:
            return hi
        h = _head(k + self._lcp, klen - self._lcp)
        while lo < hi:  # first head >= h
            mid = (lo + hi) >> 1
            if self._heads[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        # Then ``[lo, hi)`` is the run of heads equal to h (usually one row or
        # none): only there do the rest of the bytes decide.
        hi = stop
        m = lo
        while m < hi:  # first head > h
            mid = (m + hi) >> 1
            if self._heads[mid] <= h:
                m = mid + 1
            else:
                hi = mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._cmp_key(mid, k, klen) < 0:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef Py_ssize_t _find(self, const uint8_t* k, Py_ssize_t klen, uint64_t snapshot_seq) noexcept nogil:
        cdef Py_ssize_t n = self.num_rows
        cdef Py_ssize_t i = self._lower_bound(k, klen, 0, n)
        while i < n and self._cmp_key(i, k, klen) == 0:
            if self._seqs[i] <= snapshot_seq:
                return i
            i += 1
        return _NOT_HERE if i < n else _NEXT_BLOCK

    cdef bytes _key(self, Py_ssize_t i):
        cdef int32_t start = self._key_offsets[i]
        return PyBytes_FromStringAndSize(<const char*>self._key_data + start, self._key_offsets[i + 1] - start)

    cdef object _value(self, Py_ssize_t i):
        if not _valid(self._value_valid, self._value_bit0 + i):
            return None
        cdef int32_t start = self._value_offsets[i]
        return PyBytes_FromStringAndSize(<const char*>self._value_data + start, self._value_offsets[i + 1] - start)

    cdef object _expire(self, Py_ssize_t i):
        if self._expires == NULL or not _valid(self._expire_valid, self._expire_bit0 + i):
            return None
        return self._expires[i]

    cdef tuple _row(self, Py_ssize_t i):
        return (self._key(i), self._seqs[i], self._kinds[i], self._value(i), self._expire(i))

    cdef object _visible_value(self, Py_ssize_t i, object now_ms):
        """The value row ``i`` shows a reader at ``now_ms`` (None: the clock, read
        only if the row can expire): None for a delete or an expired row."""
        if self._kinds[i] != _PUT:
            return None
        if self._expires != NULL and _valid(self._expire_valid, self._expire_bit0 + i):
            if self._expires[i] <= (_clock_ms() if now_ms is None else <int64_t>now_ms):
                return None
        return self._value(i)

    # -- Python level (the twin's interface) -------------------------------------

    def find(self, bytes key, uint64_t snapshot_seq):
        """Index of ``key``'s newest row with ``seq <= snapshot_seq``, else
        :data:`NOT_HERE` or :data:`NEXT_BLOCK`."""
        return self._find(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), snapshot_seq)

    def lower_bound(self, bytes key, Py_ssize_t lo=0, hi=None):
        """First index in ``[lo, hi)`` whose key is ``>= key`` (``bisect_left``)."""
        cdef Py_ssize_t stop = self.num_rows if hi is None else hi
        if lo < 0 or stop > self.num_rows or lo > stop:
            raise IndexError(f"bad range [{lo}, {stop}) for a block of {self.num_rows} rows")
        return self._lower_bound(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), lo, stop)

    def key_at(self, Py_ssize_t i):
        """The key of row ``i``."""
        self._check_index(i)
        return self._key(i)

    def row(self, Py_ssize_t i):
        """Row ``i`` as a ``(key, seq, kind, value, expire_at_ms)`` tuple."""
        self._check_index(i)
        return self._row(i)

    def rows(self, Py_ssize_t lo, Py_ssize_t hi, snapshot_seq=None):
        """Rows ``[lo, hi)`` as tuples, optionally only those with ``seq <= snapshot_seq``."""
        if lo < 0 or hi > self.num_rows or lo > hi:
            raise IndexError(f"bad range [{lo}, {hi}) for a block of {self.num_rows} rows")
        cdef uint64_t limit = 0xFFFFFFFFFFFFFFFF if snapshot_seq is None else snapshot_seq
        cdef list out = []
        cdef Py_ssize_t i
        for i in range(lo, hi):
            if self._seqs[i] <= limit:
                out.append(self._row(i))
        return out

    def visible_value(self, Py_ssize_t i, int64_t now_ms):
        """What a reader at ``now_ms`` sees in row ``i``: its value, or None (delete, expired)."""
        self._check_index(i)
        return self._visible_value(i, now_ms)

    cdef int _check_index(self, Py_ssize_t i) except -1:
        if not 0 <= i < self.num_rows:
            raise IndexError(f"row {i} out of range for a block of {self.num_rows} rows")
        return 0


cdef uint64_t* _tuple_heads(tuple keys, Py_ssize_t* lcp) except? NULL:
    """Key heads of a sorted tuple of ``bytes`` (NULL if empty), and the
    length of the prefix they all share in ``lcp``: the same index as
    ``BlockView._build_heads``, for the block index in a file's footer."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(keys), i, j = 0
    lcp[0] = 0
    if n == 0:
        return NULL
    cdef bytes first = <bytes?>PyTuple_GET_ITEM(keys, 0)
    cdef bytes last = <bytes?>PyTuple_GET_ITEM(keys, n - 1)
    cdef const uint8_t* a = <const uint8_t*>PyBytes_AS_STRING(first)
    cdef const uint8_t* b = <const uint8_t*>PyBytes_AS_STRING(last)
    while j < PyBytes_GET_SIZE(first) and j < PyBytes_GET_SIZE(last) and a[j] == b[j]:
        j += 1
    lcp[0] = j
    cdef uint64_t* heads = <uint64_t*>PyMem_Malloc(n * sizeof(uint64_t))
    if heads == NULL:
        raise MemoryError()
    cdef bytes key
    for i in range(n):
        key = <bytes?>PyTuple_GET_ITEM(keys, i)
        if PyBytes_GET_SIZE(key) < j or memcmp(PyBytes_AS_STRING(key), a, j) != 0:
            PyMem_Free(heads)
            raise ValueError("block index keys are not sorted")
        heads[i] = _head(<const uint8_t*>PyBytes_AS_STRING(key) + j, PyBytes_GET_SIZE(key) - j)
    return heads


cdef Py_ssize_t _tuple_lower_bound(tuple keys, const uint64_t* heads, Py_ssize_t lcp,
                                   const uint8_t* k, Py_ssize_t klen) noexcept:
    """``bisect_left(keys, k)`` over a sorted tuple of ``bytes`` with its
    heads from :func:`_tuple_heads` (the search of ``BlockView._lower_bound``)."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(keys), lo = 0, hi = n, mid, m
    if n == 0:
        return 0
    cdef object first = <object>PyTuple_GET_ITEM(keys, 0)
    m = klen if klen < lcp else lcp
    cdef int c = memcmp(k, PyBytes_AS_STRING(first), m) if m > 0 else 0
    if c < 0 or (c == 0 and klen < lcp):
        return 0
    if c > 0:
        return n
    cdef uint64_t h = _head(k + lcp, klen - lcp)
    while lo < hi:  # first head >= h
        mid = (lo + hi) >> 1
        if heads[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    hi = n
    m = lo
    while m < hi:  # first head > h
        mid = (m + hi) >> 1
        if heads[mid] <= h:
            m = mid + 1
        else:
            hi = mid
    while lo < hi:  # equal heads: the rest of the bytes decide
        mid = (lo + hi) >> 1
        if _cmp_bytes(<object>PyTuple_GET_ITEM(keys, mid), k, klen) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


def tuple_lower_bound(tuple keys, bytes key):
    """``bisect_left(keys, key)`` through the head index (for the tests)."""
    cdef Py_ssize_t lcp = 0
    cdef uint64_t* heads = _tuple_heads(keys, &lcp)
    try:
        return _tuple_lower_bound(keys, heads, lcp, <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
    finally:
        PyMem_Free(heads)


cdef class SSTProbe:
    """The point-lookup part of one SST's metadata, in C-friendly form.

    Args:
        meta: the file's ``SSTMeta`` (key range, seq range, bloom filter, block index).
        cache: the block cache (its ``get`` is called with ``(url, path, block)``), or None.
        url, path: the cache key prefix of the file's blocks.
    """

    cdef readonly bytes min_key
    cdef readonly bytes max_key
    cdef uint64_t _min_seq
    cdef bytes _bloom_bits
    cdef uint64_t _num_bits
    cdef int _num_hashes
    cdef tuple _first_keys
    cdef tuple _last_keys
    cdef Py_ssize_t _blocks
    # Key heads of _last_keys (see BlockView._build_heads): the block-index
    # bisection compares integers in one array instead of chasing a bytes
    # object per step.
    cdef Py_ssize_t _last_lcp
    cdef uint64_t* _last_heads
    cdef object _cache_get
    # The compiled cache core (None for any other cache) and, per block, the
    # entry it last found for the block (None before): a hit revisits the
    # entry without building or hashing the key (see cython_ext/_lru.pyx).
    cdef LruCore _lru
    cdef list _handles
    cdef object _url
    cdef object _path

    def __cinit__(self, meta, cache, str url, str path):
        info = meta.info
        bloom = meta.bloom
        self.min_key = info.min_key
        self.max_key = info.max_key
        self._min_seq = info.min_seq
        self._bloom_bits = bloom.bits
        self._num_bits = bloom.num_bits
        self._num_hashes = bloom.num_hashes
        if self._num_bits == 0 or <uint64_t>len(self._bloom_bits) * 8 < self._num_bits:
            raise ValueError("bloom filter has fewer bits than num_bits")
        self._first_keys = tuple(meta.first_keys)
        self._last_keys = tuple(meta.last_keys)
        self._blocks = len(self._first_keys)
        if len(self._last_keys) != self._blocks:
            raise ValueError("first_keys and last_keys differ in length")
        self._last_heads = _tuple_heads(self._last_keys, &self._last_lcp)
        self._cache_get = None if cache is None else cache.get
        self._lru = cache if isinstance(cache, LruCore) else None
        self._handles = [None] * self._blocks
        self._url = url
        self._path = path

    def __dealloc__(self):
        PyMem_Free(self._last_heads)

    cdef bint _may_contain(self, const uint8_t* k, Py_ssize_t klen, uint64_t h) noexcept:
        if _cmp_bytes(self.min_key, k, klen) > 0 or _cmp_bytes(self.max_key, k, klen) < 0:
            return False
        cdef const uint8_t* bits = <const uint8_t*>PyBytes_AS_STRING(self._bloom_bits)
        cdef uint64_t h1 = h & 0xFFFFFFFFULL
        cdef uint64_t h2 = h >> 32
        cdef uint64_t b
        cdef int i
        for i in range(self._num_hashes):
            b = (h1 + <uint64_t>i * h2) % self._num_bits
            if not (bits[b >> 3] & (1 << (b & 7))):
                return False
        return True

    cdef object _cached(self, Py_ssize_t b):
        """Block ``b`` from the cache, or None."""
        cdef CacheEntry entry
        cdef object found
        if self._lru is not None:
            entry = <CacheEntry>PyList_GET_ITEM(self._handles, b)
            if entry is not None:
                found = self._lru.revisit(entry)
                if found is not None:
                    return found
            entry = self._lru.find((self._url, self._path, b))
            if entry is None:
                return None
            self._handles[b] = entry
            return entry.value
        if self._cache_get is None:
            return None
        return self._cache_get((self._url, self._path, b))

    cdef BlockView _get(self, object sst, const uint8_t* k, Py_ssize_t klen, uint64_t h, uint64_t snapshot_seq,
                        Py_ssize_t* index, bint bloom_first):
        """The block holding the key's newest visible row (its index in ``index``), or None.

        ``bloom_first``: probe the bloom filter before anything else (an L0
        file, which usually does not hold the key). Else (the one file of a
        sorted run whose range holds the key) probe it only before reading a
        block the cache does not hold: a cached block answers as fast as the
        filter's ~7 scattered bit reads, and a present key (the common case
        at the bottom of the tree) then pays for no filter at all.
        """
        if snapshot_seq < self._min_seq:
            return None
        cdef bint bloom_checked = bloom_first
        if bloom_first:
            if not self._may_contain(k, klen, h):
                return None
        elif _cmp_bytes(self.min_key, k, klen) > 0 or _cmp_bytes(self.max_key, k, klen) < 0:
            return None
        # First block whose last key is >= key (bisect_left over last_keys).
        cdef Py_ssize_t lo = _tuple_lower_bound(self._last_keys, self._last_heads, self._last_lcp, k, klen), i
        cdef object found
        cdef BlockView block
        while lo < self._blocks and _cmp_bytes(<object>PyTuple_GET_ITEM(self._first_keys, lo), k, klen) <= 0:
            found = self._cached(lo)
            if found is None:
                if not bloom_checked:
                    if not self._may_contain(k, klen, h):
                        return None
                    bloom_checked = True
                found = sst._load_block(lo)
            block = <BlockView?>found
            i = block._find(k, klen, snapshot_seq)
            if i >= 0:
                index[0] = i
                return block
            if i == _NOT_HERE:
                return None
            lo += 1  # the key's older versions continue in the next block
        return None

    def get(self, sst, bytes key, uint64_t snapshot_seq):
        """``SSTReader.get`` without argument checks: the row tuple, or None.

        ``sst`` is the reader that owns this probe (it loads missing blocks).
        """
        cdef Py_ssize_t klen = PyBytes_GET_SIZE(key)
        cdef const uint8_t* k = <const uint8_t*>PyBytes_AS_STRING(key)
        cdef Py_ssize_t index = 0
        cdef BlockView block = self._get(sst, k, klen, _xxh64(k, klen, 0), snapshot_seq, &index, True)
        return None if block is None else block._row(index)


cdef class _LayersIndex:
    """One ``Layers`` as the lookup reads it: its SST probes in tuples.

    Why: the lookup used to read ``layers.l0``, ``layers.runs``, ``run.ssts``
    and each file's ``_probe`` as Python attributes on every get (one per
    step of the bisection over a run's files). ``Layers`` is immutable, so
    the index is built once per ``Layers`` object (see :func:`_index_of` and
    ``StoreGetter``) and then read with tuple indexing only.
    """

    cdef object memtable
    cdef tuple l0            # SSTReaders, newest first
    cdef tuple l0_probes     # their SSTProbes
    cdef tuple run_ssts      # per sorted run, newest first: its SSTReaders in key order
    cdef tuple run_probes    # ... and their SSTProbes

    def __cinit__(self, layers):
        self.memtable = layers.memtable
        self.l0 = tuple(layers.l0)
        self.l0_probes = tuple([<SSTProbe?>sst._probe for sst in self.l0])
        ssts = [tuple(run.ssts) for run in layers.runs]
        self.run_ssts = tuple(ssts)
        self.run_probes = tuple([tuple([<SSTProbe?>sst._probe for sst in run]) for run in ssts])


# The index of the Layers the module-level get_row/get_value read last
# (snapshots and transactions read one Layers many times). Held through a
# weak reference to the Layers, and dropped with it: the index holds the
# files, and through them the block cache, which must not outlive the store.
cdef object _recent_layers = None   # weakref.ref to a Layers, or None
cdef _LayersIndex _recent_index = None


def _forget_recent(ref):
    global _recent_layers, _recent_index
    if ref is _recent_layers:
        _recent_layers = None
        _recent_index = None


cdef _LayersIndex _index_of(object layers):
    global _recent_layers, _recent_index
    cdef object ref = _recent_layers
    cdef _LayersIndex index = _recent_index
    if ref is not None and index is not None and PyWeakref_GetObject(ref) == <PyObject*>layers:
        return index
    index = _LayersIndex(layers)
    _recent_layers = None  # while both change, a concurrent reader sees no entry rather than a torn one
    _recent_index = index
    _recent_layers = weakref.ref(layers, _forget_recent)
    return index


cdef object _lookup(_LayersIndex layers, bytes key, uint64_t snapshot_seq, Py_ssize_t* index):
    """Newest row of ``key`` with ``seq <= snapshot_seq``: a memtable row tuple
    (``index`` set to -1), a :class:`BlockView` (``index`` = the row), or None."""
    cdef Py_ssize_t klen = PyBytes_GET_SIZE(key)
    cdef const uint8_t* k = <const uint8_t*>PyBytes_AS_STRING(key)
    cdef PyObject* versions = PyDict_GetItem(layers.memtable._rows, key)
    cdef Py_ssize_t i, n, r, lo, hi, mid
    cdef object row
    if versions != NULL:
        n = PyTuple_GET_SIZE(<object>versions)
        for i in range(n):
            row = <object>PyTuple_GET_ITEM(<object>versions, i)
            if <uint64_t>row[1] <= snapshot_seq:
                index[0] = -1
                return row
    cdef uint64_t h = _xxh64(k, klen, 0)
    cdef BlockView block
    cdef SSTProbe probe
    cdef tuple files = layers.l0_probes
    for i in range(PyTuple_GET_SIZE(files)):
        probe = <SSTProbe>PyTuple_GET_ITEM(files, i)
        block = probe._get(<object>PyTuple_GET_ITEM(layers.l0, i), k, klen, h, snapshot_seq, index, True)
        if block is not None:
            return block
    for r in range(PyTuple_GET_SIZE(layers.run_probes)):
        files = <tuple>PyTuple_GET_ITEM(layers.run_probes, r)
        # The one SST whose range can hold the key: first with max_key >= key.
        lo, hi = 0, PyTuple_GET_SIZE(files)
        while lo < hi:
            mid = (lo + hi) >> 1
            if _cmp_bytes((<SSTProbe>PyTuple_GET_ITEM(files, mid)).max_key, k, klen) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < PyTuple_GET_SIZE(files):
            probe = <SSTProbe>PyTuple_GET_ITEM(files, lo)
            block = probe._get(<object>PyTuple_GET_ITEM(<tuple>PyTuple_GET_ITEM(layers.run_ssts, r), lo),
                               k, klen, h, snapshot_seq, index, False)
            if block is not None:
                return block
    return None


def get_row(layers, bytes key, uint64_t snapshot_seq):
    """Newest row of ``key`` with ``seq <= snapshot_seq`` across ``layers``, or None.

    Requires: ``key`` already validated (non-empty, within the size limit).
    """
    cdef Py_ssize_t index = -1
    found = _lookup(_index_of(layers), key, snapshot_seq, &index)
    if found is None or index < 0:
        return found
    return (<BlockView>found)._row(index)


def get_value(layers, bytes key, uint64_t snapshot_seq, now_ms=None):
    """What a reader at ``snapshot_seq`` and ``now_ms`` sees for ``key``: the
    value, or None (no row, a delete, or an expired row). ``now_ms`` None:
    the wall clock, read only when the row found has an expiry.

    Requires: ``key`` already validated (non-empty, within the size limit).
    """
    cdef Py_ssize_t index = -1
    return _visible(_lookup(_index_of(layers), key, snapshot_seq, &index), index, now_ms)


cdef object _visible(object found, Py_ssize_t index, object now_ms):
    """What a reader sees in ``_lookup``'s result: the value, or None."""
    if found is None:
        return None
    if index >= 0:
        return (<BlockView>found)._visible_value(index, now_ms)
    row = <tuple>found
    if row[2] != _PUT:
        return None
    expire = row[4]
    if expire is not None and expire <= (_clock_ms() if now_ms is None else now_ms):
        return None
    return row[3]

cdef class StoreGetter:
    """``Store.get`` in one compiled call: the closed check, the key check,
    the read barrier, the handle's head and layers, and :func:`get_value`.

    A get through ``Store.get`` used to cost five Python-level calls around
    the compiled lookup (``_check_open``, ``check_key``, the ``last_seq``
    property, the state's attributes); at ~4 µs per get that was a tenth of it.
    The linearizable barrier (:meth:`set_barrier`) was three more (``sync``,
    the beacon's ``read``, the head's version), ~0.15 µs of a ~1.1 µs get.

    Args:
        state: the handle's ``EngineState`` (read: ``head``, then ``layers``).
        check_key: the Python key validator; called only for keys that are
            not a non-empty ``bytes`` of at most ``max_key_bytes`` (it
            converts ``bytearray``/``memoryview`` or raises the user-facing error).
        max_key_bytes: the key size limit.
        raise_closed: called (and expected to raise) once :attr:`closed` is set.

    Pure-Python twin: ``kvstore.reader.StoreGetterPy``.
    """

    cdef object _state
    cdef object _check_key
    cdef Py_ssize_t _max_key_bytes
    cdef object _raise_closed
    cdef bint _closed
    # The read barrier (set_barrier): None = no barrier; else called before
    # the lookup, unless the beacon shows no version newer than the head.
    cdef object _sync
    cdef Py_buffer _beacon_buffer
    cdef const uint64_t* _beacon
    # The index of the state's layers as last read, and those layers (held:
    # compared by identity, so they must not be freed and their address reused).
    cdef object _indexed_layers
    cdef _LayersIndex _index

    def __cinit__(self, state, check_key, Py_ssize_t max_key_bytes, raise_closed):
        self._state = state
        self._check_key = check_key
        self._max_key_bytes = max_key_bytes
        self._raise_closed = raise_closed
        self._closed = False
        self._sync = None
        self._beacon = NULL

    def __dealloc__(self):
        self._release_beacon()

    cdef void _release_beacon(self) noexcept:
        if self._beacon != NULL:
            self._beacon = NULL
            PyBuffer_Release(&self._beacon_buffer)

    @property
    def closed(self):
        return self._closed

    @closed.setter
    def closed(self, bint value):
        """Set by ``Store.close`` before the beacon's mapping is closed: a
        closed getter lets go of it (and never reads it again)."""
        self._closed = value
        if value:
            self._release_beacon()

    def set_barrier(self, beacon, sync):
        """Make :meth:`get` linearizable: call ``sync()`` first, unless
        ``beacon`` (a ``HeadBeacon``, or None: always call) shows no version
        newer than the head. ``sync`` None: no barrier.

        The beacon's mapping is read as an aligned little-endian 8-byte load,
        as ``HeadBeacon.read`` does; elsewhere ``sync`` is called every time.
        """
        self._release_beacon()
        self._sync = sync
        if sync is None or beacon is None or sys.byteorder != "little" or self._closed:
            return
        PyObject_GetBuffer(beacon.mapping, &self._beacon_buffer, PyBUF_SIMPLE)
        if self._beacon_buffer.len < 8 or (<uintptr_t>self._beacon_buffer.buf) % 8:
            PyBuffer_Release(&self._beacon_buffer)
            return
        self._beacon = <const uint64_t*>self._beacon_buffer.buf

    def get(self, key):
        """The value ``key`` has in the state's current view, or None."""
        return self._get(key, False)

    def get_synced(self, key):
        """:meth:`get` behind the barrier of :meth:`set_barrier` (none set: the same as :meth:`get`)."""
        return self._get(key, True)

    cdef object _get(self, object key, bint synced):
        if self._closed:
            self._raise_closed()
            raise RuntimeError("raise_closed returned")  # it must raise; never read a closed store
        if type(key) is not bytes or PyBytes_GET_SIZE(key) == 0 or PyBytes_GET_SIZE(key) > self._max_key_bytes:
            key = self._check_key(key)
            if self._closed:  # closed while Python code ran: the beacon may be gone
                self._raise_closed()
                raise RuntimeError("raise_closed returned")
        state = self._state
        cdef uint64_t head_version
        cdef const uint64_t* beacon
        if synced and self._sync is not None:
            head_version = <uint64_t>(<tuple?>state.head)[0]
            # Loaded after the last step that could run Python code (and so
            # let Store.close release the mapping): NULL once released.
            beacon = self._beacon
            if beacon == NULL or beacon[0] > head_version:
                self._sync()
        # Head before layers, as Store._view: apply_root installs a version's
        # rows before it moves the head, so layers read after the head hold
        # every row up to its seq (newer ones are filtered by seq).
        cdef uint64_t seq = <uint64_t>(<tuple?>state.head)[1]
        layers = state.layers
        cdef _LayersIndex layers_index = self._index
        if layers is not self._indexed_layers:
            layers_index = _LayersIndex(layers)
            self._index = layers_index
            self._indexed_layers = layers
        cdef Py_ssize_t index = -1
        return _visible(_lookup(layers_index, <bytes?>key, seq, &index), index, None)
