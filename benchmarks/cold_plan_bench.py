"""A first full plan in a fresh process: ``Table.files_table()`` of scale_bench's big table, cold and warm.

A process that plans every file of a table for the first time reads every
file group's pack from the store; later plans in it read only the groups'
summaries. This script times that first plan in fresh processes, taking
turns between runs that may each use another checkout of this repository
and another lakehouse, so two revisions are compared under the same load:

    # build a lakehouse of 1,000,000 files (scale_bench's table; ~6-20 min)
    .venv/bin/python benchmarks/cold_plan_bench.py --build /tmp/cold/t1m --files 1000000
    # main's code on a lakehouse main built, this checkout's on its own
    .venv/bin/python benchmarks/cold_plan_bench.py --rounds 5 \\
        --run main=/work/main:/tmp/cold/main-t1m --run head=.:/tmp/cold/t1m

Each fresh process opens the lakehouse, loads the table and times its first
``files_table()`` (with the user and system CPU time it took and its minor
page faults), then five warm repeats. Per run the script prints every
process's line and the median and range of the first plans, with the load
average when each process ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

# What a fresh process runs (with the run's checkout first on sys.path).
_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import catalog, scale_bench
lake = catalog.open(os.path.join(sys.argv[2], "lake"))
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
rows = lake.load_table(scale_bench.TABLE).files_table().num_rows
first = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
warm = []
for _ in range(5):
    start = time.perf_counter()
    lake.load_table(scale_bench.TABLE).files_table()
    warm.append(time.perf_counter() - start)
print(json.dumps({
    "rows": rows, "first_ms": first * 1000, "warm_p50_ms": sorted(warm)[2] * 1000,
    "user_ms": (after.ru_utime - before.ru_utime) * 1000, "sys_ms": (after.ru_stime - before.ru_stime) * 1000,
    "minor_faults": after.ru_minflt - before.ru_minflt, "load": os.getloadavg()[0],
}))
lake.close()
"""


def build(root: Path, files: int) -> None:
    """A lakehouse at ``root`` holding scale_bench's table grown to ``files`` files (and its 10k-file reference)."""
    sys.path.insert(0, str(_HERE))
    import scale_bench

    root.mkdir(parents=True, exist_ok=True)
    scale = scale_bench.LakekvScale(root)
    start = time.perf_counter()
    while scale.files < files:
        scale.grow()
        if scale.files % 100_000 == 0:
            print(f"{scale.files:,} files, {time.perf_counter() - start:.0f} s", flush=True)
    scale.close()


def first_plan(checkout: Path, lake: Path) -> dict[str, Any]:
    """One fresh process's first and warm full plans, with ``checkout``'s code."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(checkout), str(lake)],
        cwd=checkout, env=env, check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="build a lakehouse here, then stop")
    parser.add_argument("--files", type=int, default=1_000_000, help="files of the table --build makes")
    parser.add_argument(
        "--run", action="append", default=[], metavar="NAME=CHECKOUT:LAKE",
        help="a run: the checkout whose code plans, and the lakehouse root (repeat to take turns)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per run")
    args = parser.parse_args()
    if args.build is not None:
        build(args.build, args.files)
        return
    if not args.run:
        parser.error("give --build or at least one --run")
    runs: list[tuple[str, Path, Path]] = []
    for spec in args.run:
        name, sep, rest = spec.partition("=")
        checkout, sep2, lake = rest.partition(":")
        if not (sep and sep2 and name and checkout and lake):
            parser.error(f"--run {spec!r}: expected NAME=CHECKOUT:LAKE")
        if not (Path(lake) / "lake").is_dir():
            parser.error(f"--run {spec!r}: {lake} holds no lakehouse (no lake/ directory)")
        runs.append((name, Path(checkout).resolve(), Path(lake).resolve()))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in runs}
    for round_ in range(args.rounds):
        for name, checkout, lake in runs:
            r = first_plan(checkout, lake)
            results[name].append(r)
            print(
                f"round {round_ + 1} {name:>8}: first {r['first_ms']:7.1f} ms (user {r['user_ms']:4.0f}, "
                f"sys {r['sys_ms']:4.0f}, {r['minor_faults']:6d} faults), warm p50 {r['warm_p50_ms']:5.1f} ms, "
                f"{r['rows']:,} files, load {r['load']:.1f}",
                flush=True,
            )
    print()
    for name, rs in results.items():
        firsts = [r["first_ms"] for r in rs]
        warm = [r["warm_p50_ms"] for r in rs]
        loads = [r["load"] for r in rs]
        print(
            f"{name:>8}: first plan median {statistics.median(firsts):.0f} ms ({min(firsts):.0f}-{max(firsts):.0f}), "
            f"warm p50 {statistics.median(warm):.1f} ms ({min(warm):.1f}-{max(warm):.1f}), "
            f"load average {min(loads):.1f}-{max(loads):.1f}"
        )


if __name__ == "__main__":
    main()
