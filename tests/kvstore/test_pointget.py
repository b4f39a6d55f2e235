"""The compiled point get (cython_ext._pointget) against its pure-Python twin
(kvstore.reader.get_row_py, SSTReader with implementation="python") and a
model, on random layered stores: memtable, L0 SSTs and a sorted run, keys with
many versions straddling small blocks, tombstones, TTLs and every snapshot."""

from __future__ import annotations

import bisect
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layered_store import ABSENT, KEY_POOL, NOW_MS, build_layers, model_row, rows_of, storage_order, versions

import kvstore
from kvstore.cache import BlockCache
from kvstore.format.block_view import IMPLEMENTATION, NEXT_BLOCK, NOT_HERE, PyBlockView, compiled
from kvstore.format.rows import DELETE, MAX_SEQ, PUT
from kvstore.format.sst import SSTReader, write_sst
from kvstore.objstore.memory import MemoryStore
from kvstore.batch import check_key
from kvstore.errors import StoreClosedError
from kvstore.freshness import HeadBeacon
from kvstore.options import MAX_KEY_BYTES
from kvstore.reader import StoreGetterPy, get_row, get_row_py, get_value, get_value_py, visible_value

pytestmark = pytest.mark.skipif(compiled is None, reason="cython_ext._pointget is not built")

@settings(max_examples=150, deadline=None)
@given(
    history=versions,
    cut_fractions=st.lists(st.floats(0, 1), max_size=4),
    run_files=st.integers(1, 4),
    block_size=st.sampled_from([1, 64, 200, 4096]),
    cache_bytes=st.sampled_from([None, 0, 3000, 1 << 20]),
)
def test_compiled_get_matches_reference_and_model(
    history: list[dict], cut_fractions: list[float], run_files: int, block_size: int, cache_bytes: int | None,
) -> None:
    cuts = sorted({int(f * len(history)) for f in cut_fractions}) or [len(history)]
    fast = build_layers(history, cuts, run_files, block_size, cache_bytes, "cython")
    slow = build_layers(history, cuts, run_files, block_size, cache_bytes, "python")
    rows = rows_of(history)
    snapshots = sorted({0, 1, len(history) // 2, len(history), len(history) + 1, MAX_SEQ,
                        *range(0, len(history) + 2, max(1, len(history) // 5))})
    for key, snapshot in itertools.product(KEY_POOL + ABSENT, snapshots):
        expected = model_row(rows, key, snapshot)
        assert get_row(fast, key, snapshot) == expected
        assert get_row_py(slow, key, snapshot) == expected
        value = visible_value(expected, NOW_MS)
        assert get_value(fast, key, snapshot, NOW_MS) == value
        assert get_value_py(slow, key, snapshot, NOW_MS) == value
    # Each file on its own, both implementations, and its scans both ways.
    fast_files = [*fast.l0, *(s for r in fast.runs for s in r.ssts)]
    slow_files = [*slow.l0, *(s for r in slow.runs for s in r.ssts)]
    for fast_sst, slow_sst in zip(fast_files, slow_files, strict=True):
        for key, snapshot in itertools.product(KEY_POOL + ABSENT, snapshots):
            assert fast_sst.get(key, snapshot) == slow_sst.get(key, snapshot)
        for start, end in [(None, None), (b"ab", b"b\x00"), (b"b", None), (None, b"abc")]:
            for snapshot in snapshots:
                for reverse in (False, True):
                    expected_rows = list(slow_sst.iter(start, end, snapshot, reverse))
                    assert list(fast_sst.iter(start, end, snapshot, reverse)) == expected_rows
                    model = [r for r in storage_order(list(slow_sst.iter()))
                             if (start is None or r[0] >= start) and (end is None or r[0] < end) and r[1] <= snapshot]
                    if reverse:  # key descending, but each key's versions still newest first
                        groups = [list(g) for _key, g in itertools.groupby(model, key=lambda r: r[0])]
                        model = [r for group in reversed(groups) for r in group]
                    assert expected_rows == model


class _State:
    """The two attributes of EngineState a StoreGetter reads."""

    def __init__(self, layers: object, last_seq: int) -> None:
        self.layers = layers
        self.head = (7, last_seq)


def _raise_closed() -> None:
    raise StoreClosedError("closed")


@settings(max_examples=60, deadline=None)
@given(history=versions, fractions=st.lists(st.floats(0, 1), min_size=1, max_size=3),
       block_size=st.sampled_from([1, 64, 4096]))
def test_store_getter_matches_reference_and_model(history: list[dict], fractions: list[float], block_size: int) -> None:
    """``Store.get``'s one-call path (``StoreGetter``) and its Python twin
    answer like the model at the head seq, for every key, with the wall clock
    deciding expiry (the model's expiries all lie in the past of it)."""
    cuts = sorted({int(f * len(history)) for f in fractions})
    rows = rows_of(history)
    getters = [compiled.StoreGetter(_State(build_layers(history, cuts, 2, block_size, 1 << 20, "cython"), seq),
                                    check_key, MAX_KEY_BYTES, _raise_closed)
               for seq in (len(history), len(history) // 2)]
    twins = [StoreGetterPy(_State(build_layers(history, cuts, 2, block_size, 1 << 20, "python"), seq),
                           check_key, MAX_KEY_BYTES, _raise_closed)
             for seq in (len(history), len(history) // 2)]
    for seq, fast, slow in zip((len(history), len(history) // 2), getters, twins, strict=True):
        for key in KEY_POOL + ABSENT:
            expected = visible_value(model_row(rows, key, seq))
            assert fast.get(key) == slow.get(key) == expected
            assert fast.get(bytearray(key)) == slow.get(memoryview(key)) == expected


@pytest.mark.parametrize("implementation", ["cython", "python"])
def test_store_getter_checks_keys_and_closed(implementation: str) -> None:
    make = compiled.StoreGetter if implementation == "cython" else StoreGetterPy
    layers = build_layers([{b"a": (PUT, b"1", None)}], [1], 1, 64, None, implementation)
    getter = make(_State(layers, 1), check_key, MAX_KEY_BYTES, _raise_closed)
    assert getter.get(b"a") == b"1" and getter.get(b"b") is None
    with pytest.raises(TypeError, match="key must be bytes, not str"):
        getter.get("a")
    with pytest.raises(ValueError, match="must not be empty"):
        getter.get(b"")
    with pytest.raises(ValueError, match="the limit is"):
        getter.get(b"x" * (MAX_KEY_BYTES + 1))
    getter.closed = True
    with pytest.raises(StoreClosedError):
        getter.get(b"a")
    quiet = make(_State(layers, 1), check_key, MAX_KEY_BYTES, lambda: None)
    quiet.closed = True
    with pytest.raises(RuntimeError, match="raise_closed returned"):
        quiet.get(b"a")


@pytest.mark.parametrize("implementation", ["cython", "python"])
def test_store_getter_barrier_syncs_only_when_the_beacon_moved(implementation: str, tmp_path: Path) -> None:
    """``get_synced`` calls the barrier's ``sync`` before reading exactly when
    the beacon shows a version past the head (or always, with no beacon), and
    reads the head ``sync`` left; ``get`` never syncs. A closed getter lets go
    of the beacon's mapping, so the beacon can close."""
    make = compiled.StoreGetter if implementation == "cython" else StoreGetterPy
    old = build_layers([{b"a": (PUT, b"1", None)}, {b"a": (PUT, b"2", None)}], [2], 1, 64, None, implementation)
    state = _State(old, 1)  # version 7, seq 1: the first value
    getter = make(state, check_key, MAX_KEY_BYTES, _raise_closed)
    syncs: list[int] = []

    def sync() -> None:  # what catching up does: a newer head
        syncs.append(beacon.read())
        state.head = (beacon.read(), 2)

    beacon = HeadBeacon(tmp_path / "beacon")
    beacon.raise_to(7)
    getter.set_barrier(beacon, sync)
    assert getter.get_synced(b"a") == b"1" and syncs == []  # the beacon has not passed the head
    beacon.raise_to(9)
    assert getter.get(b"a") == b"1" and syncs == []  # no barrier on get
    assert getter.get_synced(b"a") == b"2" and syncs == [9]
    assert getter.get_synced(b"a") == b"2" and syncs == [9]
    getter.set_barrier(None, sync)  # no beacon: always sync
    getter.get_synced(b"a")
    getter.get_synced(b"a")
    assert syncs == [9, 9, 9]
    getter.set_barrier(beacon, sync)
    getter.closed = True
    beacon.close()  # no BufferError: the closed getter holds no view of the mapping
    with pytest.raises(StoreClosedError):
        getter.get_synced(b"a")
    assert syncs == [9, 9, 9]
    unsynced = make(_State(old, 1), check_key, MAX_KEY_BYTES, _raise_closed)
    unsynced.set_barrier(None, None)
    assert unsynced.get_synced(b"a") == b"1"


def test_a_store_reads_another_handles_commit_through_the_compiled_barrier(tmp_path: Path) -> None:
    """Default (linearizable) gets on a local directory see another handle's
    commit at once, with no follower; "serializable" gets keep the view."""
    with kvstore.open(str(tmp_path), poll_interval_s=0) as reader, kvstore.open(str(tmp_path), poll_interval_s=0) as writer:
        assert reader.get(b"k") is None
        writer.put(b"k", b"1")
        assert reader.get(b"k", consistency="serializable") is None
        assert reader.get(b"k") == b"1"
        writer.put(b"k", b"2")
        assert reader.get(b"k") == b"2"
    with pytest.raises(StoreClosedError):
        reader.get(b"k")


def _first_block(store: MemoryStore, path: str, size: int) -> Any:
    """Block 0 of the SST at ``path``, as its reader loads it (the block of its first segment)."""
    block, lo, _ = next(SSTReader.open(store, path, size=size).iter_segments())
    assert lo == 0
    return block


def test_block_views_agree_row_by_row() -> None:
    store = MemoryStore()
    rows = storage_order([(b"k%03d" % (i // 3), 200 - i, PUT if i % 4 else DELETE,
                            None if not i % 4 else b"v" * (i % 7), None if i % 5 else i) for i in range(120)])
    info = write_sst(store, "sst/x.sst", rows, block_size=10_000_000)
    batch = _first_block(store, "sst/x.sst", info.size).batch
    fast, slow = compiled.BlockView(batch, 1), PyBlockView(batch, 1)
    assert fast.rows(0, fast.num_rows) == slow.rows(0, slow.num_rows) == rows
    for i in range(len(rows)):
        assert fast.row(i) == slow.row(i) == rows[i]
        assert fast.key_at(i) == slow.key_at(i)
        assert fast.visible_value(i, 50) == slow.visible_value(i, 50) == visible_value(rows[i], 50)
    for key in [b"", b"k", b"k000", b"k013", b"k039", b"k04", b"z"]:
        assert fast.lower_bound(key) == slow.lower_bound(key)
        for snapshot in (0, 80, 150, 199, MAX_SEQ):
            assert fast.find(key, snapshot) == slow.find(key, snapshot)
    assert fast.find(b"z", MAX_SEQ) == NEXT_BLOCK and fast.find(b"k", MAX_SEQ) == NOT_HERE
    assert fast.find(b"k039", 0) == NEXT_BLOCK  # the last key's versions may continue in the next block
    with pytest.raises(IndexError):
        fast.row(len(rows))
    with pytest.raises(IndexError):
        fast.rows(5, 4)
    with pytest.raises(IndexError):
        slow.lower_bound(b"a", 0, len(rows) + 1)


_tails = st.binary(max_size=12).map(lambda b: b.replace(b"\x01", b"\x00"))  # many zero bytes: padding ties


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.sampled_from([b"", b"k", b"0000000000", b"\x00\x00"]),
    tails=st.lists(_tails, min_size=1, max_size=60),
    versions_of=st.lists(st.integers(1, 3), min_size=60, max_size=60),
    probes=st.lists(_tails, max_size=20),
    bounds=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), max_size=5),
)
def test_lower_bound_on_key_heads_is_bisect_left(
    prefix: bytes, tails: list[bytes], versions_of: list[int], probes: list[bytes], bounds: list[tuple[int, int]],
) -> None:
    """The compiled search (in a block, and over a footer's block index) goes
    through the keys' shared prefix and 8-byte key heads first; it must still be ``bisect_left`` over the keys, for keys
    shorter than the prefix, keys that are prefixes of others, trailing zero
    bytes (which pad like a shorter key) and several versions per key."""
    keys = sorted({prefix + tail for tail in tails if prefix + tail})
    if not keys:
        return
    rows = [(key, seq, PUT, b"v", None) for key, count in zip(keys, versions_of) for seq in range(count, 0, -1)]
    store = MemoryStore()
    info = write_sst(store, "sst/h.sst", rows, block_size=10_000_000)
    batch = _first_block(store, "sst/h.sst", info.size).batch
    fast = compiled.BlockView(batch, 1)
    column = [row[0] for row in rows]
    for probe in [*probes, *(prefix + p for p in probes), prefix[:1], prefix + b"\xff", *keys]:
        if not probe:
            continue
        assert fast.lower_bound(probe) == bisect.bisect_left(column, probe)
        assert compiled.tuple_lower_bound(tuple(column), probe) == bisect.bisect_left(column, probe)
        for lo, hi in bounds:
            lo, hi = min(lo, hi, len(column)), min(max(lo, hi), len(column))
            assert fast.lower_bound(probe, lo, hi) == bisect.bisect_left(column, probe, lo, hi)
        for snapshot in (0, 1, 2, MAX_SEQ):
            assert fast.find(probe, snapshot) == PyBlockView(batch, 1).find(probe, snapshot)


def test_sliced_batch_is_read_at_its_offset() -> None:
    store = MemoryStore()
    rows = [(b"k%02d" % i, 1, PUT, b"v%d" % i, None if i % 2 else 7) for i in range(20)]
    info = write_sst(store, "sst/y.sst", rows)
    batch = _first_block(store, "sst/y.sst", info.size).batch.slice(5, 10)
    fast, slow = compiled.BlockView(batch, 1), PyBlockView(batch, 1)
    assert fast.rows(0, 10) == slow.rows(0, 10) == rows[5:15]
    assert fast.find(b"k07", 1) == slow.find(b"k07", 1) == 2


def test_nulls_in_key_columns_are_rejected() -> None:
    import pyarrow as pa

    from kvstore.format.rows import ROW_SCHEMA

    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a", None], pa.binary()), pa.array([1, 2], pa.uint64()), pa.array([1, 1], pa.uint8()),
         pa.array([b"x", b"y"], pa.binary()), pa.array([None, None], pa.int64())], schema=ROW_SCHEMA)
    for view in (compiled.BlockView, PyBlockView):
        with pytest.raises(ValueError, match="must not hold nulls"):
            view(batch, 1)


def test_implementation_is_the_compiled_one_when_built() -> None:
    assert IMPLEMENTATION == "cython"
    assert get_row is compiled.get_row
    with pytest.raises(ValueError, match="implementation"):
        SSTReader.open(MemoryStore(), "sst/none.sst", implementation="rust", size=100)


def test_cache_charges_uncompressed_blocks_their_size_on_disk() -> None:
    """A cached uncompressed block is the Arrow batch over the bytes as read:
    charged about its on-disk size, and decoding it allocates no Arrow memory
    (zero-copy). Compressed blocks: tests/kvstore/format/test_sst_compression.py."""
    import pyarrow as pa

    from kvstore.format.block_view import BLOCK_OVERHEAD_BYTES, KEY_HEAD_BYTES

    store = MemoryStore()
    rows = [(b"%016d" % i, 1, PUT, bytes([i % 251]) * 100, None) for i in range(20_000)]
    info = write_sst(store, "sst/z.sst", rows, compression="none")
    cache = BlockCache(64 << 20)
    reader = SSTReader.open(store, "sst/z.sst", cache=cache, size=info.size, tail_size=info.tail_size)
    allocated = pa.total_allocated_bytes()
    for key in reader.meta.first_keys:
        assert reader.get(key) == rows[int(key)]
    assert pa.total_allocated_bytes() == allocated
    stats = cache.stats()
    assert stats.entries == info.block_count + 1  # every block, plus the footer
    data_bytes = info.size - info.tail_size
    block_bytes = stats.bytes - info.tail_size * 2  # the footer is charged twice its tail
    index_bytes = KEY_HEAD_BYTES * len(rows)  # the compiled view's key heads
    assert data_bytes <= block_bytes <= data_bytes + index_bytes + info.block_count * BLOCK_OVERHEAD_BYTES + 1024


def test_a_block_evicted_or_cleared_from_the_cache_is_read_again() -> None:
    """A get remembers where the cache holds its block; once the block has
    left the cache (cleared, or evicted by other entries) that is a miss and
    the block is read again, never a stale or wrong block."""
    store = MemoryStore()
    rows = [(b"%08d" % i, 1, PUT, b"v%d" % i, None) for i in range(400)]
    info = write_sst(store, "sst/e.sst", rows, block_size=512)
    cache = BlockCache(1 << 20)
    reader = SSTReader.open(store, "sst/e.sst", cache=cache, size=info.size, tail_size=info.tail_size)
    assert info.block_count > 4
    key = b"%08d" % 123

    def lookups() -> tuple[int, int]:
        stats = cache.stats()
        return stats.hits, stats.misses

    assert reader.get(key) == rows[123]
    before = lookups()
    assert reader.get(key) == rows[123]
    assert lookups() == (before[0] + 1, before[1])  # found again, hashed or not: one hit
    cache.clear()
    assert reader.get(key) == rows[123]
    assert lookups() == (before[0] + 1, before[1] + 1)  # a miss, then read again
    assert reader.get(key) == rows[123]
    # Evicted: other entries fill the budget; the block's slot may be reused by another block.
    for i in range(40):
        cache.put(("filler", i), b"x", (1 << 20) // 20)
    assert cache.stats().evictions > 0
    for i in (123, 0, 399, 200):
        assert reader.get(b"%08d" % i) == rows[i]
        assert reader.get(b"%08d" % i) == rows[i]


def test_module_level_gets_keep_no_dropped_layers_alive() -> None:
    """get_row/get_value index the layers they read last, but a Layers that
    nobody else holds goes away with its files and block cache."""
    import gc
    import weakref

    from kvstore.memtable import Memtable
    from kvstore.state import Layers, SortedRun

    store = MemoryStore()
    info = write_sst(store, "sst/w.sst", [(b"k", 1, PUT, b"v", None)])
    cache = BlockCache(1 << 20)
    layers = Layers(Memtable(), (), (SortedRun((SSTReader.open(store, "sst/w.sst", cache=cache, size=info.size),)),))
    assert get_value(layers, b"k", 1) == b"v" and get_row(layers, b"k", 1) == (b"k", 1, PUT, b"v", None)
    assert get_value(layers, b"k", 0) is None
    dropped = weakref.ref(cache)
    del layers, cache
    gc.collect()
    assert dropped() is None


def test_a_handles_get_is_store_get(tmp_path: Path) -> None:
    """A handle's ``get`` is the compiled getter's ``read``, which answers as
    ``Store.get`` called through the class, for every consistency and error."""
    with kvstore.open(str(tmp_path), poll_interval_s=0) as db:
        db.put(b"k", b"1")
        db.delete(b"gone")
        for key in (b"k", b"gone", b"never", bytearray(b"k"), memoryview(b"k")):
            for consistency in (None, "serializable", "linearizable"):
                assert db.get(key, consistency) == kvstore.Store.get(db, key, consistency)
                assert db.get(key, consistency=consistency) == kvstore.Store.get(db, key, consistency=consistency)
        for bad, error in ((b"k", ValueError), ("k", TypeError), (b"", ValueError)):
            with pytest.raises(error):
                db.get(bad, "sometimes" if error is ValueError and bad else None)
            with pytest.raises(error):
                kvstore.Store.get(db, bad, "sometimes" if error is ValueError and bad else None)
    with pytest.raises(StoreClosedError):
        db.get(b"k")
    with pytest.raises(StoreClosedError):
        kvstore.Store.get(db, b"k", "serializable")


def test_compiled_get_refuses_files_opened_without_the_compiled_reader() -> None:
    """Layers whose SSTs were opened with ``implementation="python"`` have no
    compiled probe: the compiled get names the problem instead of crashing."""
    layers = build_layers([{b"a": (PUT, b"1", None)}, {b"b": (PUT, b"2", None)}], [1], 1, 64, None, "python")
    assert get_row_py(layers, b"a", 2) == (b"a", 1, PUT, b"1", None)
    with pytest.raises(TypeError, match="no compiled probe"):
        get_row(layers, b"a", 2)
    with pytest.raises(TypeError, match="no compiled probe"):
        get_value(layers, b"b", 2)
