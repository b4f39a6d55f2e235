"""Scale benchmark, single-table part: how planning and appends grow with a table's file count.

One table is grown by commits of 1,000 files, one file in each of 1,000
partitions, and at each checkpoint size (10k, 100k, 1M files by default)
every system is measured:

- **full plan**: every live file, no filter;
- **one partition**: ``part = k`` (1,000 files at 1M);
- **narrow range**: an ``id`` range inside one file (``id`` grows with the
  file number, so min/max statistics separate the files);
- **append p50**: one small append (one row, one new file) committed, median
  of ``--appends``;
- **old version**: a narrow-range plan (of a file it holds) at the version
  where the table had half its files.

Each plan is repeated ``--repeats`` times warm; the median is reported with
the min-max spread. lakekv, DuckLake and pyiceberg's SQL catalog run as
``catalog_bench.py`` runs them (its ``benchmarks/lakehouse`` peers), side
by side on local disk. Each peer builds its table until ``--peer-limit-s``
seconds of building have passed and is reported as giving up at the size it
reached.

How each system's table is built (only planning and appends are measured):

- lakekv: each file is a placeholder object (a commit HEADs every file it
  references, so it must exist) and its catalog entry carries the
  statistics a written Parquet file of those rows would have; one
  ``Table.commit_files`` per 1,000 files. Planning never opens data files.
- peers: their ``add_files`` of ``catalog_bench.py`` (real tiny Parquet files,
  whose footers the peer reads), on the unpartitioned schema those peers
  share (``id``, ``amount``, ``tag``): they have no ``part`` column, so the
  one-partition plan is lakekv's only.

Run: ``.venv/bin/python benchmarks/scale_bench.py [--sizes 10000,100000,1000000]
[--systems lakekv,ducklake,pyiceberg] [--peer-limit-s 300] [--out DIR]``;
writes ``scale_bench.json`` under ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalog  # noqa: E402
from catalog.datafiles import DataFile, new_file_id  # noqa: E402
from catalog.schema import field_id  # noqa: E402
from lakehouse.data import NAMESPACE, file_contents  # noqa: E402
from lakehouse.system import make_system  # noqa: E402

PARTITIONS = 1_000  # files per commit: one per partition
ROWS_PER_FILE = 4
TABLE = f"{NAMESPACE}.scale"
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("part", pa.int32(), nullable=False),
    pa.field("amount", pa.float64()),
])


def _timed(fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    fn()  # warm
    times = []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "files": result}


def _narrow(file_number: int) -> tuple[int, int]:
    first = file_number * ROWS_PER_FILE
    return first + 1, first + ROWS_PER_FILE - 2


# -- lakekv --------------------------------------------------------------------------


class LakekvScale:
    label = "lakekv"

    def __init__(self, root: Path) -> None:
        # Two handles on one store: the table is built through one without
        # fsync (placeholders and 1,000-file commits, which are not measured);
        # everything measured goes through one with default options.
        self.builder = catalog.open(str(root / "lake"), fsync=False)
        self.builder.create_namespace(NAMESPACE)
        self.table = self.builder.create_table(TABLE, SCHEMA, partition_by=["part"])
        self.lake = catalog.open(str(root / "lake"))
        self.ids = {f.name: str(field_id(f)) for f in self.table.schema}
        self.files = 0
        self.versions: dict[int, int] = {}

    def grow(self) -> None:
        """Commit one file in each partition."""
        entries = []
        for p in range(PARTITIONS):
            number = self.files + p
            fid = new_file_id()
            path = f"{self.table.location}/{fid}.parquet"
            self.builder.objects.put(path, b"")  # a placeholder: the commit HEADs it; planning never reads it
            lo = number * ROWS_PER_FILE
            entries.append(DataFile(
                id=fid, path=path, size=0, rows=ROWS_PER_FILE,
                partition={self.ids["part"]: p},
                stats={
                    self.ids["id"]: [lo, lo + ROWS_PER_FILE - 1, 0],
                    self.ids["part"]: [p, p, 0],
                    self.ids["amount"]: [0.0, 999.0, 0],
                },
            ))
        version = self.table.commit_files(entries)
        self.files += PARTITIONS
        assert version is not None
        self.versions[self.files] = version

    def measure(self, repeats: int, appends: int) -> dict[str, Any]:
        lake = self.lake
        lake.refresh()
        number = self.files // 2 + 7
        lo, hi = _narrow(number)
        narrow = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        old = self.versions[self.files // 2]
        old_lo, old_hi = _narrow(self.files // 4 + 7)  # a file the old version holds
        old_narrow = (pc.field("id") >= old_lo) & (pc.field("id") <= old_hi)
        out = {
            "full_plan": _timed(lambda: len(lake.load_table(TABLE).files()), repeats),
            "one_partition": _timed(lambda: len(lake.load_table(TABLE).files(pc.field("part") == 123)), repeats),
            "narrow_range": _timed(lambda: len(lake.load_table(TABLE).files(narrow)), repeats),
        }

        def old_plan() -> int:
            with lake.at(version=old) as past:
                return len(past.load_table(TABLE).files(old_narrow))

        out["old_version"] = _timed(old_plan, repeats)
        out["append_p50"] = self._appends(appends)
        return out

    def _appends(self, count: int) -> dict[str, Any]:
        times = []
        for i in range(count):
            row = pa.table({"id": [-(i + 1)], "part": [999], "amount": [1.0]}, schema=SCHEMA)
            table = self.lake.load_table(TABLE)
            start = time.perf_counter()
            table.append(row)
            times.append((time.perf_counter() - start) * 1000)
        return {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "files": None}

    def close(self) -> None:
        self.lake.close()
        self.builder.close()


# -- the peers, through catalog_bench's systems ----------------------------------------


class PeerScale:
    def __init__(self, key: str, root: Path) -> None:
        self.system = make_system(key, root / key)
        self.label = self.system.label
        self.system.open()
        self.system.create_namespace(NAMESPACE)
        self.system.create_table(TABLE)
        self.files = 0
        self.versions: dict[int, int] = {}
        self.batch = 0

    def grow(self) -> None:
        contents = [file_contents(self.files + p, ROWS_PER_FILE, seed=1) for p in range(PARTITIONS)]
        version = self.system.add_files(TABLE, contents, self.batch)
        self.batch += 1
        self.files += PARTITIONS
        self.versions[self.files] = version

    def measure(self, repeats: int, appends: int) -> dict[str, Any]:
        s = self.system
        number = self.files // 2 + 7
        narrow = _narrow(number)
        old = self.versions[self.files // 2]
        old_narrow = _narrow(self.files // 4 + 7)  # a file the old version holds
        out = {
            "full_plan": _timed(lambda: s.plan(TABLE, None, None), repeats),
            "narrow_range": _timed(lambda: s.plan(TABLE, narrow, None), repeats),
            "old_version": _timed(lambda: s.plan(TABLE, old_narrow, old), repeats),
        }
        times = []
        for i in range(appends):
            rows = file_contents(10_000_000 + i, 1, seed=2)
            start = time.perf_counter()
            s.append(TABLE, rows)
            times.append((time.perf_counter() - start) * 1000)
        out["append_p50"] = {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "files": None}
        return out

    def close(self) -> None:
        self.system.close()


# -- the run ---------------------------------------------------------------------------


def run_system(
    key: str, root: Path, sizes: list[int], repeats: int, appends: int, limit_s: float | None, log: Callable[[str], None]
) -> dict[str, Any]:
    system: Any = LakekvScale(root) if key == "lakekv" else PeerScale(key, root)
    results: dict[str, Any] = {"label": system.label, "sizes": {}, "gave_up_at": None, "build_s": 0.0}
    try:
        for size in sizes:
            start = time.perf_counter()
            while system.files < size:
                if limit_s is not None and results["build_s"] + time.perf_counter() - start > limit_s:
                    results["build_s"] += time.perf_counter() - start
                    results["gave_up_at"] = system.files
                    log(f"{key}: gave up building at {system.files:,} files after {results['build_s']:.0f} s")
                    return results
                system.grow()
            results["build_s"] += time.perf_counter() - start
            log(f"{key}: {system.files:,} files built ({results['build_s']:.0f} s building so far)")
            results["sizes"][str(size)] = system.measure(repeats, appends)
            log(f"{key} @ {size:,}: " + ", ".join(
                f"{k} {v['ms']:.1f} ms" for k, v in results["sizes"][str(size)].items()
            ))
    finally:
        system.close()
    return results


_COLUMNS = ("full_plan", "one_partition", "narrow_range", "append_p50", "old_version")


def markdown(results: dict[str, Any]) -> str:
    """The results as a table: one row per system and size, median (min-max) in ms."""
    lines = [
        "| files | system | full plan | one partition | narrow range | append p50 | old-version plan |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size in results["sizes"]:
        for key, r in results["systems"].items():
            m = r["sizes"].get(str(size))
            if m is None:
                if r["gave_up_at"] is not None and r["gave_up_at"] < size:
                    lines.append(f"| {size:,} | {r['label']} | gave up at {r['gave_up_at']:,} files "
                                 f"({r['build_s']:.0f} s limit) | | | | |")
                continue
            cells = []
            for c in _COLUMNS:
                v = m.get(c)
                cells.append("n/a" if v is None else f"{v['ms']:.1f} ({v['min_ms']:.1f}–{v['max_ms']:.1f})")
            lines.append(f"| {size:,} | {r['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--systems", default="lakekv,ducklake,pyiceberg")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--appends", type=int, default=9)
    parser.add_argument("--peer-limit-s", type=float, default=300.0, help="seconds of table building each peer gets")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--dir", default=None, help="where the tables are built (default: a temporary directory)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if any(s % PARTITIONS or s < 2 * PARTITIONS for s in sizes):
        parser.error(f"sizes must be multiples of {PARTITIONS} and at least {2 * PARTITIONS}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "commit": commit,
        "sizes": sizes,
        "systems": {},
    }
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for key in args.systems.split(","):
            limit = None if key == "lakekv" else args.peer_limit_s
            results["systems"][key] = run_system(
                key, Path(tmp) / key, sizes, args.repeats, args.appends, limit, lambda line: print(line, flush=True)
            )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale_bench.json").write_text(json.dumps(results, indent=1))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
