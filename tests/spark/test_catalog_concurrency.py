"""Three Spark applications run UPDATE and MERGE on one table through the catalog while a fourth appends.

Each application is its own process and JVM (local[1]) with the catalog
plugin, and retries a statement that raises RetryableConflictError. Every
statement marks the rows it writes with its own op id, so each catalog
commit can be matched to the one statement that made it. Walking
``lake.history()``, each commit must be exactly that statement applied (by a Python
model) to the rows of the version before: the history is a serial order of
whole statements, each committed exactly once, and the final table is what
replaying that order gives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from tests.spark.catalog_apps import run_writer_apps
from tests.spark.lake_history import commits_after
Rows = dict[int, tuple[int, str]]  # k -> (v, op)
ROUNDS = 3
MERGE_KEYS = (1, 4, 7)


def update_u1(rows: Rows, op: str) -> Rows:
    return {k: ((v * 2 + 1, op) if k % 3 == 0 else (v, o)) for k, (v, o) in rows.items()}


def update_u3(rows: Rows, op: str) -> Rows:
    return {k: ((v + 100, op) if k < 15 else (v, o)) for k, (v, o) in rows.items()}


def merge_m2(rows: Rows, op: str) -> Rows:
    n = int(op.rsplit("-", 1)[1])
    out = dict(rows)
    for k in (*MERGE_KEYS, 100 + n):
        out[k] = (rows[k][0] + 10, op) if k in rows else (0, op)
    return out


def append_a4(rows: Rows, op: str) -> Rows:
    n = int(op.rsplit("-", 1)[1])
    return {**rows, 1000 + n: (0, op)}


MODELS: dict[str, Callable[[Rows, str], Rows]] = {"u1": update_u1, "m2": merge_m2, "u3": update_u3, "a4": append_a4}


def statements(name: str) -> list[str]:
    """The SQL of application ``name``'s rounds; round n marks its rows with op '<name>-<n>'."""
    table = "lake.c.t"
    out = []
    for n in range(ROUNDS):
        op = f"'{name}-{n}'"
        if name == "u1":
            out.append(f"UPDATE {table} SET v = v * 2 + 1, op = {op} WHERE k % 3 = 0")
        elif name == "u3":
            out.append(f"UPDATE {table} SET v = v + 100, op = {op} WHERE k < 15")
        elif name == "m2":
            keys = ", ".join(f"({k})" for k in (*MERGE_KEYS, 100 + n))
            out.append(
                f"MERGE INTO {table} t USING (SELECT CAST(col1 AS BIGINT) AS k FROM VALUES {keys}) s ON t.k = s.k "
                f"WHEN MATCHED THEN UPDATE SET v = t.v + 10, op = {op} "
                f"WHEN NOT MATCHED THEN INSERT (k, v, op) VALUES (s.k, 0, {op})"
            )
        else:
            out.append(f"INSERT INTO {table} VALUES ({1000 + n}, 0, {op})")
    return out


def rows_at(lake: catalog.Lakehouse, version: int) -> Rows:
    with lake.at(version=version) as past:
        data = past.load_table("c.t").scan().to_arrow()
    return {k: (v, o) for k, v, o in zip(data.column("k").to_pylist(), data.column("v").to_pylist(), data.column("op").to_pylist())}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)  # four JVM starts on a shared 2-core machine
def test_concurrent_updates_merges_and_appends_serialize(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url) as lake:
        lake.create_namespace("c")
        table = lake.create_table("c.t", pa.schema([("k", pa.int64()), ("v", pa.int64()), ("op", pa.string())]))
        table.append(pa.table({"k": list(range(30)), "v": [0] * 30, "op": ["seed"] * 30}).cast(table.schema))
        start_version = lake.version

    results = run_writer_apps(tmp_path, url, {name: statements(name) for name in MODELS})

    with catalog.open(url) as lake:
        state = rows_at(lake, start_version)
        applied = []
        for version in [h.version for h in commits_after(lake, start_version)]:
            now = rows_at(lake, version)
            ops = {o for k, (v, o) in now.items() if state.get(k, (None, None))[1] != o}
            assert len(ops) == 1, f"v{version}: not one whole statement: {sorted(ops)}"
            (op,) = ops
            expected = MODELS[op.rsplit("-", 1)[0]](state, op)
            assert now == expected, f"v{version}: {op} applied to v{version - 1} does not give v{version}"
            applied.append(op)
            state = now
    everything = sorted(f"{name}-{n}" for name in MODELS for n in range(ROUNDS))
    assert sorted(applied) == everything, f"each statement committed exactly once: {applied}"
    print("serial order:", applied, "attempts:", {n: r["attempts"] for n, r in results.items()})
