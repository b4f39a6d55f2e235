"""The measurements, one function per workload; each returns a JSON-safe dict
of metrics plus the correctness checks it made.

(a) small appends with one writer (in this process) and with N writer
    processes on one table; (b) the plan of a scan over the many-file table,
    with and without a selective filter; (c) the same at the version after the
    first half of the files; (d) listing the tables of one namespace. Build
    costs of (b) and (d) are measured as well.

A "check" is a count that must come out exact (rows landed, files planned,
tables listed); ``run`` reports every failed check and exits non-zero.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakehouse import data
from lakehouse.config import CatalogBenchConfig
from lakehouse.system import IdRange, System
from lakehouse.writers import AppendStats, append_loop, concurrent_appends

PHASE_SECONDS = 45.0  # no append starts after this, so a slow system cannot stretch the run


def _append_metrics(stats: AppendStats, rows_found: int, rows_per_append: int) -> dict[str, Any]:
    elapsed = stats.finished - stats.started
    return {
        "metrics": {
            "commits_per_s": stats.committed / elapsed if elapsed > 0 else 0.0,
            "seconds": elapsed,
            "committed": stats.committed,
            "attempts": stats.attempts,
            "conflicts": stats.conflicts,
            "other_errors": stats.other_errors,
            "error_rate": (stats.conflicts + stats.other_errors) / stats.attempts if stats.attempts else 0.0,
            "gave_up": stats.gave_up,
            "not_started": stats.not_started,
            "internal_retries": stats.internal_retries,
        },
        "errors": stats.errors,
        "checks": {"rows": {"expected": stats.committed * rows_per_append, "found": rows_found}},
    }


def single_writer(system: System, config: CatalogBenchConfig) -> dict[str, Any]:
    stats = append_loop(system, data.APPEND_ONE, 0, config.single_writer_appends, config.append_rows,
                        config.max_attempts, config.seed, PHASE_SECONDS)
    return _append_metrics(stats, system.row_count(data.APPEND_ONE), config.append_rows)


def many_writers(system: System, root: Path, config: CatalogBenchConfig,
                 profile_prefix: str | None = None) -> dict[str, Any]:
    # The run's own handle is closed while the writers run: an idle DuckLake
    # connection that has read the lakehouse holds a SQLite lock that makes
    # every writer process fail with "database is locked" (seen here: 0 of 12
    # appends landed in 45 s), which would measure this harness, not DuckLake.
    system.close()
    try:
        stats = concurrent_appends(system.key, root, data.APPEND_MANY, config.writers, config.appends_per_writer,
                                   config.append_rows, config.max_attempts, config.seed, PHASE_SECONDS,
                                   profile_prefix=profile_prefix)
    finally:
        system.open()
    return _append_metrics(stats, system.row_count(data.APPEND_MANY), config.append_rows)


def build_files(system: System, config: CatalogBenchConfig) -> tuple[dict[str, Any], list[int]]:
    """Commit the planned table's files in batches; returns the metrics and
    the version id after each batch."""
    versions, seconds = [], 0.0
    batches = config.files // config.files_per_commit
    for batch in range(batches):
        first = batch * config.files_per_commit
        contents = [data.file_contents(i, config.rows_per_file, config.seed)
                    for i in range(first, first + config.files_per_commit)]
        start = time.perf_counter()
        versions.append(system.add_files(data.PLANNED, contents, batch))
        seconds += time.perf_counter() - start
    metrics = {"seconds": seconds, "files_per_s": config.files / seconds, "commits": batches}
    return {"metrics": metrics, "checks": {}}, versions


def timed_reads(read: Callable[[], int], expected: int, config: CatalogBenchConfig) -> dict[str, Any]:
    """One untimed warm-up call, then up to ``read_repeats`` timed calls
    within ``read_seconds``; reports the median and the best."""
    found = read()
    samples: list[float] = []
    budget_end = time.perf_counter() + config.read_seconds
    while len(samples) < config.read_repeats and (not samples or time.perf_counter() < budget_end):
        start = time.perf_counter()
        found = read()
        samples.append((time.perf_counter() - start) * 1000)
    return {
        "metrics": {"median_ms": statistics.median(samples), "min_ms": min(samples), "repeats": len(samples)},
        "checks": {"count": {"expected": expected, "found": found}},
    }


def plan_cases(config: CatalogBenchConfig, versions: list[int]) -> dict[str, tuple[IdRange, int | None, int]]:
    """case -> (id range, version, files the plan must list). The old version
    is the one after the first half of the batches."""
    old = versions[len(versions) // 2 - 1]
    old_files = (len(versions) // 2) * config.files_per_commit
    late_file, early_file = (config.files * 3) // 4, old_files // 2
    return {
        "plan": (None, None, config.files),
        "plan_filtered": (data.selective_range(late_file, config.rows_per_file), None, 1),
        "plan_old": (None, old, old_files),
        "plan_old_filtered": (data.selective_range(early_file, config.rows_per_file), old, 1),
    }


def plan(system: System, id_range: IdRange, version: int | None, expected: int,
         config: CatalogBenchConfig) -> dict[str, Any]:
    return timed_reads(lambda: system.plan(data.PLANNED, id_range, version), expected, config)


def create_tables(system: System, config: CatalogBenchConfig) -> dict[str, Any]:
    names = data.table_names(config.tables)
    start = time.perf_counter()
    system.create_tables(names, config.tables_per_commit)
    seconds = time.perf_counter() - start
    return {"metrics": {"seconds": seconds, "tables_per_s": config.tables / seconds}, "checks": {}}


def list_tables(system: System, config: CatalogBenchConfig) -> dict[str, Any]:
    return timed_reads(lambda: system.list_tables(data.LISTED_NAMESPACE), config.tables, config)


def failed_checks(result: dict[str, Any]) -> list[str]:
    return [
        f"{name}: expected {check['expected']}, found {check['found']}"
        for name, check in result.get("checks", {}).items()
        if check["expected"] != check["found"]
    ]
