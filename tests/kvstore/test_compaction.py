"""Compaction: planner rules, tree edits, the runner, and compaction through the Store."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore.compaction import (
    CompactionAbortedError,
    CompactionPolicy,
    CompactionTask,
    EditConflictError,
    TreeEdit,
    apply_edit,
    plan,
    plan_full,
    run_compaction,
)
from kvstore.compaction.planner import L0_MAX_FILES_FACTOR
from kvstore.compaction.runner import write_run
from kvstore.errors import StoreError
from kvstore.format.rows import DELETE, PUT
from kvstore.format.sst import SSTReader, write_sst
from kvstore.format.tree import TreeManifest
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET, sst_paths, wait_for


def sst(name: str, size: int = 10) -> dict:
    return {"path": name, "size": size}


def paths(ssts: tuple) -> list[str]:
    return [info["path"] for info in ssts]


# -- planner -------------------------------------------------------------------


def test_planner_leaves_a_small_tree_alone() -> None:
    policy = CompactionPolicy(l0_trigger=4)
    assert plan(TreeManifest(), policy) is None
    assert plan(TreeManifest(l0=(sst("a"), sst("b"))), policy) is None
    assert plan(TreeManifest(runs=((sst("r"),),)), policy) is None


def test_l0_trigger_merges_all_of_l0_and_runs_within_the_size_ratio() -> None:
    l0 = tuple(sst(f"l{i}", 10) for i in range(4))
    runs = ((sst("r0", 50),), (sst("r1", 80),), (sst("r2", 10_000),))
    task = plan(TreeManifest(l0=l0, runs=runs), CompactionPolicy(l0_trigger=4, size_ratio=1.0))
    assert task is not None and task.reason == "l0"
    assert paths(task.l0) == ["l0", "l1", "l2", "l3"]
    assert [paths(run) for run in task.runs] == [["r0"], ["r1"]]  # 50 <= 2*40, 80 <= 2*90, 10000 > 2*170
    assert not task.last_run


def test_space_amplification_rule_merges_everything_into_the_last_run() -> None:
    tree = TreeManifest(l0=(sst("l0", 100),), runs=((sst("r0", 150),), (sst("r1", 100),)))
    task = plan(tree, CompactionPolicy(l0_trigger=4, max_space_amplification=2.0))
    assert task is not None and task.reason == "space" and task.last_run
    assert task.input_paths() == {"l0", "r0", "r1"}


def test_run_count_rule_merges_the_newest_runs() -> None:
    runs = tuple((sst(f"r{i}", 10 * 4**i),) for i in range(6))
    task = plan(TreeManifest(l0=(sst("l0", 1),), runs=runs), CompactionPolicy(l0_trigger=4, max_runs=4))
    assert task is not None and task.reason == "runs"
    assert task.l0 == () and [paths(run) for run in task.runs] == [["r0"], ["r1"], ["r2"]]


def test_full_plan_takes_everything() -> None:
    assert plan_full(TreeManifest()) is None
    task = plan_full(TreeManifest(runs=((sst("r"),),)))
    assert task is not None and task.last_run and task.input_paths() == {"r"}


def test_large_l0_ssts_wait_for_the_byte_budget() -> None:
    policy = CompactionPolicy(l0_trigger=4, l0_bytes=1000)
    big = lambda count: TreeManifest(l0=tuple(sst(f"l{i}", 300) for i in range(count)))  # noqa: E731
    assert plan(big(2), policy) is None  # 600 bytes: under the budget, and not small
    task = plan(big(4), policy)  # 1200 >= 1000
    assert task is not None and task.reason == "l0" and len(task.l0) == 4
    small = TreeManifest(l0=tuple(sst(f"l{i}", 60) for i in range(4)))  # 240 * 4 < 1000: cheap to merge
    assert plan(small, policy) is not None


def test_l0_is_merged_at_the_file_cap_whatever_its_bytes() -> None:
    policy = CompactionPolicy(l0_trigger=2, l0_bytes=10**9)
    medium = lambda count: TreeManifest(l0=tuple(sst(f"l{i}", 10**8) for i in range(count)))  # noqa: E731
    assert plan(medium(L0_MAX_FILES_FACTOR * 2 - 1), policy) is None
    task = plan(medium(L0_MAX_FILES_FACTOR * 2), policy)
    assert task is not None and len(task.l0) == L0_MAX_FILES_FACTOR * 2


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 5000), max_size=20),
    st.lists(st.integers(1, 20_000), max_size=6),
    st.integers(1, 6),
    st.integers(1, 30_000),
)
def test_planner_bounds_l0_by_files_and_bytes(l0_sizes: list[int], run_sizes: list[int], trigger: int, budget: int) -> None:
    """Whatever the tree: a tree left alone has a bounded L0 (fewer SSTs than
    the cap, and under the byte budget or a single SST, and not a small L0 at
    the trigger); an L0 compaction takes all of L0."""
    tree = TreeManifest(
        l0=tuple(sst(f"l{i}", size) for i, size in enumerate(l0_sizes)),
        runs=tuple((sst(f"r{i}", size),) for i, size in enumerate(run_sizes)),
    )
    policy = CompactionPolicy(l0_trigger=trigger, l0_bytes=budget, max_runs=10, max_space_amplification=10**6)
    task = plan(tree, policy)
    files, size = len(l0_sizes), sum(l0_sizes)
    if task is None or task.reason != "l0":
        assert files < L0_MAX_FILES_FACTOR * trigger
        assert size < budget or files < min(2, trigger)
        assert not (files >= trigger and size * trigger < budget)
    else:
        assert paths(task.l0) == [f"l{i}" for i in range(files)]


def test_policy_rejects_bad_knobs() -> None:
    with pytest.raises(ValueError):
        CompactionPolicy(l0_trigger=0)
    with pytest.raises(ValueError):
        CompactionPolicy(l0_bytes=0)
    with pytest.raises(ValueError, match="l0_compaction_bytes"):
        kvstore.open(MemoryStore(), l0_compaction_bytes=0, **QUIET)
    with pytest.raises(ValueError):
        CompactionPolicy(max_space_amplification=0)


# -- tree edits ----------------------------------------------------------------


def test_flush_edit_conflicts_with_another_flush_of_the_same_versions() -> None:
    base = TreeManifest(flushed_upto=5, flushed_seq=9)
    edit = TreeEdit(added_l0=(sst("new"),), expected_flushed_upto=5, flushed_upto=8, flushed_seq=14)
    after = apply_edit(base, edit)
    assert paths(after.l0) == ["new"] and (after.flushed_upto, after.flushed_seq) == (8, 14)
    with pytest.raises(EditConflictError):
        apply_edit(after, edit)


def test_compaction_edit_keeps_newer_l0_in_front_and_takes_the_run_slot() -> None:
    base = TreeManifest(l0=(sst("c"), sst("b"), sst("a")), runs=((sst("r0"),), (sst("r1"),), (sst("r2"),)))
    edit = TreeEdit(removed=frozenset({"r0", "r1"}), added_run=(sst("m"),), floor_seq=3)
    after = apply_edit(base, edit)
    assert paths(after.l0) == ["c", "b", "a"]
    assert [paths(run) for run in after.runs] == [["m"], ["r2"]] and after.floor_seq == 3
    with_l0 = TreeEdit(removed=frozenset({"b", "a", "r0"}), added_run=(sst("m"),))
    after = apply_edit(base, with_l0)
    assert paths(after.l0) == ["c"] and [paths(run) for run in after.runs] == [["m"], ["r1"], ["r2"]]


def test_the_floor_of_a_tree_never_goes_down() -> None:
    base = TreeManifest(l0=(sst("a"),), floor_seq=10)
    after = apply_edit(base, TreeEdit(removed=frozenset({"a"}), added_run=(sst("m"),), floor_seq=4))
    assert after.floor_seq == 10


@pytest.mark.parametrize(
    "removed",
    [
        {"gone"},  # an input vanished
        {"c"},  # not the oldest L0
        {"r0", "r2"},  # runs not contiguous
        {"a", "r1"},  # a run newer than r1 would sit between L0 and the output
    ],
)
def test_compaction_edit_conflicts_when_inputs_moved(removed: set[str]) -> None:
    base = TreeManifest(l0=(sst("c"), sst("a")), runs=((sst("r0"),), (sst("r1"),), (sst("r2"),)))
    with pytest.raises(EditConflictError):
        apply_edit(base, TreeEdit(removed=frozenset(removed), added_run=(sst("m"),)))


def test_partly_consumed_run_conflicts() -> None:
    base = TreeManifest(runs=((sst("x"), sst("y")),))
    with pytest.raises(EditConflictError, match="partly"):
        apply_edit(base, TreeEdit(removed=frozenset({"x"}), added_run=(sst("m"),)))


# -- runner --------------------------------------------------------------------


def test_write_run_cuts_at_key_boundaries_near_the_target_size() -> None:
    store = MemoryStore()
    rows = [(b"k%03d" % k, seq, PUT, b"v" * 40, None) for k in range(200) for seq in (3, 2, 1)]
    infos = write_run(store, iter(rows), target_bytes=2000)
    assert len(infos) > 5
    for left, right in zip(infos, infos[1:]):
        assert left.max_key < right.min_key  # one key never spans two SSTs
    read_back = [row for info in infos for row in SSTReader.open(store, info.path).iter()]
    assert read_back == rows


def test_write_run_deletes_its_outputs_when_stopped() -> None:
    store = MemoryStore()
    rows = [(b"k%04d" % k, 1, PUT, b"v" * 100, None) for k in range(1000)]
    calls = iter(range(100))
    with pytest.raises(CompactionAbortedError):
        write_run(store, iter(rows), target_bytes=5000, should_stop=lambda: next(calls) >= 3)
    assert sst_paths(store) == set()


def test_run_compaction_applies_the_floor_and_drops_tombstones_only_in_the_last_run() -> None:
    store = MemoryStore()
    newer = write_sst(store, "sst/new.sst", [(b"a", 9, DELETE, None, None), (b"b", 8, PUT, b"b8", None)])
    older = write_sst(store, "sst/old.sst", [(b"a", 2, PUT, b"a2", None), (b"b", 3, PUT, b"b3", None)])
    inputs = ((newer.to_dict(),), (older.to_dict(),))
    for last_run, expected in ((False, [(b"a", 9), (b"b", 8)]), (True, [(b"b", 8)])):
        task = CompactionTask(l0=(), runs=inputs, last_run=last_run, reason="test")
        output = run_compaction(store, task, floor_seq=10, target_bytes=1 << 20)
        rows = [row[:2] for info in output.ssts for row in SSTReader.open(store, info.path).iter()]
        assert rows == expected
    task = CompactionTask(l0=(), runs=inputs, last_run=True, reason="test")
    output = run_compaction(store, task, floor_seq=5, target_bytes=1 << 20)  # above the floor: all kept
    rows = [row[:2] for info in output.ssts for row in SSTReader.open(store, info.path).iter()]
    assert rows == [(b"a", 9), (b"a", 2), (b"b", 8), (b"b", 3)]


# -- through the store -----------------------------------------------------------


def _fill(db: kvstore.Store, rounds: int, keys: int = 20) -> dict[bytes, bytes]:
    model: dict[bytes, bytes] = {}
    for round_ in range(rounds):
        for i in range(round_ % 3, keys, 3):
            key = b"k%03d" % i
            if (i + round_) % 7 == 0:
                db.delete(key)
                model.pop(key, None)
            else:
                db.put(key, b"r%d" % round_)
                model[key] = b"r%d" % round_
        db.flush()
    return model


def test_compaction_through_the_store_preserves_contents() -> None:
    with kvstore.open(MemoryStore(), l0_compaction_trigger=3, **QUIET) as db:
        model = _fill(db, 7)
        results = db.compact()
        assert [(r.reason, r.inputs, r.outputs) for r in results] == [("l0", 7, 1)]  # every L0 file into one SST
        assert db.stats()["l0_files"] < 3
        assert dict(db.scan()) == model
        full = db.compact(full=True)
        assert len(full) == 1 and full[0].reason == "full"
        assert db.stats()["l0_files"] == 0 and db.stats()["sorted_runs"] == 1
        assert dict(db.scan()) == model
        assert db.verify().ok


def test_full_compaction_below_the_floor_drops_history_and_tombstones() -> None:
    with kvstore.open(MemoryStore(), retention_window_s=0, **QUIET) as db:
        model = _fill(db, 6)
        # Window 0 still trails the head by the storage clock's margin (twice
        # its resolution): wait until the last commits are below the floor.
        wait_for(lambda: db.retention_floor().reason == "head")
        db.compact(full=True)
        (run,) = db._state.layers.runs  # internals: what the compaction wrote, row by row
        rows = sum(reader.info.row_count for reader in run.ssts)
        assert rows == len(model)  # one version per live key, no tombstones
        assert db.stats()["floor_seq"] == db.seq  # window 0, nothing pinned: the floor is the head
        assert dict(db.scan()) == model


def test_an_open_snapshot_holds_the_floor_for_this_handle() -> None:
    with kvstore.open(MemoryStore(), retention_window_s=0, **QUIET) as db:
        db.put(b"k", b"old")
        with db.snapshot() as snap:
            db.put(b"k", b"new")
            db.flush()
            db.compact(full=True)
            assert db.stats()["floor_seq"] <= snap.seq
            with db.at(version=snap.version) as view:
                assert view.get(b"k") == b"old"
        assert db.get(b"k") == b"new"


def test_racing_compactors_one_wins_and_the_loser_deletes_its_outputs() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        model = _fill(a, 4)
        b.refresh()
        before = sst_paths(inner)
        won = a.compact(full=True)
        assert len(won) == 1
        with pytest.raises(EditConflictError):
            b.compact(full=True)  # planned on the tree a just replaced
        new = sst_paths(inner) - before
        assert len(new) == won[0].outputs  # only the winner's outputs exist
        b.refresh()
        assert dict(b.scan()) == model
        assert b.verify().ok and not b.verify().unreferenced


def test_compaction_rebases_over_a_concurrent_flush() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        model = _fill(a, 3)
        b.refresh()
        a.put(b"fresh", b"1")
        a.flush()  # b has not seen this flush
        (result,) = b.compact(full=True)
        stats = b.stats()
        assert stats["l0_files"] == 1 and stats["sorted_runs"] == 1  # a's new L0 kept in front
        assert result.inputs == 3
        model[b"fresh"] = b"1"
        assert dict(b.scan()) == model
        assert b.verify().ok


def test_background_compaction_keeps_l0_bounded() -> None:
    options = {
        "poll_interval_s": 0,
        "flush_max_versions": 3,
        "l0_compaction_trigger": 2,
        "maintenance_interval_s": 0.01,
    }
    expected: dict[bytes, bytes] = {}
    with kvstore.open(MemoryStore(), **options) as db:
        for round_ in range(6):
            for i in range(5):
                key, value = b"k%03d" % ((round_ * 5 + i) % 13), b"v%d-%d" % (round_, i)
                db.put(key, value)
                expected[key] = value
            # The flush thread brings the unflushed versions under its
            # threshold, and the compaction thread L0 under its trigger.
            wait_for(lambda: db.version - db.stats()["flushed_upto"] < 3 and db.stats()["l0_files"] < 2)
        # Every round flushed at least once, and L0 went back under 2 after
        # each: at least one compaction per two rounds.
        assert db.maintenance_stats()["compactions"] >= 3
        assert dict(db.scan()) == expected


# -- the byte budget through the store: a bulk load of adopted delta SSTs ------

# Every commit of more than a few rows goes to a delta SST, adopted as an L0 SST by the flush.
BULK = dict(QUIET, inline_delta_bytes=128, l0_compaction_trigger=2)


def _bulk_commit(db: kvstore.Store, round_: int, model: dict[bytes, bytes]) -> None:
    batch = kvstore.WriteBatch()
    for i in range(round_ % 3, 600, 2):  # overlapping key ranges, as a random-order load
        key, value = b"k%05d" % i, b"v%02d-%05d" % (round_, i)
        batch.put(key, value)
        model[key] = value
    db.write(batch)


def _bulk_tree(inner: MemoryStore, rounds: int, budget: int | None) -> dict[bytes, bytes]:
    """``rounds`` large commits, each flushed (adopted) and followed by the policy's compactions."""
    model: dict[bytes, bytes] = {}
    options = BULK if budget is None else dict(BULK, l0_compaction_bytes=budget)
    with kvstore.open(inner, **options) as db:
        for round_ in range(rounds):
            _bulk_commit(db, round_, model)
            db.flush()
            db.compact()
    return model


def _bulk_sst_bytes() -> int:
    """The size of one adopted bulk SST, measured on a scratch store."""
    scratch = MemoryStore()
    _bulk_tree(scratch, 1, None)
    [path] = sst_paths(scratch)
    return scratch.head(path).size


def test_a_bulk_load_under_the_byte_budget_is_written_once() -> None:
    one = _bulk_sst_bytes()
    budget = one * 5 // 2  # two bulk SSTs are under it, three over
    inner = MemoryStore()
    model = _bulk_tree(inner, 2, budget)
    with kvstore.open(inner, create=False, **dict(BULK, l0_compaction_bytes=budget)) as db:
        assert db.stats()["l0_files"] == 2 and db.stats()["sorted_runs"] == 0  # nothing merged: no rewrite
        assert len(sst_paths(inner)) == 2  # only the two delta SSTs were ever written
        assert dict(db.scan()) == model
        _bulk_commit(db, 2, model)
        db.flush()
        [result] = db.compact()
        assert result.reason == "l0" and result.inputs == 3
        assert db.stats()["l0_files"] == 0 and db.stats()["sorted_runs"] == 1
        assert dict(db.scan()) == model and db.verify().ok
    # With a budget that makes the same SSTs small, the count trigger merges them at two.
    counted = MemoryStore()
    _bulk_tree(counted, 2, one * 100)
    with kvstore.open(counted, create=False, **QUIET) as db:
        assert db.stats()["l0_files"] == 0 and db.stats()["sorted_runs"] == 1


def test_crash_at_every_step_of_a_budget_compaction_loses_nothing() -> None:
    one = _bulk_sst_bytes()
    options = dict(BULK, l0_compaction_bytes=one * 5 // 2)
    probe = MemoryStore()
    _bulk_tree(probe, 2, options["l0_compaction_bytes"])
    faulty = FaultyStore(probe, seed=0)
    with kvstore.open(faulty, create=False, **options) as db:
        _bulk_commit(db, 2, {})
        before = len(faulty.log)
        db.flush()
        assert [r.reason for r in db.compact()] == ["l0"]
        needed = len(faulty.log) - before
    assert needed >= 3
    for crash_at in range(needed + 1):
        inner = MemoryStore()
        model = _bulk_tree(inner, 2, options["l0_compaction_bytes"])
        faulty = FaultyStore(inner, seed=crash_at)
        with kvstore.open(faulty, create=False, **options) as db:
            _bulk_commit(db, 2, model)
            faulty.crash_after(crash_at)
            try:
                db.flush()
                db.compact()
            except StoreError:
                assert faulty.crashed, f"failed at call {crash_at} without a crash"
        with kvstore.open(inner, create=False, **options) as db:
            assert dict(db.scan()) == model, f"crashed after {crash_at} calls"
            db.flush()
            db.compact()
            assert dict(db.scan()) == model and db.verify().ok, f"crashed after {crash_at} calls"
