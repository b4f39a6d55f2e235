"""Compaction execution: merge the inputs of a task into a new run of SSTs.

I/O lives here; the decision of *what* to merge is
:mod:`kvstore.compaction.planner`'s, and installing the result is
:mod:`kvstore.compaction.install`'s.

Inputs are read front to back through :class:`_Prefetcher`, which serves the
SST reader's one-block range reads out of large sequential range GETs: a
compaction reads whole files, and on object storage one 8 MiB GET is far
cheaper than 128 small ones. Blocks bypass the block cache, so a compaction
does not evict what point reads need.

Rows go through the compiled merge iterator in compaction mode (retention
floor, last-run tombstone dropping) and are cut into SSTs of about
``target_bytes``, only at key boundaries: the SSTs of one run must have
disjoint key ranges for :class:`~kvstore.state.SortedRun` to find a key in one
binary search.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from kvstore.compaction.planner import CompactionTask
from kvstore.errors import CompactionAbortedError, StoreError
from kvstore.format.names import new_sst_path
from kvstore.format.rows import ROW_OVERHEAD_BYTES, Row
from kvstore.format.sst import SSTInfo, SSTReader, write_sst
from kvstore.format.sst_format import DEFAULT_SST_COMPRESSION
from kvstore.format.tree import SSTDict
from kvstore.iterators.merge import merge_rows
from kvstore.objstore.base import ObjectMeta, ObjectStore

log = logging.getLogger(__name__)

# Sequential read size for compaction inputs: big enough that per-request
# latency on S3 (~20 ms) is small against transfer time, small enough that
# holding one chunk per input costs little memory.
PREFETCH_BYTES: Final = 8 * 1024 * 1024
# Estimated encoded bytes per row besides key and value (see sst_writer).



@dataclass(frozen=True)
class CompactionOutput:
    """What a compaction wrote.

    Attributes:
        ssts: the new run, in key order (empty when every row was dropped).
        bytes_read: total size of the input SSTs.
        bytes_written: total size of the new SSTs.
        rows_written: rows in the new SSTs.
        first_write_at: ``time.monotonic()`` just before the first output
            was stored: the outputs' age (for GC's grace period) counts from
            there. None when there are no outputs.
    """

    ssts: tuple[SSTInfo, ...]
    bytes_read: int
    bytes_written: int
    rows_written: int
    first_write_at: float | None


class _Prefetcher:
    """Serves range reads of one object from large sequential chunks.

    Quacks like the read half of an ObjectStore for :meth:`SSTReader.open`.
    Not thread-safe: one per input file.
    """

    def __init__(self, store: ObjectStore, size: int, chunk_bytes: int = PREFETCH_BYTES) -> None:
        self._store = store
        self.url = store.url
        self._size = size
        self._chunk = chunk_bytes
        self._start = 0
        self._data = b""

    def get_range(self, path: str, start: int, end: int) -> bytes:
        if self._start <= start and end <= self._start + len(self._data):
            return self._data[start - self._start : end - self._start]
        if end - start >= self._chunk:
            return self._store.get_range(path, start, end)
        self._start = start
        self._data = self._store.get_range(path, start, min(self._size, max(end, start + self._chunk)))
        return self._data[: end - start]

    def get(self, path: str) -> bytes:
        return self._store.get(path)

    def head(self, path: str) -> ObjectMeta:
        return self._store.head(path)


def _open_sequential(store: ObjectStore, info: SSTDict) -> SSTReader:
    sst = SSTInfo.from_dict(info)
    source = _Prefetcher(store, sst.size)
    return SSTReader.open(source, sst.path, cache=None, size=sst.size, tail_size=sst.tail_size)  # type: ignore[arg-type]


def _run_rows(store: ObjectStore, run: Iterable[SSTDict]) -> Iterator[Row]:
    # The SSTs of a run are disjoint and in key order: concatenating them,
    # opening each only when reached, keeps one prefetch buffer per run.
    for info in run:
        yield from _open_sequential(store, info).iter()


def merged_rows(store: ObjectStore, task: CompactionTask, floor_seq: int, now_ms: int | None = None) -> Iterator[Row]:
    """The task's inputs merged in storage order under the retention rule."""
    sources: list[Iterator[Row]] = [_open_sequential(store, info).iter() for info in task.l0]
    sources.extend(_run_rows(store, run) for run in task.runs)
    return merge_rows(sources, mode="compaction", floor_seq=floor_seq, last_run=task.last_run, now_ms=now_ms)


class _RowCutter:
    """Hands out a row stream in pieces of about ``budget`` bytes, cut between keys."""

    def __init__(self, rows: Iterator[Row], budget: int) -> None:
        self._rows = rows
        self._budget = budget
        self._next: Row | None = next(rows, None)

    def exhausted(self) -> bool:
        return self._next is None

    def piece(self) -> Iterator[Row]:
        used = 0
        row = self._next
        rows = self._rows
        while row is not None:
            yield row
            used += len(row[0]) + (len(row[3]) if row[3] is not None else 0) + ROW_OVERHEAD_BYTES
            following = next(rows, None)
            if used >= self._budget and (following is None or following[0] != row[0]):
                self._next = following
                return
            row = following
        self._next = None


def write_run(
    store: ObjectStore,
    rows: Iterator[Row],
    target_bytes: int,
    should_stop: Callable[[], bool] = lambda: False,
    started: list[float] | None = None,
    compression: str = DEFAULT_SST_COMPRESSION,
) -> list[SSTInfo]:
    """Write ``rows`` (storage order) as SSTs of about ``target_bytes`` each.

    On any failure, or when ``should_stop`` returns True between files, the
    SSTs written so far are deleted (best effort: GC removes what remains).

    Args:
        started: if given, ``time.monotonic()`` before the first store call
            is appended to it.
        compression: the SSTs' block codec (the store's ``sst_compression``).

    Raises:
        CompactionAbortedError: ``should_stop`` asked to stop.
    """
    cutter = _RowCutter(rows, target_bytes)
    written: list[SSTInfo] = []
    try:
        while not cutter.exhausted():
            if should_stop():
                raise CompactionAbortedError("compaction stopped: the store is closing")
            piece = cutter.piece()
            # The SST is encoded while `piece` is consumed, then stored in one
            # PUT: its storage timestamp is at least this late.
            if started is not None and not started:
                started.append(time.monotonic())
            written.append(write_sst(store, new_sst_path(), piece, compression=compression))
    except BaseException:
        delete_quietly(store, [info.path for info in written])
        raise
    return written


def run_compaction(
    store: ObjectStore,
    task: CompactionTask,
    floor_seq: int,
    target_bytes: int,
    should_stop: Callable[[], bool] = lambda: False,
    compression: str = DEFAULT_SST_COMPRESSION,
) -> CompactionOutput:
    """Merge ``task``'s inputs at ``floor_seq`` into a new run (SSTs with ``compression``); nothing is committed.

    Raises:
        FileNotFoundError: an input vanished (another compaction won and GC ran).
        CompactionAbortedError: ``should_stop`` asked to stop.
        CorruptionError: an input failed its checksums.
    """
    started: list[float] = []
    ssts = write_run(store, merged_rows(store, task, floor_seq), target_bytes, should_stop, started, compression)
    return CompactionOutput(
        ssts=tuple(ssts),
        bytes_read=task.input_bytes(),
        bytes_written=sum(info.size for info in ssts),
        rows_written=sum(info.row_count for info in ssts),
        first_write_at=started[0] if ssts else None,
    )


def delete_quietly(store: ObjectStore, paths: Iterable[str]) -> None:
    """Delete ``paths``; a failure is logged, not raised (GC collects leftovers)."""
    for path in paths:
        try:
            store.delete(path)
        except StoreError as exc:
            log.warning("could not delete %s (GC will): %s", path, exc)
