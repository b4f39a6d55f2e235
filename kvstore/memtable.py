"""The memtable: rows of the unflushed versions, ordered by key.

Two structures over the same rows:

* ``_rows``, a plain ``dict`` mapping ``user_key -> tuple of rows, newest
  first``: point gets are one hash probe. A key's tuple is *replaced*, never
  mutated, so a reader that fetched it sees a consistent list of versions
  without a lock (CPython makes the reference swap atomic).
* ``_runs``, the key order for scans: a tuple of sorted, pairwise disjoint
  key lists whose union is ``_rows``' keys. A key joins a run once, when it
  first enters the memtable; later versions only replace its dict entry.
  Each apply appends its new keys as one run (the committer hands rows over
  sorted, so that costs no sort). Runs are merged *lazily, by readers*: a
  scan over at most :data:`_MAX_SCAN_RUNS` runs merges them chunk by chunk
  as it goes; one that finds more merges them into one run first
  (:func:`merge_runs`, compiled: pairwise merges in C without the GIL, so a
  large merge does not stall the committer) and publishes it in place of
  the runs it merged, so later scans start from it. A scan whose range
  holds no key of any run merges nothing, and the memtable remembers that
  range and those runs, so probing it again (every transaction asks whether
  its snapshot holds a lease record) bisects only the runs added since. A
  load that nobody scans never pays for the key order: the flush sorts its
  rows from the apply log (below), not from the runs. Runs are never
  mutated and the tuple is swapped whole under ``_lock`` (held only for the
  swap), so a scan iterates the runs it started with.

There is no per-row ``SortedDict`` insert: applying a version is one pass in
C over its rows (:func:`apply_rows`, compiled in ``cython_ext._memtable``,
with the pure-Python twin :func:`apply_rows_py`) plus the run merges.

Writers are the committer and the follower, serialised by the store's chain
lock; rows arrive in increasing seq order, so prepending keeps newest first.

A memtable is never trimmed in place: once a flush has moved versions into
the tree, :meth:`Memtable.without_upto` builds a *new* memtable holding only
the newer rows and the engine swaps it in, so a reader still holding the old
one (an open snapshot) keeps a complete, unchanging view. To make that cheap
the memtable also keeps its rows in apply order (one list per applied
version): the unflushed rows are a suffix of that log, found by bisection,
not by walking every key. A flush reads the same log
(:meth:`Memtable.flush_batches`): each version's rows are one sorted run,
so its Arrow batches come from a merge of those runs in C.

Thread-safety: any number of readers, one writer at a time (caller's duty).

The compiled point get (``cython_ext._pointget``) reads ``_rows`` directly,
as a dict: keep it a ``key -> tuple of rows`` mapping.
"""

from __future__ import annotations

import bisect
import threading
import warnings
from itertools import chain
from typing import Any, Callable, Final, Iterable, Iterator

import pyarrow as pa

from kvstore.flush_rows import FlushBatches, flush_batches
from kvstore.format.rows import MAX_SEQ, Row

# Keys merged per step of a scan over several runs: large enough that the
# per-step bisections vanish, small enough that a scan stopped early (a
# ``limit``) does little wasted work.
_SCAN_CHUNK: Final = 512

# Rough per-row overhead of the tuple, the dict slot and list entries;
# used only for flush thresholds.
_ROW_OVERHEAD: Final = 120

# A scan merges up to this many runs on the fly; over it, it first merges
# them into one and publishes that. Small enough that a scan's per-chunk
# bisections and merge stay cheap, large enough that a write-heavy load with
# occasional scans rarely re-sorts the big run.
_MAX_SCAN_RUNS: Final = 8


def apply_rows_py(data: dict[bytes, tuple[Row, ...]], rows: list[Row], row_overhead: int) -> tuple[list[bytes], int, int, bool]:
    """Insert ``rows`` into ``data`` (``key -> rows newest first``).

    Returns ``(new_keys, nbytes, max_seq, ordered)``: the keys that were not
    in ``data`` (in row order, each once), the rows' approximate bytes, their
    largest seq (-1 if none) and whether the rows' keys were non-decreasing
    (then ``new_keys`` is sorted). The pure-Python twin of
    ``cython_ext._memtable.apply_rows``.

    Raises:
        TypeError: a row is not a 5-tuple with a bytes key.
    """
    new_keys = []
    nbytes = 0
    max_seq = -1
    ordered = True
    previous = None
    for row in rows:
        if type(row) is not tuple or len(row) != 5 or type(row[0]) is not bytes:
            raise TypeError(f"a memtable row must be a (key, seq, kind, value, expire) tuple with a bytes key, got {row!r}")
        key, seq = row[0], row[1]
        if previous is not None and key < previous:
            ordered = False
        previous = key
        current = data.get(key)
        if current is None:
            data[key] = (row,)
            new_keys.append(key)
        elif seq > current[0][1]:
            data[key] = (row,) + current
        else:
            # Same key twice in one batch in storage order (seq desc): the
            # newer one was applied first, so this one goes after it.
            data[key] = _insert_by_seq(current, row)
        value = row[3]
        nbytes += len(key) + (len(value) if value is not None else 0) + row_overhead
        if seq > max_seq:
            max_seq = seq
    return new_keys, nbytes, max_seq, ordered


def _insert_by_seq(versions: tuple[Row, ...], row: Row) -> tuple[Row, ...]:
    items = list(versions)
    index = 0
    while index < len(items) and items[index][1] > row[1]:
        index += 1
    if index < len(items) and items[index][1] == row[1]:
        items[index] = row  # re-applying the same version is idempotent
    else:
        items.insert(index, row)
    return tuple(items)


def merge_runs_py(runs: list[list[bytes]]) -> list[bytes]:
    """One sorted list of the keys of ``runs`` (sorted lists of bytes).

    The pure-Python twin of ``cython_ext._memtable.merge_runs``, which does
    the merge without holding the GIL.
    """
    merged = list(chain.from_iterable(runs))
    merged.sort()  # sorted runs: Timsort finds and merges them
    return merged


apply_rows: Callable[[dict[bytes, tuple[Row, ...]], list[Row], int], tuple[list[bytes], int, int, bool]]
merge_runs: Callable[[list[list[bytes]]], list[bytes]]
try:
    from cython_ext._memtable import apply_rows, merge_runs  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled memtable apply unavailable ({exc}); using the pure-Python twins", stacklevel=2)
    apply_rows, merge_runs = apply_rows_py, merge_runs_py

IMPLEMENTATION: Final[str] = "python" if apply_rows is apply_rows_py else "cython"


class Memtable:
    """Ordered, multi-version in-memory rows. See the module docstring."""

    def __init__(
        self,
        apply_impl: Callable[..., Any] | None = None,
        merge_impl: Callable[..., Any] | None = None,
        flush_impl: FlushBatches | None = None,
    ) -> None:
        """``apply_impl``, ``merge_impl``, ``flush_impl``: the row insert, the
        run merge and the flush's batch builder (tests pass the twins
        :func:`apply_rows_py`, :func:`merge_runs_py`,
        :func:`~kvstore.flush_rows.flush_batches_py`)."""
        self._rows: dict[bytes, tuple[Row, ...]] = {}
        self._runs: tuple[list[bytes], ...] = ()
        self._lock = threading.Lock()  # guards swaps of ``_runs`` only
        self._apply_impl = apply_impl or apply_rows
        self._merge_impl = merge_impl or merge_runs
        self._flush_impl = flush_impl or flush_batches
        self.row_count = 0
        self.approx_bytes = 0
        # Apply log: one list of rows per apply() call (one version), and the
        # largest seq of each, ascending because versions are applied in order.
        self._applied: list[list[Row]] = []
        self._applied_max_seq: list[int] = []
        # (start, end, runs): the last range a scan found no key of in any of
        # ``runs`` (then the memtable's whole run tuple); see _scan_runs.
        self._empty_probe: tuple[bytes | None, bytes | None, tuple[list[bytes], ...]] | None = None
        # The run the last apply() appended (None: it added no key), for retract_last.
        self._last_run: list[bytes] | None = None
        # (seq, versions, memtable): without_upto(seq) built ahead over the
        # first ``versions`` applied versions (prepare_without_upto).
        self._prepared: tuple[int, int, Memtable] | None = None

    def apply(self, rows: Iterable[Row]) -> None:
        """Add rows; each key's new rows must be newer than what it holds.

        Fastest with rows in storage order (key ascending), as the committer
        and every root or SST delta hand them over.

        Requires: rows of one key come in any order but with seqs above the
        key's current newest (true for versions applied in order).
        """
        rows = rows if type(rows) is list else list(rows)
        if not rows:
            return
        new_keys, nbytes, max_seq, ordered = self._apply_impl(self._rows, rows, _ROW_OVERHEAD)
        if new_keys:
            if not ordered:
                new_keys.sort()
            with self._lock:
                self._runs = self._runs + (new_keys,)
        self._last_run = new_keys if new_keys else None
        self._applied.append(rows)
        self._applied_max_seq.append(max_seq)
        self.row_count += len(rows)
        self.approx_bytes += nbytes

    def retract_last(self, rows: list[Row]) -> None:
        """Undo the latest :meth:`apply`, which was given exactly ``rows`` (the same list).

        For a committer that applied a commit's rows before knowing that the
        commit landed (while its root file was being written) and then
        learnt that it did not: readers never saw those rows, because every
        read filters on a snapshot seq below theirs, and afterwards nothing
        of them is left (keys, runs, apply log, counts).

        Raises:
            ValueError: ``rows`` is not the latest apply.
        """
        if not self._applied or self._applied[-1] is not rows:
            raise ValueError("retract_last takes the rows of the latest apply()")
        seqs = {row[1] for row in rows}
        data = self._rows
        gone = False
        nbytes = 0
        for row in rows:
            value = row[3]
            nbytes += len(row[0]) + (len(value) if value is not None else 0) + _ROW_OVERHEAD
        for key in {row[0] for row in rows}:
            kept = tuple(row for row in data[key] if row[1] not in seqs)
            if kept:
                data[key] = kept
            else:
                del data[key]  # the apply added it
                gone = True
        if gone:
            with self._lock:
                runs = self._runs
                if runs and runs[-1] is self._last_run:
                    self._runs = runs[:-1]
                else:  # a scan merged the apply's run into others meanwhile: filter them
                    self._runs = tuple(run for run in ([key for key in run if key in data] for run in runs) if run)
        self._last_run = None
        prepared = self._prepared
        if prepared is not None and prepared[1] >= len(self._applied):
            self._prepared = None  # it may hold these rows (it never should: they were not committed)
        self._applied.pop()
        self._applied_max_seq.pop()
        self.row_count -= len(rows)
        self.approx_bytes -= nbytes

    def without_upto(self, seq: int) -> Memtable:
        """A new memtable holding only this one's rows with ``seq`` above ``seq``.

        This memtable is left untouched, so readers holding it are unaffected.
        If :meth:`prepare_without_upto` built most of it ahead for this
        ``seq``, only the versions applied since are added.

        Runtime complexity: ``O(log v + r log r)`` for ``v`` applied versions
        and ``r`` rows kept: the flushed prefix is skipped by bisection.
        """
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] == seq and prepared[1] <= len(self._applied):
            _, start, fresh = prepared
            fresh._extend_from(self._applied[start:], seq)
            return fresh
        fresh = Memtable(self._apply_impl, self._merge_impl, self._flush_impl)
        first = bisect.bisect_right(self._applied_max_seq, seq)
        fresh._extend_from(self._applied[first:], seq)
        return fresh

    def prepare_without_upto(self, seq: int, committed_seq: int) -> None:
        """Build ahead most of what :meth:`without_upto` of ``seq`` will return.

        A flush calls this on its own thread before it commits: the commit
        then trims the memtable (``without_upto``, under the chain lock,
        blocking every other commit) by adding only the versions applied
        since, instead of re-inserting every row that arrived during the
        flush (~0.5 us a row; a flush during a bulk load saw 300,000).

        Only versions whose rows are all at or below ``committed_seq`` (the
        head's last seq: they are durable) are taken: a version the committer
        applied ahead of its root file (and may still retract) is added later,
        by ``without_upto``.

        Safe while the committer applies new versions (the apply log only
        grows at its end, or loses its last, uncommitted version).
        """
        applied, max_seqs = self._applied, self._applied_max_seq
        count = min(len(applied), len(max_seqs))
        end = bisect.bisect_right(max_seqs, committed_seq, 0, count)
        first = bisect.bisect_right(max_seqs, seq, 0, end)
        fresh = Memtable(self._apply_impl, self._merge_impl, self._flush_impl)
        fresh._extend_from(applied[first:end], seq)
        self._prepared = (seq, end, fresh)

    def _extend_from(self, versions: list[list[Row]], seq: int) -> None:
        for rows in versions:
            # Only a version straddling ``seq`` has rows at or below it (flushes
            # cut at version boundaries, so in practice none does); filtering
            # every one keeps this exact for any ``seq`` at little cost.
            self.apply([row for row in rows if row[1] > seq])

    def flush_batches(self, low: int, high: int, floor: int) -> Iterator[pa.RecordBatch]:
        """What a flush of the seqs ``(low, high]`` writes, as ``ROW_SCHEMA`` batches.

        The rows with ``low < seq <= high`` in storage order (key ascending,
        seq descending), keeping per key every version above ``floor`` and
        the newest at or below it (:mod:`kvstore.flush_rows`). Only the
        applied versions that can hold such rows are read (found by
        bisection in the apply log), not the key index: their row lists are
        sorted runs, built together, so ordering them is a merge of a few
        sequential streams.

        Safe while the committer applies newer versions (they are appended
        after the lists taken here).

        Raises:
            TypeError: ``low``, ``high`` or ``floor`` is not an int.
            ValueError: one of them is outside ``0..MAX_SEQ``.
        """
        for name, value in (("low", low), ("high", high), ("floor", floor)):
            if type(value) is not int:
                raise TypeError(f"{name} must be int, not {type(value).__name__}")
            if not 0 <= value <= MAX_SEQ:
                raise ValueError(f"{name} must be in 0..{MAX_SEQ}, got {value}")
        applied, max_seqs = self._applied, self._applied_max_seq
        count = min(len(applied), len(max_seqs))
        first = bisect.bisect_right(max_seqs, low, 0, count)
        # Through the first version past high (it may straddle high; a
        # version applied again has the same max seq as its first apply).
        end = bisect.bisect_right(max_seqs, high, first, count)
        return self._flush_impl(applied[first:min(end + 1, count)], low, high, floor)

    def get(self, key: bytes, snapshot_seq: int) -> Row | None:
        """Newest row of ``key`` with ``seq <= snapshot_seq`` (DELETEs included)."""
        versions = self._rows.get(key)
        if versions is None:
            return None
        for row in versions:
            if row[1] <= snapshot_seq:
                return row
        return None

    def iter_rows(self, start: bytes | None = None, end: bytes | None = None, reverse: bool = False) -> Iterator[Row]:
        """Every version of every key in ``[start, end)``, in merge-source order.

        Forward: key ascending; reverse: key descending. Within a key always
        seq descending. Safe while the committer applies new rows.
        """
        for rows in self.row_chunks(start, end, reverse):
            yield from rows

    def row_chunks(self, start: bytes | None = None, end: bytes | None = None, reverse: bool = False) -> Iterator[list[Row]]:
        """:meth:`iter_rows` cut into lists of rows (each a few hundred keys' versions).

        The lists are built in C (no Python step per row): scans that take
        row segments (``kvstore.iterators.arrow_scan``) use this form.
        """
        data = self._rows
        getitem = data.__getitem__
        for keys in _key_chunks(self._scan_runs(start, end), start, end, reverse):
            try:
                chunk = list(chain.from_iterable(map(getitem, keys)))
            except KeyError:
                # retract_last removed a key of these runs meanwhile: it had
                # only rows of a commit that never landed, which this scan's
                # snapshot excludes anyway.
                chunk = list(chain.from_iterable(data.get(key, ()) for key in keys))
            yield chunk

    def _scan_runs(self, start: bytes | None, end: bytes | None) -> tuple[list[bytes], ...]:
        """The runs for a scan of ``[start, end)``: at most :data:`_MAX_SCAN_RUNS` of them (see the module docstring)."""
        runs = self._runs
        if len(runs) <= _MAX_SCAN_RUNS:
            return runs
        unchecked = runs
        probe = self._empty_probe
        if probe is not None and probe[0] == start and probe[1] == end:
            checked = probe[2]
            last = len(checked) - 1
            # Runs only change by an append at the end, a merge that replaces
            # a prefix (a new first run), dropping the last run or filtering
            # all of them (new lists): the same first and last objects mean
            # ``checked`` is still a prefix of ``runs``, with no key in range.
            if len(runs) > last and runs[0] is checked[0] and runs[last] is checked[last]:
                unchecked = runs[last + 1:]
        if not any(_holds_keys_in(run, start, end) for run in unchecked):
            # Nothing to merge for: a probe of an empty range must not merge a
            # bulk load's runs (the lease reaper asks whether any lease record
            # exists every maintenance tick: a GIL-holding pause of ~100 ms).
            # Remembered, so the next probe of the range bisects only the runs
            # appended since: every transaction's first read asks the same of
            # its snapshot (kvstore.lease_reads), and bisecting 100 runs of a
            # 100-batch load cost each one ~60 us.
            self._empty_probe = (start, end, runs)
            return ()
        merged = self._merge_impl(list(runs))
        with self._lock:
            current = self._runs
            # Publish unless another scan replaced these runs meanwhile (the
            # writer only appends, so then they are still a prefix).
            if len(current) >= len(runs) and all(a is b for a, b in zip(current, runs)):
                self._runs = (merged,) + current[len(runs):]
                self._empty_probe = None  # it no longer matches, and would keep the merged runs alive
        return (merged,)

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def version_count(self) -> int:
        """Applied versions (calls of :meth:`apply` with rows)."""
        return len(self._applied)

    def check_invariants(self) -> None:
        """Assert every key's versions are strictly newest-first, the runs
        index exactly the keys, and the apply log matches."""
        assert self._applied_max_seq == sorted(self._applied_max_seq), "apply log out of seq order"
        assert sum(map(len, self._applied)) == self.row_count, "apply log and row count disagree"
        for run in self._runs:
            assert run, "empty run"
            assert all(a < b for a, b in zip(run, run[1:])), "run not strictly sorted"
        run_keys = [key for run in self._runs for key in run]
        assert len(run_keys) == len(set(run_keys)) == len(self._rows), "runs and keys disagree"
        assert set(run_keys) == self._rows.keys(), "runs and keys disagree"
        for key, versions in self._rows.items():
            assert versions, f"empty version tuple for {key!r}"
            for newer, older in zip(versions, versions[1:]):
                assert newer[1] > older[1], f"versions of {key!r} out of order: {newer[1]} before {older[1]}"
            assert all(row[0] == key for row in versions)


def _holds_keys_in(run: list[bytes], start: bytes | None, end: bytes | None) -> bool:
    """Whether the sorted ``run`` has a key in ``[start, end)``."""
    lo = 0 if start is None else bisect.bisect_left(run, start)
    return lo < len(run) and (end is None or run[lo] < end)


def _key_chunks(
    runs: tuple[list[bytes], ...], start: bytes | None, end: bytes | None, reverse: bool
) -> Iterator[list[bytes]]:
    """Keys of ``runs`` in ``[start, end)``, in order (descending if ``reverse``), in chunks."""
    spans: list[list[Any]] = []  # [run, lo, hi]: the run's keys still to yield are run[lo:hi]
    for run in runs:
        lo = 0 if start is None else bisect.bisect_left(run, start)
        hi = len(run) if end is None else bisect.bisect_left(run, end)
        if lo < hi:
            spans.append([run, lo, hi])
    if len(spans) == 1:
        run, lo, hi = spans[0]
        if reverse:
            for top in range(hi, lo, -_SCAN_CHUNK):
                yield run[max(lo, top - _SCAN_CHUNK):top][::-1]
        else:
            for bottom in range(lo, hi, _SCAN_CHUNK):
                yield run[bottom:min(hi, bottom + _SCAN_CHUNK)]
        return
    while spans:
        # Take up to a chunk from each run; every key up to the nearest chunk
        # edge (the bound) is then known, so those keys go out merged.
        long = [span for span in spans if span[2] - span[1] > _SCAN_CHUNK]
        if not long:
            bound = None  # every run's rest fits in this chunk
        elif reverse:
            bound = max(run[hi - _SCAN_CHUNK] for run, _lo, hi in long)
        else:
            bound = min(run[lo + _SCAN_CHUNK - 1] for run, lo, _hi in long)
        taken: list[bytes] = []
        for span in spans:
            run, lo, hi = span
            if reverse:
                cut = lo if bound is None else bisect.bisect_left(run, bound, lo, hi)
                taken += run[cut:hi]
                span[2] = cut
            else:
                cut = hi if bound is None else bisect.bisect_right(run, bound, lo, hi)
                taken += run[lo:cut]
                span[1] = cut
        taken.sort(reverse=reverse)  # a few sorted runs: Timsort merges them in C
        yield taken
        spans = [span for span in spans if span[1] < span[2]]
