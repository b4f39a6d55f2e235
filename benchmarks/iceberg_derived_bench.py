"""What serving a native table as an Iceberg v2 table costs (catalog.iceberg_derived).

Run: ``.venv/bin/python benchmarks/iceberg_derived_bench.py [--files N] [--appends K] [--rounds R]``.

Builds a partitioned native table of ``--files`` data files (default
10,000) in ``--appends`` commits on a local directory, then prints:

* **first derivation** of the never-derived table, in a fresh process (no
  cache: every retained version's manifests, manifest lists and the
  ``metadata.json``), goal <= 2 s;
* **derive right after one more append**, p50 and max over ``--rounds``
  appends of one file each, in a long-lived process (what a server's
  ``loadTable`` does), goal <= 50 ms;
* the same in a fresh process each time (another process derived the
  previous version: its files are reused, nothing is cached in memory);
* a **full scan** through the derived metadata by DuckDB (``iceberg_scan``)
  and pyiceberg, against each reading the same Parquet files directly
  (goal >= 0.9x), on a table of ``--scan-rows`` rows in 8 files, each
  read once per round in interleaved rounds (the median ratio is printed
  with its spread).

Derivation is lazy (never on the commit path), so native appends cost what
they did before this module; the append latency is printed beside it for
scale. CPU time is printed beside wall time: on a shared machine the wall
time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute below

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import catalog  # noqa: E402 - needs the path set above
from catalog import iceberg_derived  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])

_FRESH = """
import json, sys, time
t0 = time.perf_counter()
import catalog
from catalog import iceberg_derived
with catalog.open(sys.argv[1], create=False, poll_interval_s=0, background=False) as lake:
    t1, c1 = time.perf_counter(), time.process_time()
    derived = iceberg_derived.derive(lake, "bench.t")
    t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import_open_s": t1 - t0, "derive_s": t2 - t1, "derive_cpu_s": c2 - c1, "snapshots": len(derived.metadata.snapshots)}))
"""


def _fresh_derive(root: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _FRESH, root], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--scan-rows", type=int, default=2_000_000)
    parser.add_argument("--skip-build", action="store_true", help="only the full-scan comparison")
    args = parser.parse_args()
    if args.skip_build:
        _scan_comparison(args.scan_rows)
        return 0
    per_append = max(1, args.files // args.appends)
    with tempfile.TemporaryDirectory(prefix="iceberg-derived-bench-") as tmp:
        root = str(Path(tmp) / "lake")
        with catalog.open(root, poll_interval_s=0) as lake:
            lake.create_namespace("bench")
            table = lake.create_table("bench.t", SCHEMA, partition_by=["part"])
            start = time.perf_counter()
            row = 0
            for _ in range(args.appends):
                # One file per partition value: per_append files per commit.
                ids = list(range(row, row + per_append))
                row += per_append
                table.append(pa.table({"id": ids, "part": pa.array(range(per_append), pa.int32()), "name": [str(i) for i in ids]}))
            build_s = time.perf_counter() - start
            files = len(lake.load_table("bench.t").files())
            print(f"table: {files} files in {args.appends} appends (built in {build_s:.1f} s)")

        first = _fresh_derive(root)
        print(
            f"first derivation, never derived, fresh process: {first['derive_s'] * 1000:.0f} ms "
            f"(CPU {first['derive_cpu_s'] * 1000:.0f} ms; {int(first['snapshots'])} snapshots; "
            f"import+open {first['import_open_s'] * 1000:.0f} ms)  goal <= 2000 ms"
        )

        with catalog.open(root, poll_interval_s=0) as lake:
            table = lake.load_table("bench.t")
            iceberg_derived.derive(lake, "bench.t")  # this process's state: what a server holds
            appends, derives, cpu = [], [], []
            for i in range(args.rounds):
                data = pa.table({"id": [row + i], "part": pa.array([0], pa.int32()), "name": ["x"]})
                t0 = time.perf_counter()
                table.append(data)
                t1, c1 = time.perf_counter(), time.process_time()
                iceberg_derived.derive(lake, "bench.t")
                t2, c2 = time.perf_counter(), time.process_time()
                appends.append(t1 - t0)
                derives.append(t2 - t1)
                cpu.append(c2 - c1)
            p50 = statistics.median(derives) * 1000
            print(
                f"derive right after one more append, long-lived process: p50 {p50:.1f} ms (CPU p50 "
                f"{statistics.median(cpu) * 1000:.1f} ms), max {max(derives) * 1000:.1f} ms over {args.rounds}  goal <= 50 ms  "
                f"(the append itself: p50 {statistics.median(appends) * 1000:.1f} ms)"
            )
            cold = []
            for i in range(min(5, args.rounds)):
                table.append(pa.table({"id": [row + args.rounds + i], "part": pa.array([1], pa.int32()), "name": ["y"]}))
                cold.append(_fresh_derive(root)["derive_s"])
            print(
                f"derive right after one more append, fresh process (previous version's files reused): "
                f"p50 {statistics.median(cold) * 1000:.0f} ms over {len(cold)}"
            )
    _scan_comparison(args.scan_rows)
    return 0


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall time and this process's CPU time (every thread's: the readers decode in threads) of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _scan_comparison(rows: int, rounds: int = 10) -> None:
    """Full scans through the derived metadata against reading the same Parquet files directly.

    The table: ``rows`` rows of (id int64, part int32, name string),
    partitioned by ``part`` into 8 files of one row group each, as one
    native append writes them. Each round times the four reads once: the
    DuckDB pair, then the pyarrow pair, each pair's two reads back to back
    in an order that swaps every round, so a change in a shared machine's
    load falls on both sides of a ratio; the ratio is the median of the
    rounds' ratios, printed with its spread (the lowest and highest round).
    The CPU time ratio (the process's, every thread's) is printed beside:
    on a machine other processes load, it moves less than wall time.

    Why this order: a read pays for what ran just before it. A read right
    after a DuckDB read (whose 2M-row result was just freed) re-grows Arrow's
    memory: in the old order (the whole list reversed every other round)
    pyiceberg's reads took a median 720-2,260 minor page faults against
    ``read_table``'s 90-250, and 5-10 ms more CPU. That order put pyiceberg
    right after DuckDB in every other round and ``read_table`` never (it ran
    twice in a row at every other round boundary instead), so the ratio
    charged pyiceberg for DuckDB. Here, over any two consecutive rounds,
    each read of a pair follows the same kinds of reads as its partner.
    """
    import os

    import duckdb
    import duckdb_ext
    import pyarrow.parquet as pq
    from pyiceberg.table import StaticTable

    with tempfile.TemporaryDirectory(prefix="iceberg-derived-scan-") as tmp:
        root = str(Path(tmp) / "lake")
        with catalog.open(root, poll_interval_s=0) as lake:
            lake.create_namespace("bench")
            table = lake.create_table("bench.scan", SCHEMA, partition_by=["part"])
            ids = pa.array(range(rows), pa.int64())
            table.append(pa.table({"id": ids, "part": pa.compute.cast(pa.compute.divide(ids, max(1, rows // 8)), pa.int32()),
                                   "name": pa.compute.cast(ids, pa.string())}))
            location = iceberg_derived.derive(lake, "bench.scan").metadata_location
            paths = [str(Path(root) / f.path) for f in lake.load_table("bench.scan").files()]
        extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
        con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
        con.execute("LOAD iceberg")
        listed = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
        static = StaticTable.from_metadata(location)
        reads: dict[str, Callable[[], object]] = {
            "duckdb_iceberg": lambda: con.execute(f"SELECT * FROM iceberg_scan('{location}')").fetch_arrow_table(),
            "duckdb_direct": lambda: con.execute(f"SELECT * FROM read_parquet({listed})").fetch_arrow_table(),
            "pyiceberg": lambda: static.scan().to_arrow(),
            "pyarrow_direct": lambda: pa.concat_tables([pq.read_table(p) for p in paths]),
        }
        for read in reads.values():
            read()  # warm: the page cache, DuckDB's extension, pyiceberg's thread pool
        times: dict[str, list[float]] = {name: [] for name in reads}
        cpu: dict[str, list[float]] = {name: [] for name in reads}
        pairs = [["duckdb_iceberg", "duckdb_direct"], ["pyiceberg", "pyarrow_direct"]]
        for round_ in range(rounds):
            for name in [read for pair in pairs for read in (pair if round_ % 2 == 0 else reversed(pair))]:
                wall, used = _timed_cpu(reads[name])
                times[name].append(wall)
                cpu[name].append(used)
        # The derived metadata's share of pyiceberg's scan: planning (reading the list and manifests).
        py_plan = min(_timed(lambda: list(static.scan().plan_files())) for _ in range(3))

    def ratio(direct: str, iceberg: str) -> tuple[float, float, float]:
        each = [d / i for d, i in zip(times[direct], times[iceberg])]
        return statistics.median(each), min(each), max(each)

    def cpu_ratio(direct: str, iceberg: str) -> float:
        return statistics.median(d / i for d, i in zip(cpu[direct], cpu[iceberg]) if i > 0)

    def ms(name: str) -> str:
        return f"{statistics.median(times[name]) * 1000:.0f} ms"

    duck, duck_lo, duck_hi = ratio("duckdb_direct", "duckdb_iceberg")
    py, py_lo, py_hi = ratio("pyarrow_direct", "pyiceberg")
    print(
        f"full scan of {rows} rows in {len(paths)} files (id int64, part int32, name string; one file per partition), "
        f"medians of {rounds} interleaved rounds: DuckDB iceberg_scan {ms('duckdb_iceberg')} vs read_parquet "
        f"{ms('duckdb_direct')}: {duck:.2f}x (rounds {duck_lo:.2f}-{duck_hi:.2f}; CPU "
        f"{cpu_ratio('duckdb_direct', 'duckdb_iceberg'):.2f}x); pyiceberg {ms('pyiceberg')} "
        f"(of which planning {py_plan * 1000:.1f} ms) vs pyarrow read_table {ms('pyarrow_direct')}: {py:.2f}x "
        f"(rounds {py_lo:.2f}-{py_hi:.2f}; CPU {cpu_ratio('pyarrow_direct', 'pyiceberg'):.2f}x)  goal >= 0.9x: "
        f"DuckDB {'MET' if duck >= 0.9 else 'NOT MET'}, pyiceberg {'MET' if py >= 0.9 else 'NOT MET'}"
    )


if __name__ == "__main__":
    sys.exit(main())
