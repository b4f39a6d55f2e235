"""The catalog benchmark (benchmarks/catalog_bench.py, helpers in
benchmarks/lakehouse): its pure helpers, the retry loop against a scripted
system, and one ``--quick`` run end to end.

The quick run checks that every workload ran on lakekv, DuckLake and
pyiceberg, that every count came out exact (rows landed, files planned,
tables listed) and that the report was written with its ratios. It never
asserts speed: the machine is shared, and a benchmark's numbers are its
output, not its test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from lakehouse import data, report, workloads  # noqa: E402 - needs the path above
from lakehouse.config import CatalogBenchConfig  # noqa: E402
from lakehouse.system import IdRange, System, make_system  # noqa: E402
from lakehouse.writers import append_loop  # noqa: E402

SYSTEMS = ("lakekv", "ducklake", "pyiceberg")
PHASES = ("setup", "single_writer", "many_writers", "build_files", "plan", "plan_filtered", "plan_old",
          "plan_old_filtered", "create_tables", "list_tables")


# -- helpers ---------------------------------------------------------------------


def test_selective_range_lies_inside_exactly_one_file() -> None:
    rows_per_file = 10
    for index in (0, 7, 9999):
        lo, hi = data.selective_range(index, rows_per_file)
        owners = {i // rows_per_file for i in range(lo, hi + 1)}
        assert owners == {index}
    contents = data.file_contents(7, rows_per_file, seed=1)
    assert contents.schema == data.SCHEMA and contents.column("id").to_pylist() == list(range(70, 80))
    assert data.file_contents(7, rows_per_file, seed=1).equals(contents)  # the same data for every system


def test_table_names_sort_in_creation_order_and_split() -> None:
    names = data.table_names(120)
    assert names == sorted(names) and len(set(names)) == 120
    assert data.split(names[0]) == (data.LISTED_NAMESPACE, "t000")
    with pytest.raises(ValueError, match="namespace.table"):
        data.split("no_namespace")


def test_config_rejects_sizes_without_an_old_version() -> None:
    with pytest.raises(ValueError, match="multiple of files_per_commit"):
        CatalogBenchConfig(files=1000, files_per_commit=1000)
    with pytest.raises(ValueError, match="writers"):
        CatalogBenchConfig(writers=0)
    quick = CatalogBenchConfig.quick()
    assert quick.mode == "quick" and quick.files < CatalogBenchConfig().files


def test_plan_cases_expect_half_the_files_at_the_old_version() -> None:
    config = CatalogBenchConfig(files=10_000, files_per_commit=1000)
    versions = list(range(101, 111))
    cases = workloads.plan_cases(config, versions)
    assert cases["plan"] == (None, None, 10_000)
    assert cases["plan_old"] == (None, 105, 5000)
    filtered_range, at, expected = cases["plan_old_filtered"]
    assert at == 105 and expected == 1 and filtered_range is not None
    assert filtered_range[1] < 5000 * config.rows_per_file  # inside the files the old version has


def test_ratio_takes_the_best_peer_in_the_right_direction() -> None:
    def measured(**phases: dict[str, float]) -> dict[str, Any]:
        return {phase: {"metrics": metrics, "checks": {}} for phase, metrics in phases.items()}

    results: dict[str, Any] = {"measurements": {
        "lakekv": measured(many_writers={"commits_per_s": 40.0}, plan={"median_ms": 10.0}),
        "ducklake": measured(many_writers={"commits_per_s": 10.0}, plan={"median_ms": 50.0}),
        "pyiceberg": {"many_writers": {"error": "RuntimeError: boom"}, "plan": {"metrics": {"median_ms": 20.0}}},
    }}
    rows = {row.phase: row for row in report.rows(CatalogBenchConfig().__dict__)}
    assert report.best_peer(results, rows["many_writers"]) == ("ducklake", 10.0)  # the failed peer is skipped
    assert report.ratio(results, rows["many_writers"]) == 4.0
    assert report.goal_met(results, rows["many_writers"]) is True
    assert report.best_peer(results, rows["plan"]) == ("pyiceberg", 20.0)  # lower is better for times
    assert report.ratio(results, rows["plan"]) == 0.5
    assert report.goal_met(results, rows["plan"]) is True


def test_failed_checks_name_the_count() -> None:
    result = {"checks": {"rows": {"expected": 40, "found": 30}, "count": {"expected": 1, "found": 1}}}
    assert workloads.failed_checks(result) == ["rows: expected 40, found 30"]


class ScriptedSystem(System):
    """Fails the attempts listed in ``script`` (attempt number -> error), appends otherwise."""

    key = "scripted"
    label = "scripted"

    def __init__(self, script: dict[int, BaseException]) -> None:
        super().__init__(Path("."))
        self.script = script
        self.attempt = 0
        self.appended: list[int] = []  # first id of each landed append

    def append(self, name: str, rows: pa.Table) -> None:
        self.attempt += 1
        if self.attempt in self.script:
            raise self.script[self.attempt]
        self.appended.append(rows.column("id")[0].as_py())

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(error, TimeoutError)

    def open(self) -> None: ...
    def close(self) -> None: ...
    def create_namespace(self, namespace: str) -> None: ...
    def create_table(self, name: str) -> None: ...
    def row_count(self, name: str) -> int: return 10 * len(self.appended)
    def add_files(self, name: str, contents: Sequence[pa.Table], batch: int) -> int: return 0
    def plan(self, name: str, id_range: IdRange, version: int | None) -> int: return 0
    def create_tables(self, names: Sequence[str], per_commit: int) -> None: ...
    def list_tables(self, namespace: str) -> int: return 0


def test_append_loop_retries_counts_and_gives_up() -> None:
    # Attempts 2 and 3 fail (conflict, then another error); attempts 5-7 fail
    # and with max_attempts=3 the third append is given up.
    script: dict[int, BaseException] = {2: TimeoutError("lost"), 3: OSError("locked"), 5: TimeoutError("a"),
                                        6: TimeoutError("b"), 7: OSError("c")}
    system = ScriptedSystem(script)
    stats = append_loop(system, "ns.t", first_id=100, appends=4, rows_per_append=10, max_attempts=3, seed=1,
                        seconds=60)
    assert system.appended == [100, 110, 130]  # each append's rows retried as they were; the third never landed
    assert (stats.committed, stats.conflicts, stats.other_errors, stats.gave_up) == (3, 3, 2, 1)
    assert stats.attempts == 8 and stats.errors == {"TimeoutError: lost": 1, "OSError: locked": 1,
                                                    "TimeoutError: a": 1, "TimeoutError: b": 1, "OSError: c": 1}
    assert stats.internal_retries is None  # the scripted system does not expose its own


def test_append_loop_stops_starting_appends_after_its_time() -> None:
    stats = append_loop(ScriptedSystem({}), "ns.t", 0, appends=5, rows_per_append=10, max_attempts=1, seed=1,
                        seconds=-1)
    assert stats.committed == 0 and stats.not_started == 5


def test_unknown_system_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown system 'nope'"):
        make_system("nope", Path("."))


# -- the quick run ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)  # a hang guard only
def test_quick_run_measures_every_system_with_exact_counts(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "catalog_bench.py"), "--quick", "--out", str(out),
         "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=880,
    )
    assert proc.returncode == 0, f"catalog_bench.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    results = json.loads((out / "catalog_bench-quick.json").read_text())
    config = results["config"]
    assert results["failures"] == []
    assert list(results["systems"]) == list(SYSTEMS)
    for system in SYSTEMS:
        measured = results["measurements"][system]
        assert set(measured) == set(PHASES), system
        for phase, entry in measured.items():
            assert "error" not in entry, (system, phase, entry.get("error"))
            for name, check in entry["checks"].items():
                assert check["expected"] == check["found"], (system, phase, name, check)
        # The rows checks are the exact landed appends: nothing lost, nothing doubled.
        single, many = measured["single_writer"], measured["many_writers"]
        assert single["metrics"]["committed"] == config["single_writer_appends"]
        assert single["checks"]["rows"]["found"] == config["single_writer_appends"] * config["append_rows"]
        landed = many["metrics"]["committed"]
        assert landed > 0 and many["checks"]["rows"]["found"] == landed * config["append_rows"]
        assert measured["plan"]["checks"]["count"]["found"] == config["files"]
        assert measured["plan_filtered"]["checks"]["count"]["found"] == 1
        old_files = (config["files"] // config["files_per_commit"] // 2) * config["files_per_commit"]
        assert measured["plan_old"]["checks"]["count"]["found"] == old_files
        assert measured["list_tables"]["checks"]["count"]["found"] == config["tables"]
        for phase in ("plan", "plan_filtered", "plan_old", "plan_old_filtered", "list_tables"):
            median = measured[phase]["metrics"]["median_ms"]
            assert math.isfinite(median) and median > 0, (system, phase)
    # lakekv rebases concurrent appends itself: none may reach the caller.
    lakekv_many = results["measurements"]["lakekv"]["many_writers"]["metrics"]
    assert lakekv_many["conflicts"] == 0 and lakekv_many["gave_up"] == 0
    assert lakekv_many["committed"] == config["writers"] * config["appends_per_writer"]

    markdown = (out / "catalog_bench-quick.md").read_text()
    assert "| measurement | lakekv | DuckLake | pyiceberg SqlCatalog | lakekv ÷ best peer | goal |" in markdown
    assert results["meta"]["git"]["commit"][:12] in markdown and results["meta"]["date_utc"] in markdown
    assert results["meta"]["machine"]["cpu"] in markdown
