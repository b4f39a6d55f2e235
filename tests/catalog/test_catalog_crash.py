"""Crash at every object-store call of append, overwrite, delete, compaction, GC and a two-table transaction.

A lakehouse is prepared once (a local directory), then for every call index
``k`` of the operation a copy of it is opened through a FaultyStore that
"crashes" after ``k`` calls, the operation runs into the crash, and a new
handle on the copy (no faults) checks:

* the table is wholly before or wholly after the operation;
* every data file that a live entry of a retained version points at exists,
  with the entry's size (retained: from the checkpoint that sets the
  retention floor up to the head);
* ``gc(grace_s=3600)`` deletes nothing younger than the grace period except
  files whose removal was committed at or before the floor, and nothing any
  retained version references; ``gc(grace_s=0)`` then leaves exactly the
  files the retained versions reference: the crashed writer's leftovers go
  only once they are past the grace period.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

import kvstore
from catalog import Lakehouse
from kvstore.errors import StoreError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.local import LocalStore
from lake_peer import QUIET, SCHEMA, rows

pytestmark = pytest.mark.timeout(300)

T = "db.t"
U = "db.u"
# Fast failure once the store has crashed; no hint thread racing the
# operation's calls; a zero time-travel window so the checkpoint alone sets
# the retention floor (files removed before it are GC's to delete).
OPTIONS: dict[str, Any] = dict(
    QUIET,
    fsync=False,
    max_commit_attempts=3,
    backoff_min_s=0.0001,
    backoff_max_s=0.001,
    hint_interval_s=3600.0,
    retention_window_s=0.0,
)
GRACE_S = 3600.0
HINT = "_latest_hint"


@dataclass(frozen=True)
class Prepared:
    """The lakehouse every crash starts from, and what GC may delete in it."""

    root: Path
    rows: list[tuple[int, str]]
    floor_version: int  # the checkpoint's version: the oldest retained one
    removed_before_floor: str  # a data file whose removal committed before the floor
    old_orphan: str  # an unreferenced data file older than the grace period


def _open(store: Any) -> Lakehouse:
    return Lakehouse(kvstore.open(store, **OPTIONS))


def _rows(lake: Lakehouse, table: str = T) -> list[tuple[int, str]]:
    data = lake.load_table(table).scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("tag").to_pylist()))


def _prepare(root: Path) -> Prepared:
    with _open(LocalStore(root, fsync=False)) as lake:
        lake.create_namespace("db")
        lake.create_table(U, SCHEMA)  # the second table of the multi-table transaction
        t = lake.create_table(T, SCHEMA)
        for base in (0, 10, 20, 30):
            t.append(rows([base, base + 1, base + 2], "seed"))
        doomed = next(f.path for f in t.files(pc.field("id") == 31))
        t.delete(pc.field("id") == 31)  # its removal is older than the floor
        lake.store.checkpoint("keep")
        floor_version = lake.version - 1  # checkpoint() pins the version it saw, then commits one
        t.delete(pc.field("id") == 21)  # removed after the floor: still referenced by the checkpoint
        orphan = f"data/{t.id}/orphan-of-a-crash-long-ago.parquet"
        lake.objects.put(orphan, b"not even parquet")
        old = time.time() - 2 * GRACE_S
        os.utime(root / orphan, (old, old))
        prepared_rows = _rows(lake)
        assert lake.store.retention_floor().version == floor_version
    return Prepared(root, prepared_rows, floor_version, doomed, orphan)


def _without(rows_: list[tuple[int, str]], ids: set[int]) -> list[tuple[int, str]]:
    return [r for r in rows_ if r[0] not in ids]


def _two_table_transaction(lake: Lakehouse) -> None:
    with lake.transaction() as tx:
        tx.load_table(T).append(rows([70], "new"))
        tx.load_table(U).append(rows([71], "new"))


@dataclass(frozen=True)
class Operation:
    run: Callable[[Lakehouse], object]
    after: Callable[[list[tuple[int, str]]], list[tuple[int, str]]]  # rows after it, from rows before


OPERATIONS: dict[str, Operation] = {
    "append": Operation(
        lambda lake: lake.load_table(T).append(rows([50, 51], "new")),
        lambda before: sorted(before + [(50, "new"), (51, "new")]),
    ),
    "overwrite": Operation(
        lambda lake: lake.load_table(T).overwrite(rows([60], "new")),
        lambda before: [(60, "new")],
    ),
    "overwrite-filtered": Operation(
        lambda lake: lake.load_table(T).overwrite(rows([11], "new"), filter=pc.field("id") == 11),
        lambda before: sorted(_without(before, {11}) + [(11, "new")]),
    ),
    "delete": Operation(
        lambda lake: lake.load_table(T).delete(pc.field("id") == 1),
        lambda before: _without(before, {1}),
    ),
    "compact": Operation(
        lambda lake: lake.compact_table(T, target_file_bytes=1 << 20),
        lambda before: before,
    ),
    "transaction": Operation(_two_table_transaction, lambda before: sorted(before + [(70, "new")])),
    "gc": Operation(
        lambda lake: lake.gc(grace_s=GRACE_S),
        lambda before: before,
    ),
}


def _data_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in (root / "data").rglob("*") if p.is_file()}


def _retained_references(lake: Lakehouse, root: Path, floor_version: int, context: str) -> set[str]:
    """Every data file a retained version's live entries point at; each must exist with its size."""
    referenced: set[str] = set()
    for version in range(floor_version, lake.version + 1):
        with lake.at(version=version) as past:
            entries = [entry for table in past.list_tables("db") for entry in past.load_table(table).files()]
            for entry in entries:
                path = root / entry.path
                assert path.is_file(), f"{context}: version {version} points at missing {entry.path}"
                assert path.stat().st_size == entry.size, f"{context}: {entry.path} has the wrong size"
                referenced.add(entry.path)
    return referenced


def _check_after_reopen(prepared: Prepared, root: Path, operation: str, context: str) -> None:
    before = prepared.rows
    after = OPERATIONS[operation].after(before)
    with _open(LocalStore(root, fsync=False)) as lake:
        assert _rows(lake) in (before, after), f"{context}: the table is neither before nor after"
        if operation == "transaction":  # one commit: db.u agrees with db.t (both or neither)
            assert _rows(lake, U) == ([(71, "new")] if _rows(lake) == after else []), context
        retained = _retained_references(lake, root, prepared.floor_version, context)
        files = _data_files(root)
        assert retained <= files

        lake.gc(grace_s=GRACE_S)
        left = _data_files(root)
        removed = files - left
        # Only what was removed before the floor, and the orphan older than the
        # grace period, may go now: the crashed writer's files are too young.
        assert removed <= {prepared.removed_before_floor, prepared.old_orphan}, f"{context}: gc removed {removed}"
        assert prepared.removed_before_floor not in left and prepared.old_orphan not in left, context
        assert _retained_references(lake, root, prepared.floor_version, context) == retained

        lake.gc(grace_s=0)
        assert _data_files(root) == retained, f"{context}: leftovers survive a gc past the grace period"
        assert _rows(lake) in (before, after), context
        assert _retained_references(lake, root, prepared.floor_version, context) == retained


def _count_calls(prepared: Prepared, tmp_path: Path, operation: str) -> tuple[int, str]:
    """How many object-store calls the operation makes, and the root file its commit publishes."""
    root = tmp_path / "count"
    shutil.copytree(prepared.root, root)
    faulty = FaultyStore(LocalStore(root, fsync=False), seed=0)
    with _open(faulty) as lake:
        start = len(faulty.log)
        OPERATIONS[operation].run(lake)
        # The latest-version hint is written by a background thread after a
        # commit (whether it lands inside this window is a matter of timing)
        # and its failure never reaches a caller: not a crash point.
        calls = [c for c in faulty.log[start:] if c.path != HINT]
    _check_after_reopen(prepared, root, operation, f"{operation} without a crash")
    published = [c.path for c in calls if c.op == "put_if_absent" and c.path.startswith("_")]
    # gc commits twice: the lakehouse's retention floor before it deletes a
    # removed file (catalog.retention), then the forgotten removal records.
    assert len(published) == (2 if operation == "gc" else 1), f"{operation} published {published}"
    return len(calls), published[0]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return _prepare(tmp_path_factory.mktemp("prepared") / "lake")


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_crash_at_every_call(prepared: Prepared, tmp_path: Path, operation: str) -> None:
    needed, root_file = _count_calls(prepared, tmp_path, operation)
    assert needed >= 2
    after = OPERATIONS[operation].after(prepared.rows)
    outcomes = set()
    # Crash before each call reaches storage, and once more just after the
    # commit's root file landed (the caller never hears that it did).
    for crash_at in [*range(needed), None]:
        root = tmp_path / f"crash-{crash_at}"
        shutil.copytree(prepared.root, root)
        faulty = FaultyStore(LocalStore(root, fsync=False), seed=0)
        with _open(faulty) as lake:
            if crash_at is None:
                faulty.fail_next("put_if_absent", when="after", path_prefix=root_file, crash=True)
            else:
                faulty.crash_after(crash_at)
            try:
                OPERATIONS[operation].run(lake)
            except StoreError:
                assert faulty.crashed, f"{operation} failed at call {crash_at} without a crash"
            else:
                assert not faulty.crashed, f"{operation} reported success after a crash"
        where = "just after its root landed" if crash_at is None else f"after {crash_at} of {needed} calls"
        _check_after_reopen(prepared, root, operation, f"{operation} crashed {where}")
        with _open(LocalStore(root, fsync=False)) as lake:
            outcomes.add(_rows(lake) == after)
        shutil.rmtree(root)
    if after != prepared.rows:
        assert outcomes == {False, True}, "some crash point must land before the commit and some after it"


@pytest.mark.parametrize("operation", ["append", "overwrite", "delete", "compact", "transaction"])
def test_unsettled_commit_keeps_its_data_files(prepared: Prepared, tmp_path: Path, operation: str) -> None:
    """The root PUT lands but its response is lost and reading it back keeps failing.

    The engine then raises without knowing whether the commit happened ("it is
    visible after reopen if it landed"); the catalog must not delete the data
    files that the landed commit's entries point at.
    """
    root = tmp_path / "lake"
    shutil.copytree(prepared.root, root)
    faulty = FaultyStore(LocalStore(root, fsync=False), seed=0)
    with _open(faulty) as lake:
        # The commit's freshness check reads the storage clock (a probe under
        # "_"): measure it first, so the faults below hit only the root file.
        lake.store.storage_now()
        faulty.fail_next("put_if_absent", when="after", path_prefix="_")
        # Reading the root back fails (GETs); HEADs still work, so the
        # linearizable read check at the start of the operation (a HEAD of
        # the next root) passes and the commit is attempted.
        faulty.fail_next("get", path_prefix="_", count=1000)
        with pytest.raises(StoreError):
            OPERATIONS[operation].run(lake)
    # The commit landed: the table is "after", and every entry's file is there.
    with _open(LocalStore(root, fsync=False)) as lake:
        assert _rows(lake) == OPERATIONS[operation].after(prepared.rows)
    _check_after_reopen(prepared, root, operation, f"{operation} with an unsettled commit")


RANDOM_OPERATIONS = ["append", "overwrite-filtered", "delete", "compact", "gc", "transaction"]


@pytest.mark.parametrize("seed", range(6))
def test_random_faults_never_tear_a_table_or_leave_a_dangling_entry(
    prepared: Prepared, tmp_path: Path, seed: int
) -> None:
    """Faults before and after random calls (no crash): one handle keeps working through them.

    Each operation either applies wholly or not at all (checked through a
    clean handle after every call, whatever the call reported); at the end
    nothing points at a missing file and GC converges to the retained files.
    """
    root = tmp_path / "lake"
    shutil.copytree(prepared.root, root)
    faulty = FaultyStore(LocalStore(root, fsync=False), seed=seed)
    rng = random.Random(seed)
    current = prepared.rows
    with _open(faulty) as lake, _open(LocalStore(root, fsync=False)) as clean:
        faulty.error_rate = faulty.after_rate = 0.08  # once open: opening under faults is the engine's test
        for step in range(8):
            operation = rng.choice(RANDOM_OPERATIONS)
            try:
                OPERATIONS[operation].run(lake)
                failed = False
            except StoreError:
                failed = True  # an injected fault (or a conflict with our own unsettled commit)
            clean.refresh()
            now = _rows(clean)
            expected = OPERATIONS[operation].after(current)
            if failed:
                assert now in (current, expected), f"seed {seed} step {step}: {operation} tore the table"
            else:
                assert now == expected, f"seed {seed} step {step}: {operation} reported success but did not apply"
            if operation == "transaction":  # both tables or neither
                assert _rows(clean, U).count((71, "new")) == now.count((70, "new")), f"seed {seed} step {step}"
            current = now
    _check_after_reopen(dataclasses.replace(prepared, rows=current), root, "gc", f"random faults, seed {seed}")
