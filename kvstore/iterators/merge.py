"""The k-way merge iterator behind every scan and compaction: public entry point.

:func:`merge_rows` combines sorted row sources (the memtable first, then L0
SSTs newest-first, then sorted runs) into one stream, applying snapshot
visibility (mode ``"read"``) or the retention rule (mode ``"compaction"``).
DESIGN.md §5 places this between the per-file iterators and the store.

The compiled implementation (``cython_ext._merge``) is selected here, once, at
import time. The pure-Python twin :mod:`kvstore.iterators.merge_ref` is the
spec and the fallback; the two return identical rows (the tests run every case
against both), the compiled one about 8x faster (``benchmarks/merge_bench.py``).

Quick tour (rows are ``(key, seq, kind, value, expire_at_ms)``):

>>> from kvstore.format.rows import DELETE, PUT
>>> memtable = [(b"a", 7, DELETE, None, None), (b"c", 9, PUT, b"c9", None)]
>>> sst = [(b"a", 3, PUT, b"a3", None), (b"b", 4, PUT, b"b4", None), (b"c", 2, PUT, b"c2", None)]
>>> [row[3] for row in merge_rows([memtable, sst])]
[b'b4', b'c9']
>>> [row[3] for row in merge_rows([memtable, sst], snapshot_seq=5)]
[b'a3', b'b4', b'c2']
>>> [row[3] for row in merge_rows([memtable[::-1], sst[::-1]], reverse=True, start=b"b")]
[b'c9', b'b4']
>>> [row[:2] for row in merge_rows([memtable, sst], mode="compaction", floor_seq=8, last_run=True)]
[(b'b', 4), (b'c', 9), (b'c', 2)]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

from kvstore.format.rows import MAX_SEQ, Row
from kvstore.iterators import merge_ref

__all__ = ["IMPLEMENTATION", "merge_rows"]

_merge_impl: Callable[..., Iterator[Row]]
try:
    from cython_ext import _merge as _compiled
except ImportError as exc:  # a broken build; the tests simulate one
    warnings.warn(
        f"lakekv: compiled merge iterator unavailable ({exc}); using the pure-Python reference (~8x slower)",
        stacklevel=2,
    )
    _merge_impl, _implementation = merge_ref.merge_rows, "python"
else:
    _merge_impl, _implementation = _compiled.merge_rows, "cython"

IMPLEMENTATION: Final[str] = _implementation
"""Which implementation :func:`merge_rows` runs: ``"cython"`` or ``"python"``."""


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
    """Merge sorted row sources into one stream, newest version first within a key.

    Each source must be sorted in the merge direction: key ascending (key
    descending when ``reverse``), and within a key seq descending, without a
    repeated ``(key, seq)``. Rows outside the bounds or newer than
    ``snapshot_seq`` are dropped per source, before versions of a key are
    compared, so they never shadow a visible row; a source is not read past
    the first row beyond the far bound. Equal keys are ordered by seq, newest
    first; the same ``(key, seq)`` in several sources is kept once, from the
    lowest source index. The rows yielded are the sources' own tuples.

    Mode ``"read"`` yields one row per visible key: its newest version with
    ``seq <= snapshot_seq``, unless that version is a DELETE or expired
    (``expire_at_ms <= now_ms``), in which case the key is hidden entirely;
    older versions are never resurrected.

    Mode ``"compaction"`` (forward only) yields rows in storage order keeping,
    per key, every version with ``floor_seq < seq <= snapshot_seq`` and the
    newest version with ``seq <= floor_seq`` (the boundary version). With
    ``last_run``, a boundary version that is a DELETE or expired is dropped
    too; versions above the floor are always kept, tombstones included.

    Runtime complexity: ``O(n log k)`` for ``n`` rows in ``k`` sources.

    Args:
        sources: Row iterables, index 0 the newest (the memtable). Lists are
            indexed directly; anything else goes through ``iter()``.
        snapshot_seq: Rows with a larger seq are invisible. 0..MAX_SEQ.
        reverse: Merge in key-descending order (read mode only).
        start: Inclusive lower bound on the key.
        end: Exclusive upper bound on the key.
        prefix: Only keys starting with it; combines with ``start``/``end``.
        now_ms: The expiry clock in ms since the epoch; None reads the wall
            clock once, when this is called.
        mode: ``"read"`` or ``"compaction"``.
        floor_seq: Compaction only: the retention floor.
        last_run: Compaction only: the output is the bottom-most run.

    Returns:
        A lazy iterator of rows. Arguments are checked and ``iter()`` is
        called on each source now; the sources are read from the first
        ``next()``. It is not thread-safe; after raising it is exhausted.

    Raises:
        TypeError: An argument has the wrong type (the message names it), or
            a source is not iterable.
        ValueError: ``mode`` is unknown, a seq is outside ``0..MAX_SEQ``,
            ``reverse`` is combined with compaction, or ``floor_seq``/
            ``last_run`` are given in read mode.
    """
    return _merge_impl(
        sources,
        snapshot_seq=snapshot_seq,
        reverse=reverse,
        start=start,
        end=end,
        prefix=prefix,
        now_ms=now_ms,
        mode=mode,
        floor_seq=floor_seq,
        last_run=last_run,
    )
