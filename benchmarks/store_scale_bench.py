"""Large-store benchmark: open, first query, GC and ``lakekv serve`` start on a store with a long history.

Issue 38's goals: open of a store with 10 million keys and 100,000 retained
versions in at most 1 s, with resident memory that does not grow with the
history, and ``lakekv serve`` on that store healthy within 1 s of start.

Each size is ``KEYS:VERSIONS``. Its store is built once under ``--work`` and
reused by later runs (``build.json`` beside it records how it was built):

- **bulk**: ``KEYS`` keys (``kv/`` + 12 digits, 100-byte values: the keys the
  served KV API reads) in commits of ``--batch`` keys (each a delta SST),
  flushed after each commit and compacted as the planner asks;
- **history**: ``VERSIONS`` more commits of one put each, spread over the
  keys, flushed every 256 versions and compacted as the planner asks; the
  last 200 are left unflushed, as a live store has some (open must read
  their roots: a bounded number, ``flush_max_versions`` at most).

The retention window is ten years, so every version stays readable (time
travel reaches version 0) and GC may delete nothing a version reads. The
build uses ``fsync=False`` and no background threads (flush and compaction
run inline, as ``lakekv compact`` does), which is not what is measured.

Measured, each in a fresh process (``--repeats`` times after one discarded
warm-up; median, min-max), with Python's bytecode cache as an installed
lakekv has it:

- **open**: ``kvstore.open`` of the existing store (default options but the
  retention window), with the import of ``kvstore`` timed apart;
- **first get**, **first scan** (1,000 keys), after open;
- **RSS** (``VmRSS`` of ``/proc/self/status``) after the import, after open,
  after the first queries, and after GC;
- **GC** (``Store.gc()``): with every version retained it deletes nothing,
  but it has to establish that (the first pass of a handle reads every
  retained root); **GC again**: the same handle's next pass, which reads
  only the roots committed since;
- **serve**: ``python -m kvstore.cli serve URL --retention ...``, from exec to
  the first ``GET /healthz`` answered 200 (probed every 5 ms), then one
  ``GET /kv/v1/keys/...``; the server's RSS then. The same on an empty
  store gives the floor (interpreter, imports, bind).

Run: ``.venv/bin/python benchmarks/store_scale_bench.py [--sizes 1000000:10000,1000000:100000,10000000:100000]
[--work DIR] [--repeats 5] [--serve-starts 5] [--out DIR]``; writes ``store_scale_bench.json`` under
``--out`` (default ``benchmarks/results``). The machine's load moves every
number: compare sizes within one run.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from metastore_bench import stop_by_pid  # noqa: E402 - needs the path set above
from results_file import write_results  # noqa: E402
RETENTION_S = 10 * 365 * 86400.0  # every version of the build stays retained
VALUE = b"v" * 100
KEY_PREFIX = b"kv/"  # service.codec.KV_PREFIX: the served KV API reads these keys
UNFLUSHED_TAIL = 200  # versions left unflushed at the end (below flush_max_versions)
FLUSH_EVERY = 256  # the engine's default flush_max_versions
SCAN_KEYS = 1000


def user_key(i: int) -> bytes:
    return b"key%012d" % i


def store_key(i: int) -> bytes:
    return KEY_PREFIX + user_key(i)


def rss_kib() -> int:
    """This process's resident set (VmRSS), KiB."""
    return _status_kib(Path("/proc/self/status"))


def _status_kib(path: Path, field: str = "VmRSS") -> int:
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in {path}")


# -- building -------------------------------------------------------------------------


def store_dir(work: Path, keys: int, versions: int) -> Path:
    return work / f"store-{keys}-{versions}"


def build(work: Path, keys: int, versions: int, batch: int) -> dict[str, Any]:
    """Build (or reuse) the store of one size; return what ``build.json`` records."""
    import kvstore
    from kvstore.batch import WriteBatch

    path = store_dir(work, keys, versions)
    marker = path.parent / f"{path.name}.build.json"
    if marker.exists():
        recorded = json.loads(marker.read_text())
        if recorded.get("keys") == keys and recorded.get("versions") == versions:
            return {**recorded, "reused": True}
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    print(json.dumps({"building": path.name}), flush=True)
    started = time.monotonic()
    db = kvstore.open_embedded(
        str(path), fsync=False, background_threads=False, background_maintenance=False,
        retention_window_s=RETENTION_S,
    )
    with db:
        for first in range(0, keys, batch):
            wb = WriteBatch()
            for i in range(first, min(keys, first + batch)):
                wb.put(store_key(i), VALUE)
            db.write(wb)
            db.flush()
            db.compact()
        bulk_s = time.monotonic() - started
        print(json.dumps({"bulk_s": round(bulk_s, 1), "version": db.version}), flush=True)
        history_started = time.monotonic()
        stride = 7919  # prime: the history's puts land all over the key space
        for v in range(versions):
            db.put(store_key((v * stride) % keys), b"w%d" % v)
            left = versions - 1 - v  # versions still to commit after this one
            if left == UNFLUSHED_TAIL or ((v + 1) % FLUSH_EVERY == 0 and left > UNFLUSHED_TAIL):
                db.flush()
                db.compact()
        history_s = time.monotonic() - history_started
        final = db.stats()
    files = sum(1 for _ in path.rglob("*") if _.is_file())
    disk = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    record = {
        "keys": keys, "versions": versions, "batch": batch, "bulk_s": round(bulk_s, 1),
        "history_s": round(history_s, 1), "head_version": final["version"], "sorted_runs": final["sorted_runs"],
        "l0_files": final["l0_files"], "memtable_rows": final["memtable_rows"], "files": files, "disk_bytes": disk,
    }
    marker.write_text(json.dumps(record, indent=1))
    return {**record, "reused": False}


# -- measuring open (in a fresh process) -----------------------------------------------


def child_open(path: str, keys: int) -> dict[str, Any]:
    """Run in a fresh process: import, open, first get and scan (in the middle of ``keys``), GC; times and RSS."""
    rss_start = rss_kib()
    t0 = time.perf_counter()
    import kvstore

    t1 = time.perf_counter()
    rss_import = rss_kib()
    db = kvstore.open_embedded(path, create=False, retention_window_s=RETENTION_S)
    t2 = time.perf_counter()
    rss_open = rss_kib()
    version = db.version
    value = db.get(store_key(keys // 3))
    t3 = time.perf_counter()
    scanned = sum(1 for _ in db.scan(store_key(keys // 2), store_key(keys // 2 + SCAN_KEYS)))
    t4 = time.perf_counter()
    rss_query = rss_kib()
    report = db.gc()
    t5 = time.perf_counter()
    rss_gc = rss_kib()
    db.gc()  # the handle's next pass: reads only the roots committed since the first
    t6 = time.perf_counter()
    db.close()
    if value is None or scanned != SCAN_KEYS:
        raise RuntimeError(f"wrong answers: get {value!r}, scan {scanned} keys")
    return {
        "import_s": t1 - t0, "open_s": t2 - t1, "first_get_s": t3 - t2, "first_scan_s": t4 - t3, "gc_s": t5 - t4,
        "gc_again_s": t6 - t5,
        "version": version, "gc_deleted": len(report.deleted_roots) + len(report.deleted_trees) + len(report.deleted_ssts),
        "gc_live_files": report.live_files, "rss_start_kib": rss_start, "rss_import_kib": rss_import,
        "rss_open_kib": rss_open, "rss_query_kib": rss_query, "rss_gc_kib": rss_gc,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def child_env() -> dict[str, str]:
    """The measured processes' environment: this tree's modules, with Python's bytecode cache
    (an installed lakekv has one; PYTHONDONTWRITEBYTECODE would time compiling every import)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LAKEKV_TOKEN", None)
    return env


def measure_open(path: Path, keys: int, repeats: int) -> list[dict[str, Any]]:
    """``repeats`` fresh-process opens, after one discarded warm-up (bytecode cache, page cache)."""
    env = child_env()
    runs = []
    for _ in range(repeats + 1):
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child-open", str(path), "--child-keys", str(keys)],
            env=env, capture_output=True, text=True,
        )
        if out.returncode != 0:
            raise RuntimeError(f"measuring open of {path} failed:\n{out.stderr[-4000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs[1:]


# -- measuring serve start -------------------------------------------------------------


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def serve_start(path: Path, log: Path, probe_key: bytes | None) -> dict[str, Any]:
    """Start ``lakekv serve`` on ``path``; seconds from exec to healthy, then one KV get; its RSS. Stopped by PID."""
    sys.path.insert(0, str(REPO))
    from service.testing import free_port

    port = free_port()
    command = [sys.executable, "-m", "kvstore.cli", "serve", str(path), "--host", "127.0.0.1", "--port", str(port),
               "--retention", str(RETENTION_S), "--quiet"]
    env = child_env()
    with open(log, "ab") as out:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = started + 120
        refused: OSError | None = None  # the last probe's failure: the server is not listening yet
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}: see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not healthy after 120 s (last probe: {refused!r}): see {log}")
            try:
                status, body = _get(port, "/healthz")
            except OSError as exc:
                refused = exc
            else:
                if status == 200 and json.loads(body).get("status") == "ok":
                    break
            time.sleep(0.005)
        healthy_s = time.monotonic() - started
        get_s = None
        if probe_key is not None:
            t = time.monotonic()
            path_key = base64.urlsafe_b64encode(probe_key).rstrip(b"=").decode()  # the API's key spelling
            status, body = _get(port, "/kv/v1/keys/" + path_key)
            get_s = time.monotonic() - t
            if status != 200:
                raise RuntimeError(f"GET of {probe_key!r} answered {status}: {body[:200]!r}")
        rss = _status_kib(Path(f"/proc/{process.pid}/status"))
        return {"healthy_s": healthy_s, "first_get_s": get_s, "rss_kib": rss}
    finally:
        stop_by_pid(process)


# -- report ----------------------------------------------------------------------------


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _ms(s: dict[str, float]) -> str:
    return f"{s['median'] * 1000:.0f} ({s['min'] * 1000:.0f}–{s['max'] * 1000:.0f})"


def _mib(s: dict[str, float]) -> str:
    return f"{s['median'] / 1024:.0f}"


def markdown(results: dict[str, Any]) -> str:
    """The results as tables: one row per size, median (min–max) of the repeats."""
    lines = [
        "| keys | versions | build | open | first get | first scan (1,000 keys) | GC | GC again | RSS after import / "
        "open / queries / GC (MiB) | serve start → healthy | serve RSS (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in results["sizes"]:
        b, o, s = size["build"], size["open"], size["serve"]
        rss = " / ".join(_mib(o[k]) for k in ("rss_import_kib", "rss_open_kib", "rss_query_kib", "rss_gc_kib"))
        lines.append(
            f"| {size['keys']:,} | {size['versions']:,} | {b['bulk_s'] + b['history_s']:.0f} s | {_ms(o['open_s'])} ms "
            f"| {_ms(o['first_get_s'])} ms | {_ms(o['first_scan_s'])} ms | {_ms(o['gc_s'])} ms | {_ms(o['gc_again_s'])} ms "
            f"| {rss} "
            f"| {_ms(s['healthy_s'])} ms | {_mib(s['rss_kib'])} |"
        )
    empty = results.get("serve_empty")
    if empty:
        lines.append("")
        lines.append(
            f"Serve on an empty store (the floor: interpreter, imports, bind): {_ms(empty['healthy_s'])} ms to healthy, "
            f"{_mib(empty['rss_kib'])} MiB. Import of `kvstore` alone: {_ms(results['sizes'][0]['open']['import_s'])} ms."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000:10000,1000000:100000,10000000:100000", help="KEYS:VERSIONS,...")
    parser.add_argument("--work", default="/tmp/lakekv-store-scale", help="where stores are built and kept")
    parser.add_argument("--batch", type=int, default=200_000, help="keys per bulk commit")
    parser.add_argument("--repeats", type=int, default=5, help="fresh-process opens per size")
    parser.add_argument("--serve-starts", type=int, default=5, help="serve starts per size (0: none)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument("--child-open", help=argparse.SUPPRESS)
    parser.add_argument("--child-keys", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_open:
        print(json.dumps(child_open(args.child_open, args.child_keys)))
        return 0
    sizes = []
    for item in args.sizes.split(","):
        keys, _, versions = item.partition(":")
        sizes.append((int(keys), int(versions)))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "benchmark": "store_scale_bench", "machine": platform.platform(), "cpus": os.cpu_count(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                 text=True).stdout.strip(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "sizes": [],
    }
    for keys, versions in sizes:
        built = build(work, keys, versions, args.batch)
        print(json.dumps({"built": built}), flush=True)
        path = store_dir(work, keys, versions)
        runs = measure_open(path, keys, args.repeats)
        opened = {k: summary([r[k] for r in runs]) for k in runs[0] if k.endswith("_s") or k.endswith("_kib")}
        # One discarded warm-up start: it also records the retention window in the store (one commit).
        starts = [serve_start(path, work / "serve.log", user_key(keys // 3))
                  for _ in range(args.serve_starts + 1 if args.serve_starts else 0)][1:]
        served = {k: summary([r[k] for r in starts]) for k in ("healthy_s", "first_get_s", "rss_kib")} if starts else {}
        entry = {"keys": keys, "versions": versions, "build": built, "open": opened, "open_runs": runs,
                 "serve": served, "serve_runs": starts}
        results["sizes"].append(entry)
        print(json.dumps({"size": f"{keys}:{versions}", "open": opened, "serve": served}), flush=True)
    if args.serve_starts:
        empty = work / "empty-store"
        shutil.rmtree(empty, ignore_errors=True)
        starts = [serve_start(empty, work / "serve.log", None) for _ in range(args.serve_starts + 1)][1:]
        results["serve_empty"] = {k: summary([r[k] for r in starts]) for k in ("healthy_s", "rss_kib")}
    write_results(args.out, "store_scale_bench", results)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
