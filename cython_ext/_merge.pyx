# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""K-way merge of sorted row sources with snapshot visibility and retention.

The hot loop of every scan and compaction. Its pure-Python twin, and the
spec, is ``kvstore.iterators.merge_ref`` (same rows for the same arguments;
the tests run both); ``kvstore.iterators.merge`` picks one and documents the
contract. Design, and why (numbers from benchmarks/merge_bench.py):

* Each source is a C struct (``_Source``, _merge.pxd): its iterator or list
  (lists are indexed directly), the current row, and that row's key as
  pointer, length and first 16 bytes as two integers. Comparing two sources
  touches no Python object, and usually not even the key bytes.
* The next row comes from a **loser tree**: each internal node keeps the loser
  of its match, so replacing the winner replays one leaf-to-root path,
  ``ceil(log2 k)`` comparisons: 3 at k = 8, where a binary heap's sift-down
  needs up to 6 and the linear scan of leveldb's ``merger.cc`` needs 7. With
  overlapping key ranges a source rarely wins twice in a row, so that price is
  paid on nearly every row. Measured at k = 8 against the same loop with a
  linear scan: 49 vs 67 ns/row with the rows in cache, 91 vs 100 out of it.
* Cache misses, not comparisons, bound the merge: a row whose tuple, key and
  seq objects are not in cache costs more than the rest of the loop. So list
  sources are prefetched 4-8 rows ahead, iterator sources along their
  allocation stride (``_stride_prefetch``), and the seq object (pyarrow
  scatters them) is prefetched when its row arrives but read only when the row
  leaves the tree, or when two heads have equal keys. That took the benchmark
  from ~7M to ~11M rows/s on iterator sources.
* Hence a row newer than the snapshot is dropped as it leaves the tree, before
  the per-key logic sees it. That is filtering each source first in effect:
  such a row neither shadows an older visible version nor counts as its key's
  first row, and no source is read further than filtering first would.
* Bounds apply as a row arrives: rows before the near bound are skipped, and
  the first row past the far bound ends its source (sorted: nothing after it
  can be in range).
* Visibility and retention are a pass over the merged stream that only asks
  "same key as the previous row?", as leveldb's ``db_iter.cc`` sits on top of
  ``merger.cc``.

The rows yielded are the sources' own tuples. The iterator is not thread-safe;
re-entering ``next()`` from a source raises ``ValueError`` and, after an error,
the iterator is exhausted, as with a generator. Sources are held through raw
pointers the cyclic GC cannot see: a source referring back to its own merge
iterator keeps both alive.
"""

cimport cython
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdint cimport int64_t, uint64_t

import time
from collections.abc import Sequence

# Mirrors kvstore.format.rows (stored on disk: never renumber); a test checks
# that they agree. Not imported from there: cython_ext does not depend on kvstore.
PUT = 1
DELETE = 2
MAX_SEQ = 2**64 - 1
cdef PyObject* _PUT_OBJ = <PyObject*>PUT  # kept alive by the module's globals
cdef PyObject* _DELETE_OBJ = <PyObject*>DELETE


@cython.final  # no subclasses: method calls are direct and can be inlined
cdef class _MergeIterator:
    """Iterator returned by :func:`merge_rows`; build it only through that function."""

    cdef _Source* sources       # n_leaves entries; those past the real sources stay exhausted
    cdef int* tree              # [0]: overall winner; [1:n_leaves]: loser of each internal node
    cdef int n_leaves           # a power of two >= the number of sources
    cdef bint started, done, in_next, in_source
    cdef bint reverse, compaction, last_run
    cdef uint64_t snapshot_seq, floor_seq
    cdef int64_t now_ms
    cdef bytes near_key, far_key  # start/end in merge direction (None: unbounded), kept
    cdef _Bound near, far         # alive for these views of them
    cdef uint64_t done_word     # w0 and w1 of an exhausted source: last in the merge direction
    cdef PyObject* held         # owned: the row being decided, released by _close on error
    cdef PyObject* last_key     # owned: key bytes of the previous row kept by the snapshot
    cdef const unsigned char* last_ptr
    cdef Py_ssize_t last_len
    cdef uint64_t last_w0, last_w1, last_seq
    cdef bint boundary_done     # compaction: this key's boundary version was seen

    def __cinit__(self):
        self.done = True  # a bare instance is an empty iterator

    def __dealloc__(self):
        self._close()
        PyMem_Free(self.sources)
        PyMem_Free(self.tree)

    cdef _setup(self, list iterables, lo, hi, bint reverse, bint compaction, uint64_t snapshot_seq,
                uint64_t floor_seq, bint last_run, int64_t now_ms):
        cdef Py_ssize_t i, n = len(iterables)
        self.n_leaves = 1
        while self.n_leaves < n:
            self.n_leaves *= 2
        self.sources = <_Source*>PyMem_Calloc(self.n_leaves, sizeof(_Source))
        self.tree = <int*>PyMem_Calloc(2 * self.n_leaves, sizeof(int))
        if self.sources == NULL or self.tree == NULL:
            raise MemoryError()
        for i in range(n):
            if type(iterables[i]) is list:
                self.sources[i].rows = <PyObject*>iterables[i]
                _incref(self.sources[i].rows)
            else:
                self.sources[i].iterator = <PyObject*>iterables[i]
                _incref(self.sources[i].iterator)
        self.reverse, self.compaction, self.last_run = reverse, compaction, last_run
        self.snapshot_seq, self.floor_seq, self.now_ms = snapshot_seq, floor_seq, now_ms
        self.near_key, self.far_key = (hi, lo) if reverse else (lo, hi)
        _set_bound(&self.near, <PyObject*>self.near_key)
        _set_bound(&self.far, <PyObject*>self.far_key)
        # So _replay's fast path ranks exhausted sources last without a NULL
        # check; a real key with the same 16 bytes goes to _before, which checks.
        self.done_word = 0 if reverse else 0xFFFFFFFFFFFFFFFF
        for i in range(self.n_leaves):
            self.sources[i].w0 = self.sources[i].w1 = self.done_word
        self.done = False
        if lo is not None and hi is not None and lo >= hi:
            self._close()  # an empty range: read nothing at all

    cdef void _close(self) noexcept:
        """Drop every reference held; the iterator is exhausted from now on."""
        cdef int i
        self.done = True
        if self.sources != NULL:
            for i in range(self.n_leaves):
                self._exhaust(&self.sources[i])
        _xdecref(self.held)
        _xdecref(self.last_key)
        self.held = NULL
        self.last_key = NULL

    cdef int _fill(self, _Source* s) except -1:
        """Load s's next row inside the bounds into s.row, or leave it NULL at the end.

        Requires: s.row is NULL (the caller took the previous row).
        """
        cdef PyObject* row
        cdef PyObject* ahead
        cdef PyObject* key
        cdef const unsigned char* kp
        cdef Py_ssize_t kl
        while True:
            if s.rows != NULL:
                if s.pos >= PyList_GET_SIZE(s.rows):
                    return self._exhaust(s)
                row = PyList_GET_ITEM(s.rows, s.pos)
                _incref(row)
                s.pos += 1
                # A list can be read ahead for free: fetch the tuple 8 rows
                # on, and the key and seq of the one 4 rows on (its tuple was
                # fetched 4 rows ago, so reading its items does not stall).
                if s.pos + 7 < PyList_GET_SIZE(s.rows):
                    _prefetch(PyList_GET_ITEM(s.rows, s.pos + 7))
                if s.pos + 3 < PyList_GET_SIZE(s.rows):
                    ahead = PyList_GET_ITEM(s.rows, s.pos + 3)
                    if PyTuple_Check(ahead) and PyTuple_GET_SIZE(ahead) == 5:
                        _prefetch(PyTuple_GET_ITEM(ahead, 0))
                        _prefetch(PyTuple_GET_ITEM(ahead, 1))
            else:
                self.in_source = True  # a source calling back into next() is refused
                row = PyIter_Next(s.iterator) if s.iterator != NULL else NULL
                self.in_source = False
                if row == NULL:
                    return -1 if PyErr_Occurred() != NULL else self._exhaust(s)
            s.row = row  # owned by s from here: _close releases it if we raise
            if not PyTuple_Check(row) or PyTuple_GET_SIZE(row) != 5:
                raise TypeError("rows must be (key, seq, kind, value, expire_at_ms) tuples")
            key = PyTuple_GET_ITEM(row, 0)
            if not PyBytes_Check(key):
                raise TypeError("row keys must be bytes")
            if s.iterator != NULL:
                _stride_prefetch(<const char*>row, s.prev_row)
                _stride_prefetch(<const char*>key, s.prev_key)
                s.prev_row, s.prev_key = <const char*>row, <const char*>key
            _prefetch(PyTuple_GET_ITEM(row, 1))  # the seq: read when the row leaves the tree
            kp = <const unsigned char*>PyBytes_AS_STRING(key)
            kl = PyBytes_GET_SIZE(key)
            s.key, s.key_len, s.seq_ready = kp, kl, False
            s.w0, s.w1 = _word(kp, kl), _word(kp + 8, kl - 8)
            # Forward, a row below start is skipped and one at or past end
            # ends the source; in reverse, a row at or past end is skipped and
            # one below start ends it. (It is sorted: nothing after is in range.)
            if self.near_key is not None and (_cmp_bound(s, &self.near) < 0) != self.reverse:
                s.row = NULL
                _decref(row)
                continue
            if self.far_key is not None and (_cmp_bound(s, &self.far) < 0) == self.reverse:
                return self._exhaust(s)
            return 0

    cdef int _exhaust(self, _Source* s) noexcept:
        """Release s and its current row (if any: one past the far bound); s is exhausted."""
        _xdecref(s.row)
        s.row = NULL
        s.w0 = s.w1 = self.done_word
        _release(s)
        return 0

    cdef inline int _before(self, _Source* a, _Source* b) except -1:
        """1 if a's row comes out before b's: key (asc, or desc), then seq desc, then index."""
        cdef int c
        if a.row == NULL or b.row == NULL:
            return b.row == NULL and a.row != NULL  # exhausted sources sort last
        c = _keycmp(a.w0, a.w1, a.key, a.key_len, b.w0, b.w1, b.key, b.key_len)
        if c != 0:
            return (c < 0) != self.reverse
        if not a.seq_ready:
            _load_seq(a)
        if not b.seq_ready:
            _load_seq(b)
        if a.seq != b.seq:
            return a.seq > b.seq  # the newest version of a key first, in both directions
        return a < b  # the sources are one array: address order is source-index order

    cdef int _replay(self, int winner) except -1:
        """Re-run the matches on winner's leaf-to-root path after its source advanced."""
        cdef int node = (winner + self.n_leaves) >> 1
        cdef int loser, swap, flip
        cdef int reverse = self.reverse
        cdef _Source* w
        cdef _Source* l
        while node > 0:
            loser = self.tree[node]
            l, w = &self.sources[loser], &self.sources[winner]
            # Which side wins is a coin toss when key ranges overlap, so the
            # common case (the first 16 key bytes differ) is decided with flag
            # arithmetic and applied with xor masks: no branch to mispredict
            # (measured ~8% faster per row than an if/else, rows in cache).
            if ((l.w0 ^ w.w0) | (l.w1 ^ w.w1)) == 0:
                swap = self._before(l, w)  # same first 16 bytes, or both exhausted
            else:
                swap = ((l.w0 < w.w0) | ((l.w0 == w.w0) & (l.w1 < w.w1))) ^ reverse
            flip = (winner ^ loser) & -swap
            self.tree[node] = loser ^ flip  # the loser of this match stays here
            winner ^= flip
            node >>= 1
        self.tree[0] = winner
        return 0

    cdef int _start(self) except -1:
        """Prime every source and build the loser tree bottom-up."""
        cdef int i, a, b, node, k = self.n_leaves
        cdef int* winner_of = self.tree + k  # the build's scratch: winner of each internal node
        for i in range(k):
            self._fill(&self.sources[i])
        for node in range(k - 1, 0, -1):
            a = winner_of[2 * node] if 2 * node < k else 2 * node - k  # children past k are leaves
            b = winner_of[2 * node + 1] if 2 * node + 1 < k else 2 * node + 1 - k
            if self._before(&self.sources[b], &self.sources[a]):
                a, b = b, a
            winner_of[node], self.tree[node] = a, b
        self.tree[0] = winner_of[1] if k > 1 else 0
        self.started = True
        return 0

    cdef int _hidden(self, PyObject* row) except -1:
        """1 if row is a tombstone or has expired at now_ms, else 0."""
        cdef PyObject* kind = PyTuple_GET_ITEM(row, 2)
        cdef PyObject* expire = PyTuple_GET_ITEM(row, 4)
        # CPython keeps one object per small int, so identity settles the kind
        # without a call, except for unusual int objects.
        if kind == _DELETE_OBJ or (kind != _PUT_OBJ and <object>kind == DELETE):
            return 1
        return expire != <PyObject*>None and <int64_t><object>expire <= self.now_ms

    cdef PyObject* _next_row(self) except? NULL:
        """The next output row as an owned reference, or NULL at the end."""
        cdef int winner
        cdef _Source* s
        cdef PyObject* row
        cdef PyObject* key
        cdef uint64_t seq
        cdef bint same_key, keep
        while True:
            winner = self.tree[0]
            s = &self.sources[winner]
            if s.row == NULL:  # the overall winner is exhausted, so every source is
                return NULL
            if not s.seq_ready:
                _load_seq(s)
            row, seq = s.row, s.seq
            same_key = seq <= self.snapshot_seq and (
                self.last_key != NULL and s.w0 == self.last_w0 and s.w1 == self.last_w1
                and s.key_len == self.last_len
                and _keycmp(s.w0, s.w1, s.key, s.key_len, self.last_w0, self.last_w1, self.last_ptr, self.last_len) == 0)
            if seq <= self.snapshot_seq and not same_key:
                key = PyTuple_GET_ITEM(row, 0)
                _incref(key)
                _xdecref(self.last_key)
                self.last_key, self.last_ptr, self.last_len = key, s.key, s.key_len
                self.last_w0, self.last_w1 = s.w0, s.w1
                self.boundary_done = False
            s.row, self.held = NULL, row
            self._fill(s)
            self._replay(winner)
            if seq > self.snapshot_seq:
                keep = False  # invisible to the snapshot: as if filtered out of its source
            elif not self.compaction:
                # Read: only the first (newest) row of a key counts, and if it
                # is hidden so is the key: older versions never resurface.
                keep = not same_key and not self._hidden(row)
            elif same_key and (seq == self.last_seq or self.boundary_done):
                keep = False  # the same (key, seq) again, or older than the boundary version
            else:
                self.last_seq = seq
                if seq > self.floor_seq:
                    keep = True  # above the floor: some retained snapshot may read it
                else:
                    self.boundary_done = True  # the newest version at or below the floor
                    keep = not (self.last_run and self._hidden(row))
            self.held = NULL
            if keep:
                return row
            _decref(row)

    def __iter__(self):
        return self

    def __next__(self):
        cdef PyObject* row
        if self.done:
            raise StopIteration
        if self.in_source:
            raise ValueError("merge iterator already executing")
        if self.in_next:  # the previous call raised: like a generator, we are finished
            self._close()
            raise StopIteration
        # No try/finally here: it costs ~5% per row. in_next stays set if we raise.
        self.in_next = True
        if not self.started:
            self._start()
        row = self._next_row()
        self.in_next = False
        if row == NULL:
            self._close()
            raise StopIteration
        result = <object>row
        _decref(row)
        return result


cdef object _prefix_successor(bytes prefix):
    """The smallest key above every key starting with prefix; None if there is none (all 0xff)."""
    cdef bytes stripped = prefix.rstrip(b"\xff")
    cdef Py_ssize_t n = len(stripped)  # explicit: negative indices are off (wraparound=False)
    return stripped[:n - 1] + bytes([stripped[n - 1] + 1]) if n else None


cdef _require_int(str name, value, low, high):
    if type(value) is bool or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], not {value}")


def merge_rows(sources, *, snapshot_seq=MAX_SEQ, reverse=False, start=None, end=None, prefix=None,
               now_ms=None, mode="read", floor_seq=0, last_run=False):
    """Merge sorted row sources, newest source first; see ``kvstore.iterators.merge.merge_rows``.

    Arguments are checked (and ``iter()`` called on each source) eagerly; the
    sources are read lazily, from the first ``next()``.
    """
    if not isinstance(sources, Sequence) or isinstance(sources, (str, bytes)):
        raise TypeError(f"sources must be a sequence of row iterables, not {type(sources).__name__}")
    _require_int("snapshot_seq", snapshot_seq, 0, MAX_SEQ)
    _require_int("floor_seq", floor_seq, 0, MAX_SEQ)
    if now_ms is not None:
        _require_int("now_ms", now_ms, -(2**63), 2**63 - 1)  # an int64, like expire_at_ms
    for name, flag in (("reverse", reverse), ("last_run", last_run)):
        if type(flag) is not bool:
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    for name, bound in (("start", start), ("end", end), ("prefix", prefix)):
        if bound is not None and type(bound) is not bytes:
            raise TypeError(f"{name} must be bytes or None, not {type(bound).__name__}")
    if mode not in ("read", "compaction"):
        raise ValueError(f"mode must be 'read' or 'compaction', not {mode!r}")
    if mode == "compaction" and reverse:
        raise ValueError("reverse must be False when mode='compaction' (its output is in storage order)")
    if mode == "read" and (floor_seq or last_run):
        raise ValueError("floor_seq and last_run apply only to mode='compaction'")

    lo, hi = start, end
    if prefix:
        successor = _prefix_successor(prefix)
        lo = prefix if lo is None else max(lo, prefix)
        if successor is not None:
            hi = successor if hi is None else min(hi, successor)
    if now_ms is None:
        now_ms = int(time.time() * 1000)  # read once: one merge sees one clock
    iterables = []
    for index, source in enumerate(sources):
        try:
            iterables.append(source if type(source) is list else iter(source))
        except TypeError:
            raise TypeError(f"sources[{index}] is not iterable: {type(source).__name__}") from None
    cdef _MergeIterator merged = _MergeIterator.__new__(_MergeIterator)
    merged._setup(iterables, lo, hi, reverse, mode == "compaction", snapshot_seq, floor_seq, last_run, now_ms)
    return merged
