"""Issue 34's cost goals for native tables served as Iceberg, in one run, each beside its goal.

Run: ``.venv/bin/python benchmarks/iceberg_bench.py [--files N] [--appends K]
[--rounds R] [--base REV] [--compare-rounds N] [--compare-appends N] [--skip-compare]``. Prints:

1. **REST loadTable right after one more append**: ``lakekv serve`` on a
   local lakehouse holding a partitioned native table of ``--files`` data
   files (default 10,000, built in ``--appends`` commits); this process
   appends one file, then times ``GET /v1/namespaces/bench/tables/t`` with
   an HTTP client (``http.client``, one kept-alive connection), checking
   that the answer's current snapshot is the append's version. p50 and max
   over ``--rounds``; goal p50 <= 50 ms.
2. **First load of the never-loaded table**: the same request before any
   derivation (the server derives every retained version's manifests and
   lists and the ``metadata.json``), goal <= 2 s; and, on a copy of the
   lakehouse made before it, ``iceberg_derived.derive`` in a fresh process
   (no server, no HTTP), wall and CPU time.
3. **Native appends before and after the change**: runs
   ``benchmarks/compare_revisions.py --base REV --appends N`` (both
   revisions in one run, taking turns, ``--compare-rounds`` each: the
   catalog bench's append phases at ``--compare-appends`` appends) and
   prints its rows; goal head ÷ base >= 0.95 for the append rates
   (``single_writer``, ``many_writers``, ``build_files``). ``REV`` defaults
   to :data:`BEFORE_ISSUE_34`.
4. **Full scans**: DuckDB ``iceberg_scan`` and pyiceberg through the
   derived metadata vs reading the same Parquet files directly, goal >= 0.9x
   (``iceberg_derived_bench``'s comparison: interleaved rounds, each
   pair's two reads back to back in an order swapped every round, the
   median ratio with its spread and the CPU ratio).

Wall times on a shared machine include waiting for a core: the server's
CPU time (from ``/proc``) and the in-process derivation's are printed beside
them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import catalog  # noqa: E402 - needs the path set above
from iceberg_derived_bench import SCHEMA, _fresh_derive, _scan_comparison  # noqa: E402
from service.testing import ServerProcess  # noqa: E402

LOAD_PATH = "/v1/namespaces/bench/tables/t"
# Main's last commit before issue 34's work (its first is 8d23dd9, "Iceberg
# REST: load and commit native tables"); the extensions' sources are the same.
BEFORE_ISSUE_34 = "dd3632f"


def _load(conn: http.client.HTTPConnection) -> tuple[float, dict]:
    t0 = time.perf_counter()
    conn.request("GET", LOAD_PATH)
    response = conn.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - t0
    if response.status != 200:
        raise RuntimeError(f"loadTable answered {response.status}: {body[:500]!r}")
    return elapsed, json.loads(body)


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far (Linux ``/proc``; clock-tick resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _current_version(loaded: dict) -> int:
    metadata = loaded["metadata"]
    (current,) = [s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"]]
    return int(current["sequence-number"])


def _build(root: str, files: int, appends: int) -> int:
    per_append = max(1, files // appends)
    with catalog.open(root, poll_interval_s=0) as lake:
        lake.create_namespace("bench")
        table = lake.create_table("bench.t", SCHEMA, partition_by=["part"])
        row = 0
        for _ in range(appends):
            ids = list(range(row, row + per_append))
            row += per_append
            table.append(pa.table({"id": ids, "part": pa.array(range(per_append), pa.int32()), "name": [str(i) for i in ids]}))
        return len(lake.load_table("bench.t").files())


def rest(args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    root = str(tmp / "lake")
    start = time.perf_counter()
    files = _build(root, args.files, args.appends)
    print(f"table: {files} files in {args.appends} appends (built in {time.perf_counter() - start:.0f} s)", flush=True)
    copy = str(tmp / "lake-copy")
    shutil.copytree(root, copy)
    server = ServerProcess(root, tmp / "server.log", extra_args=("--quiet",)).start()
    out: dict[str, float] = {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        cpu0 = _cpu_s(server.pid)
        first_s, loaded = _load(conn)
        first_cpu = _cpu_s(server.pid) - cpu0
        out["first_load_ms"] = first_s * 1000
        print(
            f"REST loadTable, first load of the never-loaded {files}-file table: {first_s * 1000:.0f} ms "
            f"(server CPU {first_cpu * 1000:.0f} ms; {len(loaded['metadata']['snapshots'])} snapshots)  goal <= 2000 ms  "
            f"{'MET' if first_s <= 2 else 'NOT MET'}",
            flush=True,
        )
        loads, appends, server_cpu = [], [], 0.0
        with catalog.open(root, poll_interval_s=0) as lake:
            table = lake.load_table("bench.t")
            for i in range(args.rounds):
                t0 = time.perf_counter()
                table.append(pa.table({"id": [10**9 + i], "part": pa.array([0], pa.int32()), "name": ["x"]}))
                appends.append(time.perf_counter() - t0)
                version = lake.version
                cpu0 = _cpu_s(server.pid)
                elapsed, loaded = _load(conn)
                server_cpu += _cpu_s(server.pid) - cpu0
                if _current_version(loaded) != version:
                    raise RuntimeError(f"loadTable right after the append of version {version} served {_current_version(loaded)}")
                loads.append(elapsed)
        conn.close()
        p50 = statistics.median(loads) * 1000
        out["load_after_append_p50_ms"] = p50
        print(
            f"REST loadTable right after one more append ({files}+ files): p50 {p50:.1f} ms, max "
            f"{max(loads) * 1000:.1f} ms over {args.rounds}  goal p50 <= 50 ms  {'MET' if p50 <= 50 else 'NOT MET'}  "
            f"(the server's CPU per load, mean: {server_cpu / args.rounds * 1000:.1f} ms; "
            f"the append itself: p50 {statistics.median(appends) * 1000:.1f} ms)",
            flush=True,
        )
    finally:
        server.stop()
    fresh = _fresh_derive(copy)
    out["first_derive_ms"] = fresh["derive_s"] * 1000
    print(
        f"first derivation of the never-derived table, in-process (iceberg_derived.derive, fresh process): "
        f"{fresh['derive_s'] * 1000:.0f} ms (CPU {fresh['derive_cpu_s'] * 1000:.0f} ms)  goal <= 2000 ms  "
        f"{'MET' if fresh['derive_s'] <= 2 else 'NOT MET'}",
        flush=True,
    )
    return out


def compare(base: str, rounds: int, appends: int) -> None:
    command = [sys.executable, str(HERE / "compare_revisions.py"), "--base", base, "--rounds", str(rounds), "--appends", str(appends)]
    out = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True).stdout
    print(f"native appends, compare_revisions.py --base {base[:12]} --rounds {rounds} --appends {appends} (lakekv):")
    for line in out.splitlines():
        if line.startswith("base ") or line.startswith("| measurement") or line.startswith("|---"):
            print("  " + line)
        elif line.startswith("| catalog "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            ratio = float(cells[3].split(" ", 1)[0])
            if cells[0].endswith("cpu_ms_per_commit"):
                # A time: 0.95x the rate is 1/0.95 the time per commit.
                print("  " + line + f"  goal <= {1 / 0.95:.2f} {'MET' if ratio <= 1 / 0.95 else 'NOT MET'}")
            else:
                print("  " + line + f"  goal >= 0.95 {'MET' if ratio >= 0.95 else 'NOT MET'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--scan-rows", type=int, default=2_000_000)
    parser.add_argument("--base", default=BEFORE_ISSUE_34, help=f"revision before the change (default {BEFORE_ISSUE_34}: main before issue 34)")
    parser.add_argument("--compare-rounds", type=int, default=5)
    parser.add_argument("--compare-appends", type=int, default=200)
    parser.add_argument("--skip-compare", action="store_true", help="leave out the before/after append comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="iceberg-bench-") as tmp:
        rest(args, Path(tmp))
    _scan_comparison(args.scan_rows)
    if not args.skip_compare:
        compare(args.base, args.compare_rounds, args.compare_appends)
    return 0


if __name__ == "__main__":
    sys.exit(main())
