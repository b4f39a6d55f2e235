"""The read path: point gets and scans over one set of layers at a snapshot seq.

Order of consultation, newest data first: memtable -> L0 SSTs (newest
first) -> sorted runs (newest first; within a run, the one SST whose key range
holds the key). A point get stops at the first row with ``seq <= snapshot``:
that row is the key's newest visible version, whatever its kind.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pyarrow as pa

from kvstore.format.block_view import compiled
from kvstore.format.rows import PUT, Row
from kvstore.iterators.merge import merge_rows
from kvstore.state import Layers, SortedRun

KV_SCHEMA = pa.schema([pa.field("key", pa.binary(), nullable=False), pa.field("value", pa.binary(), nullable=False)])


def now_ms() -> int:
    return int(time.time() * 1000)


def get_row_py(layers: Layers, key: bytes, snapshot_seq: int) -> Row | None:
    """Newest version of ``key`` with ``seq <= snapshot_seq`` across all layers.

    The pure-Python reference of ``cython_ext._pointget.get_row``, which
    :func:`get_row` runs when it is built (the tests compare the two).
    Requires: ``key`` validated by the caller.
    """
    row = layers.memtable.get(key, snapshot_seq)
    if row is not None:
        return row
    # SSTReader.get consults the key range and bloom filter itself (no I/O
    # when they rule the key out), so there is no separate may_contain here.
    for sst in layers.l0:
        row = sst.get(key, snapshot_seq)
        if row is not None:
            return row
    for run in layers.runs:
        found = run.find(key)
        if found is not None:
            row = found.get(key, snapshot_seq)
            if row is not None:
                return row
    return None


def get_value_py(layers: Layers, key: bytes, snapshot_seq: int, clock_ms: int | None = None) -> bytes | None:
    """What a reader at ``snapshot_seq`` and ``clock_ms`` (None: now) sees for ``key``.

    The reference of ``cython_ext._pointget.get_value`` (:func:`get_value`).
    Requires: ``key`` validated by the caller.
    """
    return visible_value(get_row_py(layers, key, snapshot_seq), clock_ms)


class StoreGetterPy:
    """``Store.get`` as one call: closed check, key check, then the lookup.

    The pure-Python twin of ``cython_ext._pointget.StoreGetter`` (same
    constructor and :meth:`get`); :data:`StoreGetter` is the one in use.

    Args:
        state: the handle's ``EngineState`` (read: ``head``, then ``layers``).
        check_key: validates (or converts) a key that is not a non-empty
            ``bytes`` of at most ``max_key_bytes``.
        max_key_bytes: the key size limit.
        raise_closed: called (and must raise) once :attr:`closed` is set.
    """

    __slots__ = ("_beacon", "_check_key", "_lease_reads", "_max_key_bytes", "_raise_closed", "_state", "_sync",
                 "_sync_for", "closed")

    def __init__(self, state: Any, check_key: Callable[[object], bytes], max_key_bytes: int,
                 raise_closed: Callable[[], None]) -> None:
        self._state = state
        self._check_key = check_key
        self._max_key_bytes = max_key_bytes
        self._raise_closed = raise_closed
        self._sync: Callable[[], None] | None = None
        self._beacon: Any = None
        self._lease_reads: Any = None
        self._sync_for: Callable[[str], None] | None = None
        self.closed = False

    def set_barrier(self, beacon: Any, sync: Callable[[], None] | None) -> None:
        """Call ``sync()`` before each get, unless ``beacon`` (a ``HeadBeacon``,
        or None: always call) shows no version newer than the head; ``sync``
        None: no barrier."""
        self._sync = sync
        self._beacon = beacon

    def bind_store(self, lease_reads: Any, sync_for: Callable[[str], None]) -> None:
        """Make :meth:`read` the whole of ``Store.get``: ``lease_reads`` is the
        handle's ``LeaseReads``, ``sync_for`` its ``Store._sync``."""
        self._lease_reads = lease_reads
        self._sync_for = sync_for

    def read(self, key: object, consistency: str | None = None) -> bytes | None:
        """``Store.get(key, consistency)``, after :meth:`bind_store`."""
        if consistency is None:
            value = self._get(key, True)
        else:
            if consistency != "serializable":
                self._sync_for(consistency)  # type: ignore[misc]
            value = self._get(key, False)
        if value is None:
            return None
        seen, state = self._lease_reads.seen, self._state
        if seen[0] == state.head[1] and not seen[1]:
            return value
        return self._lease_reads.value(key, value, state.layers, state.head[1])  # type: ignore[no-any-return]

    def get(self, key: object) -> bytes | None:
        return self._get(key, False)

    def get_synced(self, key: object) -> bytes | None:
        return self._get(key, True)

    def _get(self, key: object, synced: bool) -> bytes | None:
        if self.closed:
            self._raise_closed()
            raise RuntimeError("raise_closed returned")
        if type(key) is not bytes or not key or len(key) > self._max_key_bytes:
            key = self._check_key(key)
        if synced and self._sync is not None and (self._beacon is None or self._beacon.read() > self._state.head[0]):
            self._sync()
        seq = self._state.head[1]  # head first: layers read after it hold every row up to seq (Store._view)
        return get_value_py(self._state.layers, key, seq)


# One place picks the point-get implementation (see kvstore.format.block_view).
get_row = get_row_py if compiled is None else compiled.get_row
get_value = get_value_py if compiled is None else compiled.get_value
StoreGetter = StoreGetterPy if compiled is None else compiled.StoreGetter


def get_row_traced(layers: Layers, key: bytes, snapshot_seq: int) -> tuple[Row | None, int, int]:
    """:func:`get_row` that also counts SSTs: ``(row, consulted, read)``.

    ``consulted`` counts the SSTs whose key range and bloom filter were
    checked, ``read`` those that then cost a block read. Kept apart from
    :func:`get_row` so the hot path carries no counters; benchmarks and
    tests use it to measure read amplification.
    """
    row = layers.memtable.get(key, snapshot_seq)
    if row is not None:
        return row, 0, 0
    consulted = read = 0
    candidates = [*layers.l0, *(sst for sst in (run.find(key) for run in layers.runs) if sst is not None)]
    for sst in candidates:
        consulted += 1
        if sst.may_contain(key):
            read += 1
            row = sst.get(key, snapshot_seq)
            if row is not None:
                return row, consulted, read
    return None, consulted, read


def visible_value(row: Row | None, clock_ms: int | None = None) -> bytes | None:
    """The value a reader sees for ``row``: None for a delete, an expired row or no row."""
    if row is None or row[2] != PUT:
        return None
    expire = row[4]
    if expire is not None and expire <= (clock_ms if clock_ms is not None else now_ms()):
        return None
    return row[3]


def scan_rows(
    layers: Layers,
    snapshot_seq: int,
    start: bytes | None = None,
    end: bytes | None = None,
    reverse: bool = False,
) -> Iterator[Row]:
    """Visible rows (one per live key) in ``[start, end)``, in key order."""
    sources: list[Iterator[Row]] = [layers.memtable.iter_rows(start, end, reverse)]
    sources.extend(sst.iter(start, end, snapshot_seq, reverse) for sst in layers.l0)
    for run in layers.runs:
        sources.append(_run_iter(run, start, end, snapshot_seq, reverse))
    return merge_rows(sources, snapshot_seq=snapshot_seq, reverse=reverse, start=start, end=end, now_ms=now_ms())


def _run_iter(run: SortedRun, start: bytes | None, end: bytes | None, snapshot_seq: int, reverse: bool) -> Iterator[Row]:
    # SSTs in a run are disjoint, so concatenating them (lazily, only those
    # overlapping the bounds) keeps the run's order.
    ssts = run.overlapping(start, end)
    for sst in reversed(ssts) if reverse else ssts:
        yield from sst.iter(start, end, snapshot_seq, reverse)


def rows_to_kv_batches(rows: Iterator[Row], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Group visible rows into Arrow batches of ``(key, value)``."""
    keys: list[bytes] = []
    values: list[bytes | None] = []
    for row in rows:
        keys.append(row[0])
        values.append(row[3])
        if len(keys) >= batch_rows:
            yield pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary())], schema=KV_SCHEMA)
            keys, values = [], []
    if keys:
        yield pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary())], schema=KV_SCHEMA)
