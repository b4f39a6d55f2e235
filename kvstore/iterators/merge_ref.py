"""Reference k-way merge of sorted row sources: the readable spec of ``merge_rows``.

This is the pure-Python twin of ``cython_ext._merge`` (the implementation the
engine uses; :mod:`kvstore.iterators.merge` picks one at import time). Both
must return the same rows, and ``tests/kvstore/iterators/test_merge.py`` runs
the same cases against both. This one is written to be obviously correct, in
three layers that mirror leveldb's ``merger.cc`` + ``db_iter.cc`` split:

1. **Clip** (:func:`_clip`): per source, drop rows outside ``[lo, hi)`` and
   rows newer than the snapshot, and stop reading once past the far bound.
   Filtering happens *before* merging, so a row the snapshot cannot see never
   competes with a visible one.
2. **Merge**: :func:`heapq.merge` on the key alone, grouped by key with
   :func:`itertools.groupby`. ``heapq.merge`` is stable (it breaks ties by
   input position, also with ``reverse=True``), so inside a key group the rows
   arrive ordered by source index. That is what lets the lower source index
   win a tie on ``(key, seq)`` below.
3. **Resolve** each key group: :func:`_read_rows` keeps the newest version if it
   is live; :func:`_compaction_rows` applies the retention rule.

Speed habits (from sortedcontainers): the per-row work runs in C helpers
(``heapq``, ``groupby``, ``itemgetter``, ``max``), hot names are bound to
locals, and a source that needs no clipping is passed through untouched.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter

from kvstore.format.rows import DELETE, EXPIRE_AT_MS, KIND, MAX_SEQ, SEQ, Row
from kvstore.keyrange import merge_bounds

__all__ = ["merge_rows"]

_MODES = ("read", "compaction")
_row_key = itemgetter(0)
_row_seq = itemgetter(SEQ)


def _require_int(name: str, value: object, low: int, high: int) -> None:
    """Raise unless ``value`` is an int (not a bool) in ``[low, high]``."""
    if type(value) is bool or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], not {value}")


def _check_args(
    sources: object,
    snapshot_seq: object,
    reverse: object,
    bounds: dict[str, object],
    now_ms: object,
    mode: object,
    floor_seq: object,
    last_run: object,
) -> None:
    """Raise TypeError/ValueError naming the first bad argument of :func:`merge_rows`."""
    if not isinstance(sources, Sequence) or isinstance(sources, (str, bytes)):
        raise TypeError(f"sources must be a sequence of row iterables, not {type(sources).__name__}")
    _require_int("snapshot_seq", snapshot_seq, 0, MAX_SEQ)
    _require_int("floor_seq", floor_seq, 0, MAX_SEQ)
    if now_ms is not None:
        _require_int("now_ms", now_ms, -(2**63), 2**63 - 1)  # an int64, like expire_at_ms
    for name, flag in (("reverse", reverse), ("last_run", last_run)):
        if type(flag) is not bool:
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    for name, bound in bounds.items():
        if bound is not None and type(bound) is not bytes:
            raise TypeError(f"{name} must be bytes or None, not {type(bound).__name__}")
    if mode not in _MODES:
        raise ValueError(f"mode must be 'read' or 'compaction', not {mode!r}")
    if mode == "compaction" and reverse:
        raise ValueError("reverse must be False when mode='compaction' (its output is in storage order)")
    if mode == "read" and (floor_seq or last_run):
        # Silently ignoring them would hide a caller that meant to compact.
        raise ValueError("floor_seq and last_run apply only to mode='compaction'")


def _clip(source: Iterator[Row], lo: bytes | None, hi: bytes | None, snapshot_seq: int, reverse: bool) -> Iterator[Row]:
    """The rows of one sorted source inside ``[lo, hi)`` with ``seq <= snapshot_seq``."""
    if lo is None and hi is None and snapshot_seq == MAX_SEQ:
        return source  # nothing to clip: keep the source's own, often C-level, iterator
    return _clipped(source, lo, hi, snapshot_seq, reverse)


def _clipped(source: Iterator[Row], lo: bytes | None, hi: bytes | None, snapshot_seq: int,
             reverse: bool) -> Iterator[Row]:
    """Generator behind :func:`_clip`.

    Stops reading the source at the first row past the far bound (``hi``
    forward, ``lo`` in reverse): the source is sorted, so nothing after it can
    be in range, and for an SST that saves fetching blocks.
    """
    near, far = (hi, lo) if reverse else (lo, hi)
    for row in source:
        key = row[0]
        if near is not None and (key >= near if reverse else key < near):
            continue
        if far is not None and (key < far if reverse else key >= far):
            return
        if row[1] <= snapshot_seq:
            yield row


def _expired(row: Row, now_ms: int) -> bool:
    expire_at_ms = row[EXPIRE_AT_MS]
    return expire_at_ms is not None and expire_at_ms <= now_ms


def _read_rows(groups: Iterator[tuple[bytes, Iterator[Row]]], now_ms: int) -> Iterator[Row]:
    """Yield the newest version of each key, unless it is a tombstone or expired."""
    row_seq = _row_seq
    for _key, versions in groups:
        # max() returns the first of equal maxima: on a (key, seq) tie that is
        # the row from the lowest source index, since the merge is stable.
        newest = max(versions, key=row_seq)
        # A deleted or expired newest version hides the key entirely: older
        # versions are never resurrected.
        if newest[KIND] != DELETE and not _expired(newest, now_ms):
            yield newest


def _compaction_rows(
    groups: Iterator[tuple[bytes, Iterator[Row]]], floor_seq: int, last_run: bool, now_ms: int
) -> Iterator[Row]:
    """Yield, per key newest-first, the versions above the floor plus one boundary version."""
    row_seq = _row_seq
    for _key, versions in groups:
        previous_seq = -1
        # sorted() is stable even with reverse=True: equal seqs keep source order.
        for row in sorted(versions, key=row_seq, reverse=True):
            seq = row[SEQ]
            if seq == previous_seq:
                continue  # the same (key, seq) from an older source
            previous_seq = seq
            if seq > floor_seq:
                yield row  # a snapshot above the floor may still read it
                continue
            # The boundary version: what every snapshot at or below the floor
            # reads. Older versions are unreadable, so they are dropped. In the
            # bottom-most run, a boundary that hides the key can go as well:
            # nothing below it remains to be hidden.
            if not (last_run and (row[KIND] == DELETE or _expired(row, now_ms))):
                yield row
            break


def merge_rows(
    sources: Sequence[Iterable[Row]],
    *,
    snapshot_seq: int = MAX_SEQ,
    reverse: bool = False,
    start: bytes | None = None,
    end: bytes | None = None,
    prefix: bytes | None = None,
    now_ms: int | None = None,
    mode: str = "read",
    floor_seq: int = 0,
    last_run: bool = False,
) -> Iterator[Row]:
    """Merge sorted row sources, newest source first; see :func:`kvstore.iterators.merge.merge_rows`.

    Arguments are checked (and ``iter()`` called on each source) eagerly; the
    sources are read lazily, from the first ``next()``.

    Runtime complexity: ``O(n log k)`` for ``n`` rows in ``k`` sources.

    >>> old = [(b"a", 1, 1, b"x", None), (b"b", 2, 1, b"y", None)]
    >>> new = [(b"a", 3, 2, None, None)]
    >>> [row[0] for row in merge_rows([new, old])]
    [b'b']
    """
    _check_args(sources, snapshot_seq, reverse, {"start": start, "end": end, "prefix": prefix},
                now_ms, mode, floor_seq, last_run)
    lo, hi = merge_bounds(start, end, prefix)
    if now_ms is None:
        now_ms = int(time.time() * 1000)  # read once: one merge sees one clock
    iterators = []
    for index, source in enumerate(sources):
        try:
            iterators.append(iter(source))
        except TypeError:
            raise TypeError(f"sources[{index}] is not iterable: {type(source).__name__}") from None
    if lo is not None and hi is not None and lo >= hi:
        return iter(())  # an empty range: read nothing at all
    clipped = [_clip(it, lo, hi, snapshot_seq, reverse) for it in iterators]
    groups = groupby(heapq.merge(*clipped, key=_row_key, reverse=reverse), key=_row_key)
    if mode == "read":
        return _read_rows(groups, now_ms)
    return _compaction_rows(groups, floor_seq, last_run, now_ms)
