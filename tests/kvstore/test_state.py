"""EngineState: applying versions in order, loading, catching up."""

from __future__ import annotations

import pytest

import kvstore
from kvstore.cache import BlockCache
from kvstore.chain import VersionChain
from kvstore.errors import CorruptionError
from kvstore.format.root import RootFile
from kvstore.format.rows import PUT
from kvstore.objstore.memory import MemoryStore
from kvstore.state import EngineState

QUIET = dict(poll_interval_s=0, background_maintenance=False)


def _fresh_state(store: MemoryStore) -> EngineState:
    chain = VersionChain(store)
    state = EngineState(store, chain, BlockCache(1 << 20), open_parallelism=4)
    latest = chain.find_latest()
    assert latest is not None
    state.load(latest)
    return state


def test_load_rebuilds_head_and_memtable_from_the_chain() -> None:
    store = MemoryStore()
    with kvstore.open(store, **QUIET) as db:
        for n in range(5):
            db.put(b"k%d" % n, b"v%d" % n)
        db.flush()
        db.put(b"late", b"x")
        version, seq = db.version, db.seq
    state = _fresh_state(store)
    assert state.head == (version, seq)
    assert state.tree.flushed_upto == version - 2  # the flush is version - 1
    assert len(state.layers.l0) == 1 and len(state.layers.memtable) == 1


def test_apply_root_refuses_gaps_and_seq_jumps() -> None:
    store = MemoryStore()
    with kvstore.open(store, **QUIET) as db:
        db.put(b"k", b"v")
    state = _fresh_state(store)
    version, seq = state.head

    def root(v: int, first_seq: int) -> RootFile:
        return RootFile(v, v - 1, first_seq, first_seq, "w", 0, "c", None, 0, None,
                        rows=((b"x", first_seq, PUT, b"1", None),))

    with state.chain_lock:
        with pytest.raises(CorruptionError, match="gap"):
            state.apply_root(root(version + 2, seq + 1))
        with pytest.raises(CorruptionError, match="expected"):
            state.apply_root(root(version + 1, seq + 5))
        state.apply_root(root(version + 1, seq + 1))
    assert state.head == (version + 1, seq + 1)


def test_listeners_see_every_applied_version_with_its_rows() -> None:
    store = MemoryStore()
    with kvstore.open(store, **QUIET) as db:
        db.put(b"a", b"1")
        state = _fresh_state(store)
        seen: list[tuple[int, list]] = []
        state.listeners.append(lambda root, rows: seen.append((root.version, rows)))
        db.put(b"b", b"2")
        db.put(b"c", b"3")
        applied = state.catch_up()
    assert [r.version for r in applied] == [v for v, _ in seen]
    assert [rows[0][0] for _, rows in seen] == [b"b", b"c"]
