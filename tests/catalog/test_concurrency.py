"""Many processes writing one lakehouse (issue 10, acceptance 2).

* Four processes append 25 times each to one table while a fifth changes the
  table's properties: every append commits without the caller seeing a
  conflict, the row count is exact and history shows the 100 appends — on a
  local directory and on SeaweedFS (S3).
* A mixed run: appends, overwrites (whole and filtered) and deletes from
  several processes on two tables while another compacts them, each process
  retrying ``RetryableConflictError``. A serial-order checker replays the committed
  operations in version order (history plus each process's log of what each
  committed call wrote, keyed by the version it returned) on an in-memory
  model and compares every table at every version with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import catalog
from lake_peer import LOCAL, QUIET, SCHEMA
from lake_workers import Logged, appender, compactor, mixed_writer, property_changer, run_processes

pytestmark = pytest.mark.timeout(600)

APPENDERS = 4
APPENDS_EACH = 25


def _lake(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if backend == "local":
        return str(tmp_path / "lake"), {"fsync": False}
    url, options = request.getfixturevalue("seaweedfs").new_url()
    return url, dict(options)


@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.slow)])
def test_appends_from_four_processes_beside_property_changes(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    url, options = _lake(request, backend, tmp_path)
    with catalog.open(url, **options, **QUIET) as lake:
        lake.create_namespace("db")
        lake.create_table("db.events", SCHEMA)
    workers: list[Any] = [(appender, (url, options, "db.events", w, APPENDS_EACH)) for w in range(APPENDERS)]
    workers.append((property_changer, (url, options, "db.events")))
    *appended, prop_versions = run_processes(workers)  # any conflict reaching a caller fails its worker

    versions = [v for per_worker in appended for v, _ in per_worker]
    assert len(versions) == APPENDERS * APPENDS_EACH
    assert len(set(versions)) == len(versions), "two appends returned the same version"
    assert prop_versions and prop_versions == sorted(prop_versions)
    with catalog.open(url, **options, **QUIET) as lake:
        table = lake.load_table("db.events")
        data = table.scan().to_arrow()
        expected_ids = sorted(i for per_worker in appended for _, ids in per_worker for i in ids)
        assert data.num_rows == APPENDERS * APPENDS_EACH * 3
        assert sorted(data.column("id").to_pylist()) == expected_ids
        assert table.properties["round"] == str(len(prop_versions) - 1)

        history = lake.history(limit=None, table="db.events")
        by_version = {entry.version: [op["kind"] for op in entry.operations] for entry in history}
        appends = [v for v, kinds in by_version.items() if kinds == ["append"]]
        assert sorted(appends) == sorted(versions)
        assert sum(kinds.count("append") for kinds in by_version.values()) == APPENDERS * APPENDS_EACH
        assert all(by_version.get(v) == ["update_properties"] for v in prop_versions)
        for entry in history:
            for op in entry.operations:
                if op["kind"] == "append":
                    assert (op["files_added"], op["rows_added"]) == (1, 3)


# -- the mixed run and its serial-order checker --------------------------------------------

TABLES = ["db.a", "db.b"]


def _apply(model: list[tuple[int, str]], op: Logged) -> list[tuple[int, str]]:
    """``op`` applied to a table's rows, as the catalog documents it."""
    new_rows = [(i, op.tag) for i in op.ids]
    if op.kind == "compact":
        return model  # same rows, other files
    if op.kind == "append":
        return model + new_rows
    if op.where is None:  # whole overwrite
        assert op.kind == "overwrite"
        return new_rows
    lo, hi = op.where
    kept = [r for r in model if not lo <= r[0] < hi]
    return kept + new_rows if op.kind == "overwrite" else kept


def _is_noop(model: list[tuple[int, str]], op: Logged) -> bool:
    """Would ``op`` change nothing on ``model``? (Such a call commits no version.)"""
    if op.ids:
        return False
    if op.where is None:
        return not model
    lo, hi = op.where
    return not any(lo <= r[0] < hi for r in model)


def _table_rows(lake: Any, table: str) -> list[tuple[int, str]]:
    data = lake.load_table(table).scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("tag").to_pylist()))


def check_serial_order(lake: catalog.Lakehouse, logs: list[Logged], first_version: int) -> dict[str, int]:
    """Replay ``logs`` in history order on a model; compare every table at every version.

    Every committed call must be the one operation history shows at the
    version it returned; every call that returned the version its handle had
    already seen committed nothing, and must have been a no-op on the model
    at that version; history must hold nothing else on these tables.
    """
    lake.refresh()
    history = [e for e in reversed(lake.history(limit=None)) if e.version > first_version]
    committed = {op.version: op for op in logs if op.version > op.seen}
    assert len(committed) == sum(op.version > op.seen for op in logs), "two committed calls share a version"
    ids = {t: lake.load_table(t).id for t in TABLES}
    model: dict[str, list[tuple[int, str]]] = {t: [] for t in TABLES}
    states = [(first_version, {t: list(r) for t, r in model.items()})]  # (version, model after it)
    for entry in history:
        ops = [op for op in entry.operations if op.get("table_id") in ids.values()]
        if not ops:
            continue
        assert len(ops) == 1, f"version {entry.version} holds {len(ops)} table operations: {ops}"
        mine = committed.get(entry.version)
        assert mine is not None, f"version {entry.version} ({ops[0]['kind']}) was committed by no logged call"
        assert (ops[0]["kind"], ops[0]["table_id"]) == (mine.kind, ids[mine.table]), (entry, mine)
        model[mine.table] = _apply(model[mine.table], mine)
        states.append((entry.version, {t: list(r) for t, r in model.items()}))
        with lake.at(version=entry.version) as past:
            for t in TABLES:
                assert _table_rows(past, t) == sorted(model[t]), f"{t} at version {entry.version} differs from the model"
    assert {v for v, _ in states[1:]} == set(committed), "a committed call's version is missing from history"
    noops = [op for op in logs if op.version <= op.seen]
    for op in noops:
        assert op.version == op.seen and op.version >= first_version, op
        at = [state for version, state in states if version <= op.version][-1]
        assert _is_noop(at[op.table], op), f"{op} returned version {op.version} but the model says it changes rows"
    for t in TABLES:
        assert _table_rows(lake, t) == sorted(model[t]), f"final {t} differs from the serial replay"
    return {"versions": len(states) - 1, "noops": len(noops)}


def test_mixed_writers_match_a_serial_replay(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, **LOCAL) as lake:
        lake.create_namespace("db")
        for t in TABLES:
            lake.create_table(t, SCHEMA)
        first_version = lake.version
    writers = 3
    workers: list[Any] = [(mixed_writer, (url, LOCAL, TABLES, w, 15, 1000 + w)) for w in range(writers)]
    workers.append((compactor, (url, LOCAL, TABLES)))
    logs = [op for per_worker in run_processes(workers) for op in per_worker]
    assert len([op for op in logs if op.kind != "compact"]) == writers * 15
    with catalog.open(url, **LOCAL) as lake:
        stats = check_serial_order(lake, logs, first_version)
    assert stats["versions"] + stats["noops"] == len(logs)
