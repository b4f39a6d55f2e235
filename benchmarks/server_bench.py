"""``lakekv serve`` under load: 64 keep-alive clients against one server,
beside the same operations called in-process on an embedded store.

Usage::

    python benchmarks/server_bench.py [--seconds 10] [--clients 64] [--keys 10000]
    python benchmarks/server_bench.py --soak 600     # RSS over time (not in CI)

The clients are threads spread over ``--procs`` processes (the client side
needs more than one GIL to keep a server busy), each thread with its own
keep-alive connection. The embedded run uses the same number of threads in
one process on a fresh store of the same kind (a local directory). Reported
per workload: requests/s, p50/p99 latency in ms, errors (must be 0), and the
server/embedded throughput ratio for KV get and put. The Iceberg workload
commits a property change to each client's own table (write the metadata
JSON, swap the catalog pointer); it has no embedded peer. Requires the
``server`` extra.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kvstore  # noqa: E402
from service.testing import ServerProcess  # noqa: E402

VALUE = b"v" * 100


def key_of(i: int) -> bytes:
    return b"bench/%08d" % i


def path_key(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode()


ICEBERG_SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _create_iceberg_table(conn: http.client.HTTPConnection, name: str) -> str:
    """Create table bench.<name>; return its UUID (commits assert it, as clients do)."""
    body = json.dumps({"name": name, "schema": ICEBERG_SCHEMA})
    conn.request("POST", "/v1/namespaces/bench/tables", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"create table {name}: {response.status} {data}")
    return str(data["metadata"]["table-uuid"])


def _client_thread(port: int, op: str, keys: int, seconds: float, seed: int, out: list) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    latencies: list[float] = []
    errors = 0
    # Iceberg: one table per client, each commit sets a property (the
    # metadata-only commit path: write metadata JSON, swap the pointer).
    table_uuid = _create_iceberg_table(conn, f"t{seed}") if op == "iceberg" else ""
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline:
        key = key_of(rng.randrange(keys)) if op == "get" else b"put/%d/%d" % (seed, n)
        n += 1
        started = time.perf_counter()
        try:
            if op == "get":
                conn.request("GET", "/kv/v1/keys/" + path_key(key), headers={"Accept": "application/octet-stream"})
            elif op == "put":
                conn.request(
                    "PUT", "/kv/v1/keys/" + path_key(key), body=VALUE,
                    headers={"Content-Type": "application/octet-stream"},
                )
            else:
                commit = {
                    "identifier": {"namespace": ["bench"], "name": f"t{seed}"},
                    "requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
                    "updates": [{"action": "set-properties", "updates": {"n": str(n)}}],
                }
                conn.request(
                    "POST", f"/v1/namespaces/bench/tables/t{seed}", body=json.dumps(commit),
                    headers={"Content-Type": "application/json"},
                )
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            ok = False
        latencies.append(time.perf_counter() - started)
        errors += not ok
    conn.close()
    out.append((latencies, errors))


def _client_process(port: int, op: str, keys: int, seconds: float, threads: int, seed: int, queue) -> None:  # type: ignore[no-untyped-def]
    out: list = []
    workers = [
        threading.Thread(target=_client_thread, args=(port, op, keys, seconds, seed * 1000 + t, out))
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    latencies = [x for lat, _ in out for x in lat]
    queue.put((latencies, sum(e for _, e in out)))


def run_http(port: int, op: str, clients: int, procs: int, keys: int, seconds: float) -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    per_proc = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    processes = [
        ctx.Process(target=_client_process, args=(port, op, keys, seconds, n, i + 1, queue))
        for i, n in enumerate(per_proc) if n
    ]
    for process in processes:
        process.start()
    results = [queue.get() for _ in processes]
    for process in processes:
        process.join()
    latencies = [x for lat, _ in results for x in lat]
    return summarize(latencies, sum(e for _, e in results), seconds)


def run_embedded(db: kvstore.Store, op: str, clients: int, keys: int, seconds: float) -> dict:
    out: list = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            if op == "get":
                db.get(key_of(rng.randrange(keys)))
            else:
                db.put(b"put/%d/%d" % (seed, n), VALUE)
                n += 1
            latencies.append(time.perf_counter() - started)
        out.append(latencies)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return summarize([x for lat in out for x in lat], 0, seconds)


def summarize(latencies: list[float], errors: int, seconds: float) -> dict:
    latencies.sort()
    if not latencies:
        return {"requests": 0, "req_per_s": 0.0, "p50_ms": None, "p99_ms": None, "errors": errors}
    return {
        "requests": len(latencies),
        "req_per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 3),
        "errors": errors,
    }


def preload(db, keys: int) -> None:  # type: ignore[no-untyped-def]
    for start in range(0, keys, 5000):
        batch = kvstore.WriteBatch()
        for i in range(start, min(keys, start + 5000)):
            batch.put(key_of(i), VALUE)
        db.write(batch)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def soak(server: ServerProcess, args: argparse.Namespace) -> int:
    """Alternate get/put rounds for ``--soak`` seconds; print RSS per round."""
    end = time.monotonic() + args.soak
    samples = []
    while time.monotonic() < end:
        for op in ("put", "get"):
            result = run_http(server.port, op, args.clients, args.procs, args.keys, min(30.0, args.seconds * 3))
            samples.append(rss_mib(server.pid))
            print(f"soak t={args.soak - (end - time.monotonic()):6.0f}s {op}: {result['req_per_s']:8.0f} req/s "
                  f"errors={result['errors']} server RSS {samples[-1]:.1f} MiB", flush=True)
            if result["errors"]:
                return 1
    warm = samples[min(3, len(samples) - 1)]
    growth = samples[-1] / warm
    print(f"RSS after warm-up {warm:.1f} MiB, at the end {samples[-1]:.1f} MiB (x{growth:.2f})")
    return 0 if growth < 1.5 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="per workload (default 10)")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--keys", type=int, default=10_000, help="preloaded keys read by the get workload")
    parser.add_argument("--soak", type=float, metavar="SECONDS", help="soak mode: RSS must stay flat")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lakekv-server-bench-") as tmp:
        server = ServerProcess(os.path.join(tmp, "served"), Path(tmp) / "server.log", extra_args=("--quiet",)).start()
        try:
            with kvstore.open(server.url) as remote:
                preload(remote, args.keys)
            if args.soak:
                return soak(server, args)
            results = {}
            for op in ("get", "put"):
                results[f"http {op}"] = run_http(server.port, op, args.clients, args.procs, args.keys, args.seconds)
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            conn.request("POST", "/v1/namespaces", body=json.dumps({"namespace": ["bench"]}),
                         headers={"Content-Type": "application/json"})
            conn.getresponse().read()
            conn.close()
            results["iceberg commit"] = run_http(server.port, "iceberg", args.clients, args.procs, args.keys, args.seconds)
        finally:
            server.stop()
        with kvstore.open(os.path.join(tmp, "embedded")) as db:
            preload(db, args.keys)
            for op in ("get", "put"):
                results[f"embedded {op}"] = run_embedded(db, op, args.clients, args.keys, args.seconds)

    print(f"{args.clients} clients, {args.seconds:g} s per workload, local-directory store, "
          f"{os.cpu_count()} CPUs, commit {os.popen('git rev-parse --short HEAD').read().strip()}")
    print(f"{'workload':<15} {'req/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'errors':>7}")
    for name, r in results.items():
        print(f"{name:<15} {r['req_per_s']:>10.0f} {r['p50_ms']:>9} {r['p99_ms']:>9} {r['errors']:>7}")
    for op in ("get", "put"):
        embedded = results[f"embedded {op}"]["req_per_s"]
        ratio = results[f"http {op}"]["req_per_s"] / embedded if embedded else float("nan")
        print(f"{op}: server/embedded throughput = {ratio:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if any(r["errors"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
