"""CPU-time microbenchmark of the read paths (W4 point gets, W5 scans), lakekv beside LMDB.

Loads the harness's data set (``--rows`` 16-byte keys, 100-byte values, in
seeded random order, batches of 1000) into lakekv and LMDB through the
harness's own engine adapters, settles both as the harness does, then times
in this one process, with ``time.process_time`` (CPU time, so other
processes on a shared machine disturb it less than wall time):

* ``get``: the adapters' ``get`` over ``--gets`` uniform keys (hot pass);
* ``scan rows`` / ``scan arrow``: ``--scans`` ranges of 1000 keys through the
  adapters' row form and lakekv's Arrow form.

Each figure is the best of ``--repeat`` passes; the ratios lakekv ÷ LMDB come
from the same process and are what the harness's W4/W5 ratios approximate on
a quiet machine. ``--dir`` keeps the loaded stores between runs (the load is
the slow part). To compare two checkouts on the same stores, run this script
with ``PYTHONPATH`` pointing at the other checkout (its extensions built in
place): the script's directory supplies the harness, ``PYTHONPATH`` the engine.

Run: ``.venv/bin/python benchmarks/read_cpu_bench.py --dir /tmp/readbench``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.data import Values, load_batches, scan_ranges, uniform_keys  # noqa: E402
from harness.lakekv_engine import LakeKV  # noqa: E402
from harness.lmdb_engine import LMDB  # noqa: E402


WALL_OVER_CPU: dict[str, float] = {}


def best_of(repeat: int, fn, label: str = "") -> float:  # type: ignore[no-untyped-def]
    """Least CPU time of ``repeat`` calls; records that pass's wall ÷ CPU under ``label``."""
    best = float("inf")
    for _ in range(repeat):
        started, wall = time.process_time(), time.perf_counter()
        fn()
        cpu = time.process_time() - started
        if cpu < best:
            best = cpu
            WALL_OVER_CPU[label] = (time.perf_counter() - wall) / cpu if cpu else 0.0
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--gets", type=int, default=50_000)
    parser.add_argument("--scans", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, required=True, help="where the stores live (reused when loaded)")
    parser.add_argument("--only", choices=("get", "scan", "all"), default="all")
    args = parser.parse_args()

    lake = LakeKV(fsync=False, cache_bytes=512 << 20)
    lmdb = LMDB()
    loaded = args.dir / f"loaded-{args.rows}"
    for engine in (lake, lmdb):
        path = args.dir / f"{engine.key}-{args.rows}"
        path.mkdir(parents=True, exist_ok=True)
        engine.open(path)
    if not loaded.exists():
        for batch in load_batches(args.rows, 1000, 42, Values(42)):
            lake.write_batch(batch)
            lmdb.write_batch(batch)
        loaded.touch()
    print("lakekv settle:", lake.settle())
    layers = lake.db._state.layers
    print(f"layers: {len(layers.l0)} L0 SSTs, runs of {[len(run.ssts) for run in layers.runs]} SSTs,"
          f" memtable {len(layers.memtable)} keys")

    results: dict[str, dict[str, float]] = {}
    if args.only in ("get", "all"):
        keys = uniform_keys(args.rows, args.gets, 7)
        for engine in (lake, lmdb):
            get = engine.get

            def gets() -> None:
                for key in keys:
                    get(key)

            gets()  # warm the cache
            cpu = best_of(args.repeat, gets, f"get {engine.family}")
            results.setdefault("get µs", {})[engine.family] = cpu / len(keys) * 1e6
        db = lake.db
        get = db.get

        def direct() -> None:
            for key in keys:
                get(key)

        cpu = best_of(args.repeat, direct, "get lakekv Store.get direct")
        results["get µs"]["lakekv Store.get direct"] = cpu / len(keys) * 1e6
    if args.only in ("scan", "all"):
        ranges = scan_ranges(args.rows, args.scans, 1000, 11)
        forms = [(f"scan {form} Mrows/s", engine.key, fn) for engine in (lake, lmdb)
                 for form, fn in engine.scan_forms().items()]
        for label, key, scan in forms:
            def scans() -> None:
                for start, end in ranges:
                    scan(start, end, 1000)

            scans()
            cpu = best_of(args.repeat, scans, f"{label} {key}")
            results.setdefault(label, {})[key.split("-")[0]] = len(ranges) * 1000 / cpu / 1e6
    for label, row in results.items():
        figures = "  ".join(f"{k} {v:7.3f}" for k, v in row.items())
        ratio = ""
        if "lmdb" in row and "lakekv" in row:
            speed = row["lmdb"] / row["lakekv"] if "µs" in label else row["lakekv"] / row["lmdb"]
            ratio = f"  lakekv/LMDB speed {speed:.2f}x"
        print(f"{label:22} {figures}{ratio}")
    print("wall ÷ CPU of the passes above (>1: waiting, or other processes):",
          ", ".join(f"{k} {v:.2f}" for k, v in WALL_OVER_CPU.items()))
    if "scan arrow batches Mrows/s" in results and "scan rows Mrows/s" in results:
        arrow = results["scan arrow batches Mrows/s"]["lakekv"]
        print(f"arrow ÷ LMDB rows: {arrow / results['scan rows Mrows/s']['lmdb']:.2f}x")
    lake.close()
    lmdb.close()


if __name__ == "__main__":
    main()
