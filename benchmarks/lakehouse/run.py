"""The order of a catalog-bench run, and its command line.

Phases run one after the other, and within a phase every system takes its
turn, so a change in the shared machine's load spreads over all systems
instead of hitting one. Each system keeps one handle open in this process for
the whole run (the concurrent writers open their own). A failure in one
system's phase is recorded with its error and the run goes on; failed
phases and failed checks make the command exit non-zero.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import machine
from lakehouse import data, report, workloads
from lakehouse.config import CatalogBenchConfig
from lakehouse.system import SYSTEMS, System, make_system

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results"
PACKAGES = ("lakekv", "duckdb", "duckdb-ext-ducklake", "duckdb-ext-sqlite", "pyiceberg", "sqlalchemy", "pyarrow")
PROFILE_TOP = 30


def package_versions() -> dict[str, str]:
    return machine.package_versions(PACKAGES)


class Run:
    def __init__(self, config: CatalogBenchConfig, data_dir: Path, keys: list[str], profile_dir: Path | None) -> None:
        self.config, self.data_dir, self.profile_dir = config, data_dir, profile_dir
        self.systems: dict[str, System] = {}
        self.keys = keys
        self.versions: dict[str, list[int]] = {}
        self.results: dict[str, Any] = {
            "config": asdict(config),
            "meta": {**machine.describe(data_dir), "packages": package_versions(), "date_utc": time.strftime(
                "%Y-%m-%d %H:%M UTC", time.gmtime())},
            "systems": {},
            "measurements": {key: {} for key in keys},
            "failures": [],
        }
        self.results["meta"]["date"] = self.results["meta"]["date_utc"]

    def log(self, line: str) -> None:
        print(line, flush=True)

    def attempt(self, key: str, phase: str, work: Callable[[], dict[str, Any]]) -> None:
        """Run one phase of one system; record its result, error or failed checks."""
        self.log(f"[{time.strftime('%H:%M:%S')}] {key}: {phase}")
        profiler = cProfile.Profile() if self.profile_dir is not None and key == "lakekv" else None
        try:
            if profiler is not None:
                profiler.enable()
            try:
                result = work()
            finally:
                if profiler is not None:
                    profiler.disable()
        except Exception as error:  # recorded, reported and turned into a non-zero exit
            message = f"{type(error).__name__}: {error}"
            self.results["measurements"][key][phase] = {"error": message, "traceback": traceback.format_exc()}
            self.results["failures"].append(f"{key} {phase}: {message}")
            self.log(f"    FAILED: {message}")
            return
        if profiler is not None and self.profile_dir is not None:
            profiler.dump_stats(self.profile_dir / f"lakekv-{phase}.prof")
        self.results["measurements"][key][phase] = result
        for failure in workloads.failed_checks(result):
            self.results["failures"].append(f"{key} {phase}: check {failure}")
            self.log(f"    CHECK FAILED: {failure}")
        self.log(f"    {json.dumps(result.get('metrics', {}), default=str)}")

    def setup(self, key: str) -> dict[str, Any]:
        system = make_system(key, self.data_dir / key)
        system.open()
        self.systems[key] = system
        self.results["systems"][key] = {"label": system.label, "notes": {}}
        start = time.perf_counter()
        system.create_namespace(data.NAMESPACE)
        system.create_namespace(data.LISTED_NAMESPACE)
        for name in (data.APPEND_ONE, data.APPEND_MANY, data.PLANNED):
            system.create_table(name)
        return {"metrics": {"seconds": time.perf_counter() - start}, "checks": {}}

    def build(self, key: str) -> dict[str, Any]:
        result, self.versions[key] = workloads.build_files(self.systems[key], self.config)
        return result

    def execute(self) -> dict[str, Any]:
        config = self.config
        for key in self.keys:
            self.results["systems"].setdefault(key, {"label": key, "notes": {}})
            self.attempt(key, "setup", lambda key=key: self.setup(key))

        def each(phase: str, work: Callable[[str], dict[str, Any]]) -> None:
            for key in self.keys:
                if key in self.systems:
                    self.attempt(key, phase, lambda key=key: work(key))

        each("single_writer", lambda key: workloads.single_writer(self.systems[key], config))
        each("many_writers", lambda key: workloads.many_writers(
            self.systems[key], self.data_dir / key, config, self._writer_profile(key)))
        each("build_files", self.build)
        for case in ("plan", "plan_filtered", "plan_old", "plan_old_filtered"):
            def planned(key: str, case: str = case) -> dict[str, Any]:
                if key not in self.versions:
                    raise RuntimeError("the many-file table was not built")
                id_range, at, expected = workloads.plan_cases(config, self.versions[key])[case]
                return workloads.plan(self.systems[key], id_range, at, expected, config)
            each(case, planned)
        each("create_tables", lambda key: workloads.create_tables(self.systems[key], config))
        each("list_tables", lambda key: workloads.list_tables(self.systems[key], config))

        for key, system in self.systems.items():
            self.results["systems"][key]["notes"] = system.notes()
            system.close()
        self.results["meta"]["load_average_end"] = machine.load_average()
        return self.results

    def _writer_profile(self, key: str) -> str | None:
        if self.profile_dir is None or key != "lakekv":
            return None
        return str(self.profile_dir / "lakekv-many_writers.prof")


def write_profile_summary(profile_dir: Path) -> Path:
    """Top functions by cumulative time, one section per profiled lakekv phase."""
    out = io.StringIO()
    for path in sorted(profile_dir.glob("lakekv-*.prof*")):
        out.write(f"\n==== {path.name}\n")
        pstats.Stats(str(path), stream=out).sort_stats("cumulative").print_stats(PROFILE_TOP)
    summary = profile_dir / "lakekv-profile.txt"
    summary.write_text(out.getvalue())
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI sizes (seconds, not minutes)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for catalog_bench[-quick].{json,md}")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="parent directory of the run's scratch directory (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="cProfile lakekv's phases (and its writer processes) into DIR")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    keys = [key.strip() for key in args.systems.split(",") if key.strip()]
    unknown = [key for key in keys if key not in SYSTEMS]
    if unknown or not keys:
        raise SystemExit(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    config = CatalogBenchConfig.quick() if args.quick else CatalogBenchConfig()
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="catalog-bench-", dir=args.data_dir))
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    try:
        results = Run(config, scratch, keys, args.profile).execute()
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "catalog_bench-quick" if args.quick else "catalog_bench"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str))
    text = report.markdown(results)
    (args.out / f"{stem}.md").write_text(text)
    print("\n" + text)
    if args.profile is not None:
        print(f"profile summary: {write_profile_summary(args.profile)}")
    for failure in results["failures"]:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if results["failures"] else 0
