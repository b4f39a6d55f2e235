"""Plans of scale_bench's big table on SeaweedFS S3 beside the same lakehouse on local disk.

Building a 1M-file table on SeaweedFS through scale_bench takes about 75
minutes (a placeholder PUT and a commit HEAD per file), so this script
measures S3 planning at 1M files another way: it uploads the store of a
lakehouse scale_bench (or ``cold_plan_bench.py --build``) built on local disk
— its root files, trees and SSTs, byte for byte — to a fresh prefix of a
SeaweedFS server it starts, and plans the same table through both. The
placeholder data files are not uploaded: planning never opens a data file.

Plans (as scale_bench's): the full plan (``files_table()``), one partition,
a narrow ``id`` range (one file) and that range at the version where the
table had half its files, each loaded and planned through one view of now
(``lake.at()``, one freshness check on S3). The S3 handle plans first, so its
first full plan reads every pack from S3; then rounds alternate which side
goes first, three repeats of each plan per round, and the medians, spreads
and S3 ÷ local ratios are printed.

Run: ``.venv/bin/python benchmarks/scale_s3_copy.py LAKEHOUSE_DIR [--rounds 5]``,
where ``LAKEHOUSE_DIR`` holds ``lake/`` and ``versions.json`` (files -> version,
as ``cold_plan_bench.py --build`` writes them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow.compute as pc  # noqa: E402

import catalog  # noqa: E402
import scale_bench  # noqa: E402
from kvstore.objstore import open_store  # noqa: E402
from kvstore.testing.seaweed import SeaweedServer  # noqa: E402


def plans(lake: catalog.Lakehouse, files: int, versions: dict[int, int]) -> dict[str, Callable[[], int]]:
    lo, hi = scale_bench._narrow(files // 2 + 7)
    narrow = (pc.field("id") >= lo) & (pc.field("id") <= hi)
    old = versions[files // 2]
    old_lo, old_hi = scale_bench._narrow(files // 4 + 7)  # a file the old version holds
    old_narrow = (pc.field("id") >= old_lo) & (pc.field("id") <= old_hi)

    def now(plan: Callable[[catalog.Table], int]) -> Callable[[], int]:
        def run() -> int:
            with lake.at() as view:
                return plan(view.load_table(scale_bench.TABLE))
        return run

    def old_version() -> int:
        with lake.at(version=old) as past:
            return len(past.load_table(scale_bench.TABLE).files(old_narrow))

    return {
        "full plan": now(lambda t: t.files_table().num_rows),
        "one partition": now(lambda t: len(t.files(pc.field("part") == 123))),
        "narrow range": now(lambda t: len(t.files(narrow))),
        "old version": old_version,
    }


def upload(lake_dir: Path, url: str, options: dict[str, str]) -> int:
    """Every object of the store under ``lake_dir`` but the data files; returns how many."""
    store = open_store(url, **options)
    try:
        paths = [p for p in lake_dir.rglob("*") if p.is_file() and p.relative_to(lake_dir).parts[0] != "data"]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: store.put(p.relative_to(lake_dir).as_posix(), p.read_bytes()), paths))
        return len(paths)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lakehouse", type=Path, help="a directory with lake/ and versions.json")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    lake_dir = args.lakehouse / "lake"
    if not (args.lakehouse / "versions.json").is_file() or not lake_dir.is_dir():
        parser.error(f"{args.lakehouse} has no lake/ and versions.json (build one with cold_plan_bench.py --build)")
    versions = {int(k): v for k, v in json.loads((args.lakehouse / "versions.json").read_text()).items()}
    files = max(versions)
    with tempfile.TemporaryDirectory(prefix="scale-s3-") as weed_dir, SeaweedServer(weed_dir) as weed:
        url, options = weed.new_url()
        started = time.perf_counter()
        count = upload(lake_dir, url, options)
        print(f"uploaded {count:,} objects of {lake_dir} in {time.perf_counter() - started:.0f} s", flush=True)
        handles = {"S3": catalog.open(url, **options), "local": catalog.open(str(lake_dir))}
        try:
            for side, lake in handles.items():  # S3 first: its first plan reads every pack from S3
                started = time.perf_counter()
                rows = plans(lake, files, versions)["full plan"]()
                print(f"{side}: first full plan {(time.perf_counter() - started) * 1000:,.0f} ms ({rows:,} files)")
            samples: dict[str, dict[str, list[float]]] = {side: {} for side in handles}
            for round_number in range(args.rounds):
                order = ("local", "S3") if round_number % 2 == 0 else ("S3", "local")
                for side in order:
                    for name, plan in plans(handles[side], files, versions).items():
                        for _ in range(3):
                            started = time.perf_counter()
                            plan()
                            samples[side].setdefault(name, []).append((time.perf_counter() - started) * 1000)
        finally:
            for lake in handles.values():
                lake.close()
    print(f"\n{files:,} files, {args.rounds} rounds of 3, load average {os.getloadavg()[0]:.1f}\n")
    print("| plan | local ms (min–max) | S3 ms (min–max) | S3 ÷ local |")
    print("|---|---:|---:|---:|")
    for name, local in samples["local"].items():
        s3 = samples["S3"][name]
        ratio = statistics.median(s3) / statistics.median(local)
        print(f"| {name} | {statistics.median(local):.1f} ({min(local):.1f}–{max(local):.1f}) | "
              f"{statistics.median(s3):.1f} ({min(s3):.1f}–{max(s3):.1f}) | {ratio:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
