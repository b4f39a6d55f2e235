"""Forward scans without per-row Python merging: Arrow batches or (key, value) pairs.

:func:`scan_kv_batches` (what ``scan_batches`` returns) and
:func:`scan_kv_pairs` (forward ``scan``) read each source as *segments*:
``(BlockView, lo, hi)`` row ranges of cached SST blocks, read in place
through their Arrow buffers, and ``(rows, lo, hi)`` ranges of the
memtable's row tuples. A scan proceeds in *windows*:

1. every source (the memtable, each L0 SST, each sorted run) pulls segments
   until it holds ``window`` rows or runs out;
2. ``bound`` is the smallest last pending key among the sources that still
   have rows to read; the window takes, from every source, the rows with
   ``key < bound``, so all versions of a key fall into one window even when
   they straddle blocks or sources;
3. :func:`merge_segments` (``cython_ext._scan``, or the pure-Python twin
   :func:`merge_segments_py`) merges the window: per key the newest version
   with ``seq <= snapshot_seq``, dropped if a tombstone or expired, and writes
   the survivors straight into Arrow ``binary`` arrays or ``(key, value)``
   tuples.

Windows grow from the caller's batch size to :data:`MAX_WINDOW_ROWS`, so a
short scan (or one stopped early) reads little and a long one makes few
calls. Results equal ``scan_rows`` filtered to live rows (the tests compare
them on random stores).
"""

from __future__ import annotations

import itertools
import warnings
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any, Final

import pyarrow as pa

from kvstore.format.rows import PUT, Row
from kvstore.state import Layers

KV_SCHEMA: Final = pa.schema(
    [pa.field("key", pa.binary(), nullable=False), pa.field("value", pa.binary(), nullable=False)]
)
# Upper bound on the rows a source contributes to one window: large enough
# that per-window Python and Arrow overhead vanishes, small enough to bound memory.
MAX_WINDOW_ROWS: Final = 65_536

Segment = tuple[Any, int, int]  # (BlockView or list of rows, lo, hi)


def merge_segments_py(sources: list[list[Segment]], snapshot_seq: int, now_ms: int, pairs: bool) -> Any:
    """Pure-Python twin of ``cython_ext._scan.merge_segments`` (same arguments and results)."""
    rows: list[Row] = []
    for segments in sources:
        for seg, lo, hi in segments:
            rows.extend(seg[lo:hi] if isinstance(seg, list) else seg.rows(lo, hi))
    rows.sort(key=lambda row: (row[0], -row[1]))
    live: list[tuple[bytes, bytes]] = []
    previous = None
    for key, seq, kind, value, expire in rows:
        if seq > snapshot_seq or key == previous:
            continue
        previous = key
        if kind == PUT and (expire is None or expire > now_ms):
            live.append((key, value))  # type: ignore[arg-type]
    if pairs:
        return live
    return pa.array([k for k, _ in live], pa.binary()), pa.array([v for _, v in live], pa.binary())


_merge: Callable[..., Any]
try:
    from cython_ext._scan import merge_segments as _merge  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled scan merge unavailable ({exc}); using the pure-Python reference", stacklevel=2)
    _merge = merge_segments_py

IMPLEMENTATION: Final[str] = "python" if _merge is merge_segments_py else "cython"
merge_segments: Final = _merge


class _Source:
    """One ordered source: its segment iterator and the segments pulled but not yet merged."""

    __slots__ = ("exhausted", "iterator", "pending", "pending_rows")

    def __init__(self, iterator: Iterator[Segment]) -> None:
        self.iterator = iterator
        self.pending: list[Segment] = []
        self.pending_rows = 0
        self.exhausted = False

    def fill(self, rows: int) -> None:
        """Pull segments until more than ``rows`` are pending or the source runs out.

        More than: a range of exactly ``rows`` rows (a scan with ``limit``
        or ``batch_rows`` equal to its size) then finds its end in this
        window, instead of cutting it before its last key and merging that
        key alone in a second window.
        """
        while self.pending_rows <= rows and not self.exhausted:
            self.pull()

    def pull(self) -> None:
        for segment in self.iterator:
            if segment[2] > segment[1]:
                self.pending.append(segment)
                self.pending_rows += segment[2] - segment[1]
                return
        self.exhausted = True

    def last_key(self) -> bytes:
        seg, _lo, hi = self.pending[-1]
        return _key_at(seg, hi - 1)

    def take_below(self, bound: bytes | None) -> list[Segment]:
        """Remove and return the pending rows with ``key < bound`` (all of them if ``bound`` is None)."""
        if bound is None:
            taken, self.pending, self.pending_rows = self.pending, [], 0
            return taken
        taken = []
        while self.pending:
            seg, lo, hi = self.pending[0]
            if _key_at(seg, hi - 1) < bound:
                taken.append(self.pending.pop(0))
                continue
            cut = bisect_left(seg, (bound,), lo, hi) if isinstance(seg, list) else seg.lower_bound(bound, lo, hi)
            if cut > lo:
                taken.append((seg, lo, cut))
                self.pending[0] = (seg, cut, hi)
            break
        self.pending_rows -= sum(hi - lo for _seg, lo, hi in taken)
        return taken


def _overlaps(info: Any, start: bytes | None, end: bytes | None) -> bool:
    """Whether an SST's key range (``info.min_key``..``info.max_key``) meets ``[start, end)``."""
    return (start is None or info.max_key >= start) and (end is None or info.min_key < end)


def _key_at(seg: Any, i: int) -> bytes:
    return seg[i][0] if isinstance(seg, list) else seg.key_at(i)  # type: ignore[no-any-return]


def _windows(
    layers: Layers, snapshot_seq: int, start: bytes | None, end: bytes | None, first_window: int,
) -> Iterator[list[list[Segment]]]:
    """The segments of each window, one list per source (see the module docstring)."""
    # Only the sources that can hold rows of the range: each costs Python
    # calls per window, a large share of a short scan.
    sources = [_Source(_memtable_segments(layers, start, end))] if len(layers.memtable) else []
    sources.extend(_Source(sst.iter_segments(start, end, snapshot_seq)) for sst in layers.l0
                   if _overlaps(sst.info, start, end))
    for run in layers.runs:
        ssts = run.overlapping(start, end)
        if ssts:
            sources.append(_Source(_run_segments(ssts, start, end, snapshot_seq)))
    window = max(1, first_window)
    while True:
        for source in sources:
            source.fill(window)
        window = min(window * 4, MAX_WINDOW_ROWS)
        if all(source.exhausted for source in sources):  # the last window: everything pending
            parts = [source.pending for source in sources if source.pending]
            if parts:
                yield parts
            return
        live = [source for source in sources if not source.exhausted]
        bound = min(source.last_key() for source in live) if live else None
        parts = [source.take_below(bound) for source in sources]
        for source in live:
            if source.pending and source.last_key() == bound:
                source.pull()  # its rows of ``bound`` may continue in the next segment
        parts = [part for part in parts if part]
        if parts:
            yield parts
        if bound is None:
            return


def scan_kv_batches(
    layers: Layers, snapshot_seq: int, start: bytes | None, end: bytes | None, batch_rows: int, now_ms: int,
) -> Iterator[pa.RecordBatch]:
    """Live ``(key, value)`` pairs of ``[start, end)`` at ``snapshot_seq`` as
    KV_SCHEMA batches of exactly ``batch_rows`` rows (the last one may be shorter).

    Requires: validated bounds and ``batch_rows >= 1``.
    """
    pending_keys: list[pa.Array] = []
    pending_values: list[pa.Array] = []
    pending = 0
    for parts in _windows(layers, snapshot_seq, start, end, batch_rows):
        keys, values = merge_segments(parts, snapshot_seq, now_ms, False)
        if not len(keys):
            continue
        if not pending and len(keys) == batch_rows:
            # A window of exactly one batch (a scan of batch_rows keys): no concat, no slices.
            yield pa.RecordBatch.from_arrays([keys, values], schema=KV_SCHEMA)
            continue
        pending_keys.append(keys)
        pending_values.append(values)
        pending += len(keys)
        if pending < batch_rows:
            continue
        all_keys = pa.concat_arrays(pending_keys) if len(pending_keys) > 1 else pending_keys[0]
        all_values = pa.concat_arrays(pending_values) if len(pending_values) > 1 else pending_values[0]
        full = pending - pending % batch_rows
        for offset in range(0, full, batch_rows):
            yield pa.RecordBatch.from_arrays(
                [all_keys.slice(offset, batch_rows), all_values.slice(offset, batch_rows)], schema=KV_SCHEMA
            )
        pending -= full
        pending_keys = [all_keys.slice(full)] if pending else []
        pending_values = [all_values.slice(full)] if pending else []
    if pending:
        yield pa.RecordBatch.from_arrays(
            [pending_keys[0] if len(pending_keys) == 1 else pa.concat_arrays(pending_keys),
             pending_values[0] if len(pending_values) == 1 else pa.concat_arrays(pending_values)],
            schema=KV_SCHEMA,
        )


def scan_kv_pairs(
    layers: Layers, snapshot_seq: int, start: bytes | None, end: bytes | None, now_ms: int, first_window: int = 256,
    limit: int | None = None,
) -> Iterator[tuple[bytes, bytes]]:
    """Live ``(key, value)`` pairs of ``[start, end)`` at ``snapshot_seq``, in key order.

    ``first_window``: rows per source read before the first pairs come out
    (a scan with a small ``limit`` passes it to read no more than it needs).
    ``limit``: stop after that many pairs (None: no limit).

    Requires: validated bounds and limit.
    """
    # A C-level chain over each window's list: a row costs one list-iterator
    # step, not a generator resume plus an ``islice`` step (a third of a
    # 1000-row scan's time went to those two when each row passed through them).
    return itertools.chain.from_iterable(_pair_lists(layers, snapshot_seq, start, end, now_ms, first_window, limit))


def _pair_lists(
    layers: Layers, snapshot_seq: int, start: bytes | None, end: bytes | None, now_ms: int, first_window: int,
    limit: int | None,
) -> Iterator[list[tuple[bytes, bytes]]]:
    remaining = limit
    if remaining is not None and remaining <= 0:
        return
    for parts in _windows(layers, snapshot_seq, start, end, first_window):
        pairs = merge_segments(parts, snapshot_seq, now_ms, True)
        if remaining is None:
            yield pairs
            continue
        if len(pairs) >= remaining:
            yield pairs[:remaining]
            return
        remaining -= len(pairs)
        yield pairs


def _run_segments(ssts: list[Any], start: bytes | None, end: bytes | None, snapshot_seq: int) -> Iterator[Segment]:
    # SSTs of a run are disjoint and in key order: their segments concatenate in order.
    for sst in ssts:
        yield from sst.iter_segments(start, end, snapshot_seq)


def _memtable_segments(layers: Layers, start: bytes | None, end: bytes | None) -> Iterator[Segment]:
    # The memtable builds each chunk's row list in C (Memtable.row_chunks).
    for rows in layers.memtable.row_chunks(start, end):
        yield rows, 0, len(rows)
