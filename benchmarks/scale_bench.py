"""Scale benchmark, single-table part: how planning and appends grow with a table's file count.

One table is grown by commits of 1,000 files, one file in each of 1,000
partitions, and at each checkpoint size (10k, 100k, 1M files by default)
every system is measured:

- **full plan**: every live file, no filter. lakekv's is the columnar plan
  (``Table.files_table()``: an Arrow table, one row per file, read from one
  packed value per commit's file group); ``full plan (list)`` is the same
  plan as ``Table.files()``, a list of ``DataFile`` objects (one timed run
  after a warm one: at 1M files it takes tens of seconds);
- **one partition**: ``part = k`` (1,000 files at 1M);
- **narrow range**: an ``id`` range inside one file (``id`` grows with the
  file number, so min/max statistics separate the files);
- **append p50**: one small append (one row, one new file) committed, median
  of ``--appends``. lakekv keeps a second table of 10,000 files in the same
  lakehouse and follows each append with the same append to it: the ratio
  of the two p50s shows how an append grows with its table apart from the
  machine's load (the two see the same load);
- **old version**: a narrow-range plan (of a file it holds) at the version
  where the table had half its files.
- **one partition, load then plan**: the one-partition plan as
  ``lake.load_table(t).files(f)``, two reads of the live lakehouse. Every
  other plan of the current version loads and plans through one view of now
  (``with lake.at() as now: now.load_table(t).files(f)``): on S3 a default
  (linearizable) read first checks for a newer root file, a GET round trip,
  and the view makes one check where the two reads make two.

Each plan is repeated ``--repeats`` times warm; the median is reported with
the min-max spread. lakekv, DuckLake and pyiceberg's SQL catalog run as
``catalog_bench.py`` runs them (its ``benchmarks/lakehouse`` peers), side
by side on local disk. Each peer builds its table until ``--peer-limit-s``
seconds of building have passed and is reported as giving up at the size it
reached. With ``--storage local,s3`` lakekv also runs with its lakehouse on
a SeaweedFS S3 server started for the run (``kvstore.testing.seaweed``;
the peers run on local disk only), building until ``--s3-limit-s``.

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
[--systems lakekv,ducklake,pyiceberg] [--storage local,s3] [--peer-limit-s 300]
[--s3-limit-s 3600] [--dir DIR [--keep]] [--out DIR] [--svg FILE]``; writes
``scale_bench.json`` under ``--out`` (default ``benchmarks/results``) and,
with ``--svg``, a growth plot of its numbers (``--from-json JSON`` prints an
earlier run's tables and plot). With S3, the S3 part runs first (its build
is the slow one: a placeholder PUT and a commit HEAD per file) and an
S3 ÷ local table of the plans follows the per-size tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
from results_file import run_header  # noqa: E402
from repeat_timer import timed  # noqa: E402

PARTITIONS = 1_000  # files per commit: one per partition
ROWS_PER_FILE = 4
TABLE = f"{NAMESPACE}.scale"
REFERENCE_TABLE = f"{NAMESPACE}.scale_reference"
REFERENCE_FILES = 10_000
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("part", pa.int32(), nullable=False),
    pa.field("amount", pa.float64()),
])


def _narrow(file_number: int) -> tuple[int, int]:
    first = file_number * ROWS_PER_FILE
    return first + 1, first + ROWS_PER_FILE - 2


# -- lakekv --------------------------------------------------------------------------


class LakekvScale:
    label = "lakekv"

    def __init__(self, root: Path, url: str | None = None, options: dict[str, Any] | None = None) -> None:
        # Two handles on one store: the table is built through one without
        # fsync (placeholders and 1,000-file commits, which are not measured);
        # everything measured goes through one with default options.
        url = url or str(root / "lake")
        options = options or {}
        if url.startswith("s3://"):
            self.label = "lakekv (S3)"
        self.builder = catalog.open(url, fsync=False, **options)
        self.builder.create_namespace(NAMESPACE)
        self.table = self.builder.create_table(TABLE, SCHEMA, partition_by=["part"])
        self.lake = catalog.open(url, **options)
        # On S3 a default (linearizable) read first probes for a newer root
        # file: one GET round trip per snapshot. A handle of serializable
        # reads (its own view, at most poll_interval_s behind) shows the
        # plans without it.
        self.view = catalog.open(url, read_consistency="serializable", **options) if url.startswith("s3://") else None
        self.ids = {f.name: str(field_id(f)) for f in self.table.schema}
        self.files = 0
        self.versions: dict[int, int] = {}
        # Placeholders go up from a few threads: on S3 each PUT is a round trip.
        self.pool = ThreadPoolExecutor(max_workers=16)
        # A table of REFERENCE_FILES beside it: its appends alternate with the
        # measured table's, so their ratio shows growth apart from the load.
        self.reference = self.builder.create_table(REFERENCE_TABLE, SCHEMA, partition_by=["part"])
        for first in range(0, REFERENCE_FILES, PARTITIONS):
            self._commit(self.reference, first)

    def grow(self) -> None:
        """Commit one file in each partition of the measured table."""
        version = self._commit(self.table, self.files)
        self.files += PARTITIONS
        self.versions[self.files] = version

    def _commit(self, table: catalog.Table, first: int) -> int:
        """Commit one file in each partition (file numbers from ``first``); return the version."""
        entries = []
        for p in range(PARTITIONS):
            number = first + p
            fid = new_file_id()
            path = f"{table.location}/{fid}.parquet"
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
        # A placeholder per file: the commit HEADs it; planning never reads it.
        list(self.pool.map(lambda e: self.builder.objects.put(e.path, b""), entries))
        version = table.commit_files(entries)
        assert version is not None
        return version

    def measure(self, repeats: int, appends: int) -> dict[str, Any]:
        out = self._plans(self.lake, repeats)
        out["append_p50"], out["append_reference_p50"] = self._appends(appends)
        if self.view is not None:
            out["serializable_reads"] = self._plans(self.view, repeats)
        return out

    def _plans(self, lake: catalog.Lakehouse, repeats: int) -> dict[str, Any]:
        lake.refresh()
        number = self.files // 2 + 7
        lo, hi = _narrow(number)
        narrow = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        old = self.versions[self.files // 2]
        old_lo, old_hi = _narrow(self.files // 4 + 7)  # a file the old version holds
        old_narrow = (pc.field("id") >= old_lo) & (pc.field("id") <= old_hi)

        def plan(files: Callable[[catalog.Table], int]) -> Callable[[], int]:
            # One view of now for the load and the plan: one freshness check
            # on S3, where lake.load_table(t).files(f) makes two.
            def run() -> int:
                with lake.at() as now:
                    return files(now.load_table(TABLE))
            return run

        out = {
            "full_plan": timed(plan(lambda t: t.files_table().num_rows), repeats),
            "full_plan_list": timed(plan(lambda t: len(t.files())), 1),
            "one_partition": timed(plan(lambda t: len(t.files(pc.field("part") == 123))), repeats),
            "narrow_range": timed(plan(lambda t: len(t.files(narrow))), repeats),
            # The same one-partition plan as two linearizable reads (a load, then a plan): two checks on S3.
            "one_partition_two_reads": timed(lambda: len(lake.load_table(TABLE).files(pc.field("part") == 123)), repeats),
        }

        def old_plan() -> int:
            with lake.at(version=old) as past:
                return len(past.load_table(TABLE).files(old_narrow))

        out["old_version"] = timed(old_plan, repeats)
        return out

    def _appends(self, count: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """One-row appends to the measured table, each followed by one to the reference table."""
        times: dict[str, list[float]] = {TABLE: [], REFERENCE_TABLE: []}
        for i in range(count):
            row = pa.table({"id": [-(i + 1)], "part": [999], "amount": [1.0]}, schema=SCHEMA)
            for name, found in times.items():
                table = self.lake.load_table(name)
                start = time.perf_counter()
                table.append(row)
                found.append((time.perf_counter() - start) * 1000)
        return tuple(  # type: ignore[return-value]
            {"ms": statistics.median(t), "min_ms": min(t), "max_ms": max(t), "result": None} for t in times.values()
        )

    def close(self) -> None:
        self.pool.shutdown()
        if self.view is not None:
            self.view.close()
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
            "full_plan": timed(lambda: s.plan(TABLE, None, None), repeats),
            "narrow_range": timed(lambda: s.plan(TABLE, narrow, None), repeats),
            "old_version": timed(lambda: s.plan(TABLE, old_narrow, old), repeats),
        }
        times = []
        for i in range(appends):
            rows = file_contents(10_000_000 + i, 1, seed=2)
            start = time.perf_counter()
            s.append(TABLE, rows)
            times.append((time.perf_counter() - start) * 1000)
        out["append_p50"] = {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "result": None}
        return out

    def close(self) -> None:
        self.system.close()


# -- the run ---------------------------------------------------------------------------


def run_system(
    system: Any, sizes: list[int], repeats: int, appends: int, limit_s: float | None, log: Callable[[str], None]
) -> dict[str, Any]:
    """Grow ``system``'s table through ``sizes``, measuring at each; stop building after ``limit_s`` seconds."""
    key = system.label
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
            measured = system.measure(repeats, appends)
            view = measured.pop("serializable_reads", None)
            results["sizes"][str(size)] = measured
            if view is not None:  # the same store through a handle of serializable reads: another row
                results.setdefault("serializable_reads", {})[str(size)] = view
            for label, m in ((key, measured), (f"{key}, serializable reads", view)):
                if m is not None:
                    log(f"{label} @ {size:,}: " + ", ".join(f"{k} {v['ms']:.1f} ms" for k, v in m.items()))
    finally:
        system.close()
    return results


_COLUMNS = {
    "full_plan": "full plan",
    "full_plan_list": "full plan (list)",
    "one_partition": "one partition",
    "narrow_range": "narrow range",
    "one_partition_two_reads": "one partition, load then plan",
    "append_p50": "append p50",
    "append_reference_p50": "append p50, 10k-file table, same run",
    "old_version": "old-version plan",
}


def _cell(v: dict[str, Any] | None, key: str = "ms") -> str:
    if v is None:
        return "n/a"
    if key != "ms":
        return f"{v[key]:,.1f}" if v.get(key) is not None else "n/a"
    return f"{v['ms']:,.1f} ({v['min_ms']:,.1f}–{v['max_ms']:,.1f})"


def markdown(results: dict[str, Any]) -> str:
    """The results as one table per size: a row per system, median (min-max) in ms."""
    header = (
        "| system | full plan | full plan, first | full plan (list) | one partition | narrow range | old-version plan "
        "| one partition, load then plan | append p50 | append p50, 10k-file table | append ÷ 10k-file append |"
    )
    out = []
    for size in results["sizes"]:
        lines = [f"#### {size:,} files", "", header, "|---|" + "---:|" * 10]
        for r in results["systems"].values():
            m = r["sizes"].get(str(size))
            if m is None:
                if r["gave_up_at"] is not None and r["gave_up_at"] < size:
                    lines.append(f"| {r['label']} | gave up building at {r['gave_up_at']:,} files "
                                 f"({r['build_s']:.0f} s limit) |" + " |" * 9)
                continue
            paired = m.get("append_p50"), m.get("append_reference_p50")
            ratio = f"{paired[0]['ms'] / paired[1]['ms']:.2f}" if paired[0] and paired[1] else "n/a"
            cells = [
                _cell(m.get("full_plan")),
                _cell(m.get("full_plan"), "first_ms"),
                _cell(m.get("full_plan_list")),
                _cell(m.get("one_partition")),
                _cell(m.get("narrow_range")),
                _cell(m.get("old_version")),
                _cell(m.get("one_partition_two_reads")),
                _cell(m.get("append_p50")),
                _cell(m.get("append_reference_p50")),
                ratio,
            ]
            lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


_S3_PLANS = ("one_partition", "narrow_range", "full_plan", "old_version", "one_partition_two_reads")


def s3_markdown(results: dict[str, Any]) -> str:
    """S3 against local disk, plan by plan at each size both reached: median ms and their ratio.

    Empty when the run had no S3 part.
    """
    systems = results["systems"]
    local, s3, view = systems.get("lakekv"), systems.get("lakekv-s3"), systems.get("lakekv-s3-view")
    if local is None or s3 is None:
        return ""
    lines = [
        "| files | plan | local | S3 | S3 ÷ local | S3, serializable reads | ÷ local |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size, measured in s3["sizes"].items():
        here = local["sizes"].get(size)
        if here is None:
            continue
        seen = (view or {}).get("sizes", {}).get(size, {})
        for plan in _S3_PLANS:
            if plan not in measured or plan not in here:
                continue
            base = here[plan]["ms"]
            cells = [f"{int(size):,}", _COLUMNS[plan], f"{base:,.1f}", f"{measured[plan]['ms']:,.1f}",
                     f"{measured[plan]['ms'] / base:.2f}×"]
            cells += [f"{seen[plan]['ms']:,.1f}", f"{seen[plan]['ms'] / base:.2f}×"] if plan in seen else ["n/a", "n/a"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the growth plot ---------------------------------------------------------------------

_PANEL_W, _PANEL_H, _PAD = 230, 190, 44
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def growth_svg(results: dict[str, Any]) -> str:
    """A small SVG of ``results``: one log-log panel per measurement (ms against files), a line per system.

    Each point is a measured median; its whisker is the min-max spread.
    """
    import math

    panels = [c for c in _COLUMNS if any(c in m for r in results["systems"].values() for m in r["sizes"].values())]
    systems = [r for r in results["systems"].values() if r["sizes"]]
    values = [
        v[k] for r in systems for m in r["sizes"].values() for c in panels if (v := m.get(c))
        for k in ("min_ms", "max_ms", "first_ms") if v.get(k)
    ]
    lo_ms, hi_ms = max(min(values), 0.1), max(values)
    y_lo, y_hi = math.floor(math.log10(lo_ms)), math.ceil(math.log10(hi_ms))
    sizes = [int(s) for s in results["sizes"]]
    x_lo, x_hi = math.log10(min(sizes)), math.log10(max(sizes))
    width = _PAD + len(panels) * (_PANEL_W + _PAD)
    height = _PANEL_H + 2 * _PAD + 18 * len(systems)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{_PAD}" y="16" font-size="13">scale_bench {results["date"]} (commit {results["commit"]}): '
        "median ms (log) against files (log); whiskers min–max; dashed: a full plan's first run</text>",
    ]

    def x_of(size: float, left: float) -> float:
        return left + (math.log10(size) - x_lo) / max(x_hi - x_lo, 1e-9) * _PANEL_W

    def y_of(ms: float) -> float:
        return _PAD + _PANEL_H - (math.log10(max(ms, 10.0**y_lo)) - y_lo) / max(y_hi - y_lo, 1) * _PANEL_H

    for i, column in enumerate(panels):
        left = _PAD + i * (_PANEL_W + _PAD)
        out.append(f'<text x="{left}" y="{_PAD - 8}" font-weight="bold">{_COLUMNS[column]}</text>')
        out.append(f'<rect x="{left}" y="{_PAD}" width="{_PANEL_W}" height="{_PANEL_H}" fill="none" stroke="#999"/>')
        for e in range(y_lo, y_hi + 1):
            y = y_of(10.0**e)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + _PANEL_W}" y2="{y:.1f}" stroke="#eee"/>')
            label = f"{10.0**e:g}"
            out.append(f'<text x="{left - 3}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
        for size in sizes:
            x = x_of(size, left)
            out.append(f'<text x="{x:.1f}" y="{_PAD + _PANEL_H + 14}" text-anchor="middle">{size // 1000:,}k</text>')
        for colour, r in zip(_COLOURS, systems):
            points = [(int(s), m[column]) for s, m in r["sizes"].items() if m.get(column)]
            if not points:
                continue
            path = " ".join(f"{x_of(s, left):.1f},{y_of(v['ms']):.1f}" for s, v in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            if column == "full_plan" and all(v.get("first_ms") for _, v in points):  # the first (cold) run, dashed
                first = " ".join(f"{x_of(s, left):.1f},{y_of(v['first_ms']):.1f}" for s, v in points)
                out.append(f'<polyline points="{first}" fill="none" stroke="{colour}" stroke-dasharray="4,3"/>')
            for s, v in points:
                x = x_of(s, left)
                out.append(f'<line x1="{x:.1f}" y1="{y_of(v["min_ms"]):.1f}" x2="{x:.1f}" y2="{y_of(v["max_ms"]):.1f}" '
                           f'stroke="{colour}"/>')
                out.append(f'<circle cx="{x:.1f}" cy="{y_of(v["ms"]):.1f}" r="2.5" fill="{colour}">'
                           f'<title>{r["label"]} {s:,} files: {v["ms"]:.1f} ms</title></circle>')
    for j, (colour, r) in enumerate(zip(_COLOURS, systems)):
        y = _PAD + _PANEL_H + 34 + 18 * j
        gave_up = f" (gave up building at {r['gave_up_at']:,} files)" if r["gave_up_at"] is not None else ""
        out.append(f'<rect x="{_PAD}" y="{y - 9}" width="14" height="4" fill="{colour}"/>')
        out.append(f'<text x="{_PAD + 20}" y="{y - 4}">{r["label"]}{gave_up}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--systems", default="lakekv,ducklake,pyiceberg")
    parser.add_argument("--storage", default="local", help="where lakekv's lakehouse lives: local, s3 or local,s3")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--appends", type=int, default=9)
    parser.add_argument("--peer-limit-s", type=float, default=300.0, help="seconds of table building each peer gets")
    parser.add_argument("--s3-limit-s", type=float, default=3600.0, help="seconds of table building lakekv gets on S3")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--svg", default=None, help="also draw the growth plot of the results to this file")
    parser.add_argument("--from-json", default=None, metavar="JSON",
                        help="run nothing: print an earlier run's tables (and draw its --svg)")
    parser.add_argument("--dir", default=None, help="where the tables are built (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the built stores (a directory under --dir, named in the output) instead of deleting them")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        earlier = json.loads(Path(args.from_json).read_text())
        if args.svg is not None:
            Path(args.svg).write_text(growth_svg(earlier))
        print(markdown(earlier))
        if s3_markdown(earlier):
            print("\n" + s3_markdown(earlier))
        return 0
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if any(s % (2 * PARTITIONS) or s <= 0 for s in sizes):  # the old-version plan is at half the size
        parser.error(f"sizes must be positive multiples of {2 * PARTITIONS}")
    storages = args.storage.split(",")
    if not storages or any(s not in ("local", "s3") for s in storages):
        parser.error(f"--storage takes local, s3 or both, not {args.storage!r}")
    systems = args.systems.split(",")
    if "s3" in storages and "lakekv" not in systems:
        parser.error("--storage s3 runs lakekv only: add lakekv to --systems")
    results = run_header(sizes=sizes, systems={})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(line, flush=True)

    # The S3 part runs first: its build is the slow one, and --s3-limit-s
    # then bounds it in wall-clock terms from the start of the run.
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="scale_bench-", dir=args.dir)
            log(f"building under {tmp} (kept)")
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=args.dir))
        s3_rows: dict[str, Any] = {}
        if "s3" in storages:
            from kvstore.testing.seaweed import SeaweedServer

            seaweed = SeaweedServer(str(Path(tmp) / "seaweed")).start()
            try:
                url, options = seaweed.new_url()
                system = LakekvScale(Path(tmp) / "lakekv-s3", url, options)
                s3 = run_system(system, sizes, args.repeats, args.appends, args.s3_limit_s, log)
                view = s3.pop("serializable_reads", {})
                s3_rows["lakekv-s3"] = s3
                s3_rows["lakekv-s3-view"] = {**s3, "label": "lakekv (S3, serializable reads)", "sizes": view}
                (out / "scale_bench.json").write_text(json.dumps({**results, "systems": s3_rows}, indent=1))
            finally:
                seaweed.stop()
        for key in systems:
            if key == "lakekv" and "local" not in storages:
                continue
            local: LakekvScale | PeerScale = LakekvScale(Path(tmp) / key) if key == "lakekv" else PeerScale(key, Path(tmp) / key)
            limit = None if key == "lakekv" else args.peer_limit_s
            results["systems"][key] = run_system(local, sizes, args.repeats, args.appends, limit, log)
            (out / "scale_bench.json").write_text(json.dumps({**results, "systems": {**results["systems"], **s3_rows}}, indent=1))
        results["systems"].update(s3_rows)
    (out / "scale_bench.json").write_text(json.dumps(results, indent=1))
    if args.svg is not None:
        Path(args.svg).write_text(growth_svg(results))
    print(markdown(results))
    if s3_markdown(results):
        print("\n" + s3_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
