"""The rows a flush writes, as ``ROW_SCHEMA`` record batches built from the memtable's apply log.

A flush of the versions with seqs in ``(low, high]`` writes the memtable
rows of that range in storage order (key ascending, seq descending),
keeping per key every version above the retention floor and the newest at
or below it (the boundary version: L0 is never the last run, so it stays
even when it is a tombstone or expired). That is what the merge iterator in
compaction mode (:func:`kvstore.iterators.merge.merge_rows`) keeps of the
same rows, with ``snapshot_seq=high``.

:func:`flush_batches` builds the batches in C (``cython_ext._memtable``):
one pass takes the range's rows out of the applied versions, a natural merge
sort without the GIL orders them (the versions are sorted runs already), and
the Arrow buffers are filled straight from the row tuples. No Python
object (tuple, int, batch of rows) is made per row on the way.
:func:`flush_batches_py` is the pure-Python twin and the spec; the tests
compare the two batch by batch on random memtables.

Why: a bulk-load flush used to merge the versions' row tuples in the merge
iterator and hand them to the SST writer, which converted them to Arrow
again: ~1.3 us a row of GIL-held Python beside a committer that needs the
GIL (``benchmarks/bulk_bench.py --only flush``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from itertools import chain, islice
from typing import Any, Final

import pyarrow as pa

from kvstore.format.rows import ROW_SCHEMA, Row, rows_to_batch

# Rows per batch handed to the SST writer: large enough that the writer's
# per-batch checks vanish, small enough that filling one (holding the GIL)
# takes a few milliseconds.
BATCH_ROWS: Final = 16384

# 32-bit Arrow offsets: a batch's keys, and its values, stay under 2 GiB.
BATCH_BYTES: Final = 2**31 - 1

FlushBatches = Callable[[list[list[Row]], int, int, int], Iterator[pa.RecordBatch]]


def flush_rows_py(versions: list[list[Row]], low: int, high: int, floor: int) -> list[Row]:
    """The rows of ``versions`` a flush writes, in storage order (see the module docstring).

    ``versions`` are the applied versions' row lists in apply order. Of rows
    repeating a ``(key, seq)`` (a version applied twice) the last applied is
    kept, as the memtable's key index keeps it.
    """
    rows = [row for rows in versions for row in rows if low < row[1] <= high]
    rows.sort(key=_storage_order)  # stable: repeats of a (key, seq) stay in apply order
    kept: list[Row] = []
    boundary_of: bytes | None = None  # the key whose boundary version is kept
    for row, following in zip(rows, chain(islice(rows, 1, None), (None,))):
        if following is not None and following[0] == row[0] and following[1] == row[1]:
            continue  # a later apply of the same (key, seq) follows
        if row[1] > floor:
            kept.append(row)
        elif row[0] != boundary_of:
            kept.append(row)
            boundary_of = row[0]
    return kept


def flush_batches_py(versions: list[list[Row]], low: int, high: int, floor: int) -> Iterator[pa.RecordBatch]:
    """:func:`flush_rows_py` cut into batches: the pure-Python twin of :func:`flush_batches`.

    A batch holds up to :data:`BATCH_ROWS` rows, fewer when its keys, or its
    values, would pass :data:`BATCH_BYTES` (a row larger than that makes its
    own batch).
    """
    rows = flush_rows_py(versions, low, high, floor)
    start = 0
    while start < len(rows):
        end, key_bytes, value_bytes = start, 0, 0
        while end < len(rows) and end - start < BATCH_ROWS:
            key_size = len(rows[end][0])
            value = rows[end][3]
            value_size = 0 if value is None else len(value)
            if end > start and (key_bytes + key_size > BATCH_BYTES or value_bytes + value_size > BATCH_BYTES):
                break
            key_bytes += key_size
            value_bytes += value_size
            end += 1
        yield rows_to_batch(rows[start:end])
        start = end


def _storage_order(row: Row) -> tuple[bytes, int]:
    return (row[0], -row[1])


_flush_cursor: Callable[..., Any] | None
try:
    from cython_ext._memtable import flush_cursor as _flush_cursor  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled flush batches unavailable ({exc}); using the pure-Python twin", stacklevel=2)
    _flush_cursor = None


def flush_batches(versions: list[list[Row]], low: int, high: int, floor: int) -> Iterator[pa.RecordBatch]:
    """The batches :func:`flush_batches_py` gives, built in C.

    Rows of a form the C code does not take (anything but a 5-tuple of a
    bytes key, an int seq, an int kind in 0..255, a bytes-or-None value and
    an int64-or-None expiry) send the whole call to the twin.

    Requires: ``low``, ``high`` and ``floor`` in ``0..MAX_SEQ``.
    """
    cursor = None if _flush_cursor is None else _flush_cursor(versions, low, high, floor)
    if cursor is None:
        yield from flush_batches_py(versions, low, high, floor)
        return
    while (arrays := cursor.take(BATCH_ROWS, BATCH_BYTES)) is not None:
        yield pa.RecordBatch.from_arrays(list(arrays), schema=ROW_SCHEMA)


IMPLEMENTATION: Final[str] = "python" if _flush_cursor is None else "cython"
