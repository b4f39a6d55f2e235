"""The memtable: rows of the unflushed versions, ordered by key.

``SortedDict`` maps ``user_key -> tuple of rows, newest first``. A key's tuple
is *replaced*, never mutated, so a reader that fetched it sees a consistent
list of versions without a lock (CPython makes the reference swap atomic).
Structural changes to the sorted key list are not safe to iterate through, so
range scans copy keys in bounded chunks under the lock (see :meth:`iter_rows`).

Writers are the committer and the follower, serialised by the store's chain
lock; rows arrive in increasing seq order, so prepending keeps newest first.

A memtable is never trimmed in place: once a flush has moved versions into
the tree, :meth:`Memtable.without_upto` builds a *new* memtable holding only
the newer rows and the engine swaps it in, so a reader still holding the old
one (an open snapshot) keeps a complete, unchanging view. To make that cheap
the memtable also keeps its rows in apply order (one list per applied
version): the unflushed rows are a suffix of that log, found by bisection,
not by walking every key.

Thread-safety: any number of readers, one writer at a time (caller's duty).

The compiled point get (``cython_ext._pointget``) reads ``_rows`` directly,
as a dict (``SortedDict`` is one): keep it a ``key -> tuple of rows`` mapping.
"""

from __future__ import annotations

import bisect
import threading
from typing import Iterable, Iterator

from sortedcontainers import SortedDict

from kvstore.format.rows import Row

# Keys copied per lock hold during a scan: large enough to amortise the lock,
# small enough that a long scan never stalls a commit for long.
_SCAN_CHUNK = 512

# Rough per-row overhead of the tuple, the SortedDict slot and list entries;
# used only for flush thresholds.
_ROW_OVERHEAD = 120


class Memtable:
    """Ordered, multi-version in-memory rows. See the module docstring."""

    def __init__(self) -> None:
        self._rows: SortedDict = SortedDict()
        self._lock = threading.Lock()
        self.row_count = 0
        self.approx_bytes = 0
        # Apply log: one list of rows per apply() call (one version), and the
        # largest seq of each, ascending because versions are applied in order.
        self._applied: list[list[Row]] = []
        self._applied_max_seq: list[int] = []

    def apply(self, rows: Iterable[Row]) -> None:
        """Add rows; each key's new rows must be newer than what it holds.

        Requires: rows of one key come in any order but with seqs above the
        key's current newest (true for versions applied in order).
        """
        data = self._rows
        lock = self._lock
        count = 0
        nbytes = 0
        max_seq = -1
        rows = rows if isinstance(rows, list) else list(rows)
        for row in rows:
            key = row[0]
            current = data.get(key)
            if current is None:
                with lock:
                    data[key] = (row,)
            elif row[1] > current[0][1]:
                data[key] = (row,) + current
            else:
                # Same key twice in one batch in storage order (seq desc): the
                # newer one was applied first, so this one goes after it.
                data[key] = _insert_by_seq(current, row)
            count += 1
            nbytes += len(key) + (len(row[3]) if row[3] is not None else 0) + _ROW_OVERHEAD
            if row[1] > max_seq:
                max_seq = row[1]
        if rows:
            self._applied.append(rows)
            self._applied_max_seq.append(max_seq)
        self.row_count += count
        self.approx_bytes += nbytes

    def without_upto(self, seq: int) -> Memtable:
        """A new memtable holding only this one's rows with ``seq`` above ``seq``.

        This memtable is left untouched, so readers holding it are unaffected.

        Runtime complexity: ``O(log v + r log r)`` for ``v`` applied versions
        and ``r`` rows kept: the flushed prefix is skipped by bisection.
        """
        fresh = Memtable()
        first = bisect.bisect_right(self._applied_max_seq, seq)
        for rows in self._applied[first:]:
            # Only the first chunk can straddle ``seq`` (flushes cut at version
            # boundaries, so in practice none does); filtering every chunk
            # keeps this exact for any ``seq`` at little cost.
            fresh.apply([row for row in rows if row[1] > seq])
        return fresh

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
        data = self._rows
        lock = self._lock
        lo, hi = start, end
        inclusive_lo, inclusive_hi = True, False
        while True:
            with lock:
                keys = list(_take(data.irange(lo, hi, (inclusive_lo, inclusive_hi), reverse=reverse), _SCAN_CHUNK))
            for key in keys:
                versions = data.get(key)
                if versions is not None:
                    yield from versions
            if len(keys) < _SCAN_CHUNK:
                return
            if reverse:
                hi, inclusive_hi = keys[-1], False
            else:
                lo, inclusive_lo = keys[-1], False

    def __len__(self) -> int:
        return len(self._rows)

    def check_invariants(self) -> None:
        """Assert every key's versions are strictly newest-first and the apply log matches."""
        assert self._applied_max_seq == sorted(self._applied_max_seq), "apply log out of seq order"
        assert sum(map(len, self._applied)) == self.row_count, "apply log and row count disagree"
        for key, versions in self._rows.items():
            assert versions, f"empty version tuple for {key!r}"
            for newer, older in zip(versions, versions[1:]):
                assert newer[1] > older[1], f"versions of {key!r} out of order: {newer[1]} before {older[1]}"
            assert all(row[0] == key for row in versions)


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


def _take(iterator: Iterator[bytes], n: int) -> Iterator[bytes]:
    for i, item in enumerate(iterator):
        yield item
        if i + 1 >= n:
            return
