"""Iceberg REST loadTable of scale_bench's big table right after one more append (issue 38 with issue 34).

Issue 38 asks that a native table's derived Iceberg metadata grow as its
plans do: a load after one more append at 1,000,000 files should reuse the
earlier manifests and cost about what it costs at 10,000 files
(``iceberg_bench.py``: ~20 ms p50). This script serves a lakehouse that
``cold_plan_bench.py --build`` made with ``lakekv serve``, loads the table
once (the first load derives every version), then ``--rounds`` times
appends one row and times the next ``loadTable``, with the server's CPU
time per load. It appends to the lakehouse: run it on a copy.

Measured 2026-11-27 (2 shared cores, load average 2-3), 1,000,000 files,
1,022 snapshots: before the derivation found an append's files through
the planning index (it compared every file key at two versions) p50
1,516 ms (1,349-2,984 over 6), server CPU 1,717 ms a load; after, p50
35.5 ms (32.3-89.8 over 15), server CPU 38.7 ms a load.

    .venv/bin/python benchmarks/cold_plan_bench.py --build /tmp/cold/t1m --files 1000000
    cp -a /tmp/cold/t1m /tmp/cold/t1m-iceberg
    .venv/bin/python benchmarks/iceberg_scale_load.py --lake /tmp/cold/t1m-iceberg --rounds 15
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import catalog  # noqa: E402 - needs the path set above
import scale_bench  # noqa: E402
from iceberg_bench import _cpu_s, _current_version  # noqa: E402
from service.testing import ServerProcess  # noqa: E402


def _load(conn: http.client.HTTPConnection, path: str) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"loadTable answered {response.status}: {body[:500]!r}")
    return elapsed, json.loads(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", type=Path, required=True, help="a lakehouse root cold_plan_bench.py --build made (a copy)")
    parser.add_argument("--rounds", type=int, default=15, help="appends, each followed by a timed loadTable")
    args = parser.parse_args()
    root = args.lake / "lake"
    if not root.is_dir():
        parser.error(f"--lake {args.lake}: no lake/ directory there")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    namespace, name = scale_bench.TABLE.split(".")
    path = f"/v1/namespaces/{namespace}/tables/{name}"
    server = ServerProcess(str(root), args.lake / "server.log", extra_args=("--quiet",)).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3600)
        cpu = _cpu_s(server.pid)
        first, loaded = _load(conn, path)
        print(
            f"first loadTable (derives every version): {first * 1000:,.0f} ms, server CPU "
            f"{(_cpu_s(server.pid) - cpu) * 1000:,.0f} ms, {len(loaded['metadata']['snapshots'])} snapshots",
            flush=True,
        )
        loads: list[float] = []
        server_cpu = 0.0
        with catalog.open(str(root), poll_interval_s=0) as lake:
            table = lake.load_table(scale_bench.TABLE)
            for i in range(args.rounds):
                row = {"id": pa.array([10**12 + i], pa.int64()), "part": pa.array([i % 1000], pa.int32()), "amount": [1.0]}
                table.append(pa.table(row, schema=scale_bench.SCHEMA))
                version = lake.version
                cpu = _cpu_s(server.pid)
                elapsed, loaded = _load(conn, path)
                server_cpu += _cpu_s(server.pid) - cpu
                if _current_version(loaded) != version:
                    raise RuntimeError(f"loadTable after the append of version {version} served {_current_version(loaded)}")
                loads.append(elapsed)
        conn.close()
    finally:
        server.stop()
    print(
        f"loadTable right after one more append: p50 {statistics.median(loads) * 1000:,.1f} ms "
        f"({min(loads) * 1000:,.1f}-{max(loads) * 1000:,.1f}) over {args.rounds}; server CPU per load "
        f"{server_cpu / args.rounds * 1000:,.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
