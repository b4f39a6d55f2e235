"""Run every workload on lakekv and each peer in one process, then write the report.

Order of a run:

1. W1, W4, W5 share a store per engine: load it (W1), settle it, then read it
   (W4 gets, W5 scans). Engines run one after the other, each on a fresh
   directory that is deleted afterwards.
2. W2, W3 and W6 run on fresh, empty stores, workload by workload, so load
   changes on a shared machine spread over all engines instead of hitting one.
3. W7 starts a SeaweedFS server on 127.0.0.1 and runs lakekv, SlateDB and the
   raw conditional-PUT loop against it.

A failure in one engine's workload is recorded (with its error) and the run
goes on, so one broken engine never costs the other figures; the command
then exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from harness import data, machine, report
from harness.config import WORKLOADS, BenchConfig
from harness.engine import CommitTarget, Engine
from harness.workloads import (
    METRICS,
    Measurement,
    durable_commits,
    durable_commits_beside_busy_thread,
    durable_commits_taking_turns,
    median_round,
    w1_bulk_load,
    w4_point_gets,
    w5_range_scans,
    w6_prepare,
    w6_transactions,
)

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results"
PEERS = ("lmdb", "rocksdb", "sqlite", "slatedb")
# Configurations that exist only to pair with a peer's durability in the
# commit workloads; the read workloads do not depend on durability.
COMMIT_ONLY = frozenset({"lakekv-nofsync"})
# Engines whose adapters can open with their library's default cache settings.
DEFAULT_OPTIONS_ENGINES = frozenset({"lakekv", "lmdb", "rocksdb", "sqlite"})

Log = Callable[[str], None]

# What Run.attempt returns when the call raised (the error is recorded).
_FAILED: Any = object()


def _print(line: str) -> None:
    print(line, flush=True)


class Run:
    """The state of one benchmark run: config, engines, measurements, notes."""

    def __init__(self, config: BenchConfig, data_dir: Path, log: Log = _print) -> None:
        self.config = config
        self.data_dir = data_dir
        self.log = log
        self.engines: dict[str, CommitTarget] = {}
        self.left_out: dict[str, str] = {}
        self.notes: list[str] = []
        self.measurements: list[Measurement] = []

    # -- engines ---------------------------------------------------------------

    def _factories(self, cache_bytes: int | None) -> dict[str, Callable[[], Engine]]:
        """Engine constructors by name; ``cache_bytes`` None = each library's default cache."""
        from harness.lakekv_engine import LakeKV

        cfg = self.config
        return {
            "lakekv": lambda: LakeKV(fsync=True, cache_bytes=cache_bytes),
            # The counterpart of SlateDB's unsynced local store (commit workloads only).
            "lakekv-nofsync": lambda: LakeKV(fsync=False, cache_bytes=cache_bytes),
            "lmdb": lambda: _lmdb(),
            "rocksdb": lambda: _rocksdb(cache_bytes),
            "sqlite": lambda: _sqlite(cache_bytes),
            # Unsynced peers of lakekv-nofsync, for the W2 GIL cases only.
            "lmdb-nosync": lambda: _lmdb(sync=False),
            "sqlite-nosync": lambda: _sqlite(cache_bytes, synchronous="OFF"),
            "slatedb": lambda: _slatedb(cfg),
        }

    def build_local_engines(self) -> list[Engine]:
        """The engines the config names that can run here; the rest go to ``left_out``."""
        cfg = self.config
        factories = self._factories(cfg.cache_bytes)
        engines = []
        for name in cfg.engines:
            if name not in factories:
                raise ValueError(f"unknown engine {name!r}; known: {', '.join(factories)}")
            try:
                engine = factories[name]()
            except ImportError as exc:
                # A peer without a wheel for this platform is left out, and
                # the report says so; it is never replaced by a stand-in.
                self.left_out[name] = f"cannot import its binding here: {exc}"
                self.log(f"leaving out {name}: {exc}")
                continue
            engines.append(engine)
            self.engines[engine.key] = engine
        return engines

    # -- running ---------------------------------------------------------------

    @contextmanager
    def opened(self, workload: str, target: CommitTarget) -> Iterator[bool]:
        """Open ``target`` on a fresh directory for ``workload``; close it and
        delete the directory after. Yields False (and records why) if it
        could not be opened."""
        path = self.data_dir / f"{target.key}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        # Flush everyone's dirty pages first: writeback left by the previous
        # engine (LMDB's bulk load leaves gigabytes) would otherwise slow this
        # engine's fsyncs and be charged to it.
        os.sync()
        opened = False
        try:
            opened = self.attempt(workload, "open", target, target.open, path, record=False) is not _FAILED
            yield opened
        finally:
            if opened:
                target.close()
            shutil.rmtree(path, ignore_errors=True)

    def attempt(
        self, workload: str, case: str, target: CommitTarget, fn: Callable[..., Any], *args: Any, record: bool = True,
    ) -> Any:
        """Call ``fn(*args)`` for one engine's part of a workload.

        With ``record``, ``fn`` returns a Measurement or a list of them, which
        are kept and logged. Returns ``fn``'s result, or ``_FAILED`` after
        recording the exception as this case's result.
        """
        started = time.perf_counter()
        try:
            result = fn(*args)
        except Exception as exc:  # recorded in the results and the exit code, never hidden
            self.log(f"{workload} {target.label}: {case} FAILED: {exc!r}\n{traceback.format_exc()}")
            self.measurements.append(Measurement(workload, case, target.key, error=f"{type(exc).__name__}: {exc}"))
            return _FAILED
        if record:
            self.record(target, result if isinstance(result, list) else [result], time.perf_counter() - started)
        return result

    def record(self, target: CommitTarget, measurements: list[Measurement], seconds: float) -> None:
        """Keep ``measurements`` (``target``'s) and log them, with the ``seconds`` they took."""
        for m in measurements:
            self.measurements.append(m)
            shown = ", ".join(f"{k}={v:,.3g}" for k, v in m.metrics.items())
            bad = {k: v for k, v in m.checks.items() if v}
            self.log(f"{m.workload} {target.label:<22} {m.case}: {shown}" + (f"  CHECKS FAILED {bad}" if bad else "")
                     + f"  ({seconds:.1f} s)")

    def in_rounds(
        self, workload: str, targets: list[CommitTarget],
        measure: Callable[[CommitTarget], list[Measurement]], rate: str = "commits_per_s",
    ) -> None:
        """Measure every target in ``config.rounds`` rounds and record each case's median round.

        Each round opens every target in turn on a fresh directory and calls
        ``measure(target)`` (sized for one round: see ``BenchConfig.rounds``).
        A target that fails in a round is recorded as failed there and
        measured no more; its earlier rounds are not reported.
        """
        rounds = self.config.rounds
        kept: dict[tuple[str, str], list[Measurement]] = {}
        seconds: dict[str, float] = {}
        failed: set[str] = set()
        for number in range(1, rounds + 1):
            for target in targets:
                if target.key in failed:
                    continue
                started = time.perf_counter()
                with self.opened(workload, target) as ok:
                    result = self.attempt(workload, f"round {number} of {rounds}", target, measure, target,
                                          record=False) if ok else _FAILED
                if result is _FAILED:
                    failed.add(target.key)
                    continue
                seconds[target.key] = seconds.get(target.key, 0.0) + time.perf_counter() - started
                for m in result:
                    kept.setdefault((m.case, m.engine), []).append(m)
                    self.log(f"{workload} {target.label:<22} {m.case}: round {number} of {rounds}: "
                             f"{METRICS[rate].label} {m.metrics[rate]:,.0f}")
        for (_case, engine), measured in kept.items():
            if engine not in failed:
                target = next(t for t in targets if t.key == engine)
                self.record(target, [median_round(measured, rate)], seconds[engine])

    def run_read_group(self, engines: list[Engine]) -> None:
        """W1 then W4 and W5 on the same loaded store, engine by engine."""
        cfg = self.config
        wanted = {w for w in ("W1", "W4", "W5") if w in cfg.workloads}
        if not wanted:
            return
        batches = data.load_batches(cfg.rows, cfg.batch_rows, cfg.seed, data.Values(cfg.seed))
        gets = {
            f"uniform, {cfg.rows:,} keys": data.uniform_keys(cfg.rows, cfg.gets, cfg.seed + 1),
            f"Zipfian θ={cfg.zipf_theta}, {cfg.rows:,} keys": data.zipfian_keys(
                cfg.rows, cfg.gets, cfg.zipf_theta, cfg.seed + 2),
        }
        ranges = data.scan_ranges(cfg.rows, cfg.scans, cfg.scan_rows, cfg.seed + 3)
        load_case = f"bulk load, {cfg.rows:,} rows in batches of {cfg.batch_rows:,}"
        device_written = machine.device_bytes_written(self.data_dir)
        process_written = machine.process_bytes_written()
        for engine in engines:
            with self.opened("W1", engine) as ok:
                # W4/W5 need the loaded store even when W1's figures are not wanted.
                if not ok or self.attempt("W1", load_case, engine, w1_bulk_load, engine, batches, device_written,
                                          process_written, record="W1" in wanted) is _FAILED:
                    continue
                if "W4" in wanted:
                    for case, keys in gets.items():
                        self.attempt("W4", case, engine, w4_point_gets, engine, case, keys, cfg.phase_seconds)
                if "W5" in wanted:
                    self.attempt("W5", "range scans", engine, w5_range_scans, engine, ranges, cfg.scan_rows,
                                 cfg.phase_seconds)

    def run_default_options_gets(self) -> None:
        """W4 again on a smaller store, every engine with its default cache settings.

        The main W4 gives every engine a cache that holds the whole data set;
        this case shows what an application that sets nothing gets. SlateDB is
        left out (its adapter always sizes its cache).
        """
        cfg = self.config
        if "W4" not in cfg.workloads:
            return
        names = [n for n in cfg.engines if n in DEFAULT_OPTIONS_ENGINES and n in self.engines]
        batches = data.load_batches(cfg.default_options_rows, cfg.batch_rows, cfg.seed, data.Values(cfg.seed))
        keys = data.uniform_keys(cfg.default_options_rows, cfg.gets, cfg.seed + 4)
        case = f"uniform, {cfg.default_options_rows:,} keys, default options"
        factories = self._factories(None)
        for name in names:
            engine = factories[name]()
            with self.opened("W4", engine) as ok:
                if not ok or self.attempt("W4", case + " (load)", engine, _load_and_settle, engine, batches,
                                          record=False) is _FAILED:
                    continue
                self.attempt("W4", case, engine, w4_point_gets, engine, case, keys, cfg.phase_seconds)

    def run_commits(self, engines: list[Engine]) -> None:
        """W2 and W3 on fresh stores, workload by workload, in rounds (see :meth:`in_rounds`)."""
        cfg = self.config
        seconds = cfg.phase_seconds / cfg.rounds
        if "W2" in cfg.workloads:
            from harness.fs_floor import NewFileCommitFloor

            commits = cfg.per_round(cfg.seq_commits)
            floor = NewFileCommitFloor()
            self.engines[floor.key] = floor
            # lakekv and the floor take turns (durable_commits_taking_turns),
            # a finer interleaving than rounds: the goal is their ratio, which
            # sequential runs minutes apart left to the disk's drift.
            lakekv = next((engine for engine in engines if engine.key == "lakekv"), None)
            others: list[CommitTarget] = [engine for engine in engines if engine is not lakekv]
            self.in_rounds("W2", others + ([] if lakekv else [floor]), lambda target: [durable_commits(
                "W2", "1 writer", target, 1, commits, seconds, b"w2")])
            if lakekv is not None:
                with self.opened("W2", lakekv) as ok, self.opened("W2", floor) as floor_ok:
                    if ok and floor_ok:
                        self.attempt("W2", "1 writer", lakekv, durable_commits_taking_turns, "W2", "1 writer",
                                     [lakekv, floor], cfg.seq_commits, cfg.phase_seconds, b"w2")
            case = "1 writer while 1 other thread runs Python"
            self.in_rounds("W2", list(engines), lambda target: [durable_commits_beside_busy_thread(
                "W2", case, target, commits, seconds, b"w2b")])
            self.run_unsynced_commits()
        if "W3" in cfg.workloads:
            case = f"{cfg.writer_threads} writer threads"
            per_writer = cfg.per_round(cfg.commits_per_writer)
            self.in_rounds("W3", list(engines), lambda target: [durable_commits(
                "W3", case, target, cfg.writer_threads, per_writer, seconds, b"w3")])

    def run_unsynced_commits(self) -> None:
        """W2 without fsync, idle and beside a busy Python thread.

        With fsync the disk bounds a commit and hides what a busy thread of
        the process costs (the GIL); without it the commit is CPU and GIL
        bound. lakekv-nofsync against LMDB (sync=False) and SQLite
        (synchronous=OFF), each run here when its base engine is configured.
        """
        cfg = self.config
        factories = self._factories(cfg.cache_bytes)
        bases = {"lakekv-nofsync": ("lakekv", "lakekv-nofsync"), "lmdb-nosync": ("lmdb",), "sqlite-nosync": ("sqlite",)}
        targets: list[CommitTarget] = []
        for name, needs in bases.items():
            if not any(base in cfg.engines for base in needs):
                continue
            try:
                engine = factories[name]()
            except ImportError as exc:
                self.left_out[name] = f"cannot import its binding here: {exc}"
                continue
            self.engines[engine.key] = engine
            targets.append(engine)
        commits, seconds = cfg.per_round(cfg.seq_commits), cfg.phase_seconds / cfg.rounds
        idle, busy = "1 writer, no fsync", "1 writer, no fsync, while 1 other thread runs Python"
        self.in_rounds("W2", targets, lambda target: [durable_commits("W2", idle, target, 1, commits, seconds, b"w2n")])
        self.in_rounds("W2", targets, lambda target: [durable_commits_beside_busy_thread(
            "W2", busy, target, commits, seconds, b"w2nb")])

    def run_transactions(self, engines: list[Engine]) -> None:
        """W6: each contention level on each engine that has transactions, in rounds."""
        cfg = self.config
        if "W6" not in cfg.workloads:
            return
        for engine in engines:
            if not engine.has_transactions:
                self.notes.append(f"W6: no figure for {engine.label}: {engine.transaction_note}")
        per_thread, seconds = cfg.per_round(cfg.txns_per_thread), cfg.phase_seconds / cfg.rounds

        def every_level(target: CommitTarget) -> list[Measurement]:
            assert isinstance(target, Engine)
            prepared = w6_prepare(target, cfg.contention_keys, cfg.batch_rows)  # untimed
            return [
                w6_transactions(target, f"{cfg.txn_threads} threads, counters drawn from {count:,} key(s)",
                                prepared[count], cfg.txn_threads, per_thread, seconds, cfg.seed)
                for count in cfg.contention_keys
            ]

        self.in_rounds("W6", [e for e in engines if e.has_transactions], every_level)

    def run_s3(self) -> None:
        """W7 on a SeaweedFS server started for it and stopped afterwards."""
        cfg = self.config
        if "W7" not in cfg.workloads:
            return
        from kvstore.testing.seaweed import SeaweedServer, find_weed

        try:
            find_weed()
        except RuntimeError as exc:
            self.left_out["W7 (all engines)"] = str(exc)
            self.log(f"leaving out W7: {exc}")
            return
        server = SeaweedServer(self.data_dir / "seaweedfs")
        started = time.perf_counter()
        server.start()
        self.log(f"SeaweedFS up at {server.endpoint_url} in {time.perf_counter() - started:.1f} s")

        def every_writer_count(target: CommitTarget) -> list[Measurement]:
            measured = []
            for writers in cfg.s3_writers:
                per_writer = cfg.per_round(cfg.s3_commits_single if writers == 1 else cfg.s3_commits_per_writer)
                case = f"{writers} writer{'s' if writers > 1 else ''}"
                measured.append(durable_commits("W7", case, target, writers, per_writer,
                                                cfg.phase_seconds / cfg.rounds, b"w7-%d-" % writers))
            return measured

        try:
            self.in_rounds("W7", self._s3_targets(server), every_writer_count)
        finally:
            server.stop()

    def _s3_targets(self, server: Any) -> list[CommitTarget]:
        from harness.lakekv_engine import LakeKV
        from harness.s3_reference import RawConditionalPut

        base_url = f"s3://{server.bucket}"
        targets: list[CommitTarget] = [LakeKV(cache_bytes=self.config.cache_bytes, s3=(base_url, server.options))]
        if "slatedb" in self.config.engines:
            s3 = {
                "endpoint": server.endpoint_url, "access_key_id": server.access_key,
                "secret_access_key": server.secret_key, "bucket": server.bucket, "region": server.region,
            }
            try:
                targets.append(_slatedb(self.config, s3=s3))
            except ImportError as exc:
                self.left_out["slatedb (S3)"] = f"cannot import its binding here: {exc}"
        targets.append(RawConditionalPut(base_url, server.options))
        for target in targets:
            self.engines[target.key] = target
        return targets

    # -- results ---------------------------------------------------------------

    def results(self, meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "schema": 1,
            "meta": meta,
            "config": asdict(self.config),
            "engines": {
                key: {"label": t.label, "family": t.family, "durability": t.durability, "settings": t.settings()}
                for key, t in self.engines.items()
            },
            "left_out": self.left_out,
            "notes": self.notes,
            "measurements": [m.to_json() for m in self.measurements],
        }


def _load_and_settle(engine: Engine, batches: list[list[tuple[bytes, bytes]]]) -> None:
    for batch in batches:
        engine.write_batch(batch)
    engine.settle()


def _lmdb(sync: bool = True) -> Engine:
    from harness.lmdb_engine import LMDB

    return LMDB(sync=sync)


def _rocksdb(cache_bytes: int | None) -> Engine:
    from harness.rocksdb_engine import RocksDB

    return RocksDB(cache_bytes=cache_bytes)


def _sqlite(cache_bytes: int | None, synchronous: str = "FULL") -> Engine:
    from harness.sqlite_engine import SQLite

    return SQLite(cache_bytes=cache_bytes, synchronous=synchronous)


def _slatedb(cfg: BenchConfig, s3: dict[str, str] | None = None) -> Engine:
    from harness.slatedb_engine import SlateDB

    return SlateDB(flush_interval_ms=cfg.slatedb_flush_interval_ms, cache_bytes=cfg.cache_bytes, s3=s3)


STANDING_NOTES = (
    "Durability: lakekv fsyncs each root file and its directory; LMDB syncs each write transaction; "
    "RocksDB syncs its WAL on each write (sync=True); SQLite runs WAL mode with synchronous=FULL. "
    "SlateDB's local object store never fsyncs (strace shows no fsync/fdatasync calls), so its figures "
    "are compared with lakekv without fsync.",
    "W1 loads rows in a seeded random order; every batch is one durable commit. Bytes written are the data "
    "disk's write counter (/sys/dev/block/.../stat) from an os.sync() before the load to one after settling, "
    "so journal and metadata writes count; logical bytes are rows × (16 + 100). The counter is device-wide: "
    "other processes' writes in that window count too. 'Bytes the process wrote' is /proc/self/io's write_bytes "
    "(less cancelled writes) over the same window: this process only, no journal, and it overstates B-trees' "
    "small page writes (a whole page-cache folio per write).",
    "Every store is opened after an os.sync(), so no engine pays for another's writeback.",
    "W1, W4 and W5 run lakekv with fsync only, so their lakekv ÷ SlateDB ratios set fsync'd lakekv against "
    "unsynced SlateDB (conservative for lakekv in W1; reads do not depend on it).",
    "W4 runs each key list once untimed, then times up to 5 more passes (fewer when they pass phase_seconds) "
    "and reports the median pass's rate (hot cache), and the median pass's gets per CPU second of the calling "
    "thread (time.thread_time: not the time a busy machine kept it off a core; meaningless for SlateDB, whose "
    "gets run on its own Rust threads); p50/p99 pool every timed pass. Every engine's cache can hold "
    "the whole data set. SlateDB's get loop runs inside one coroutine, so no sync-to-async bridge is timed.",
    "W4 'default options': a separate, smaller store (loaded in the same batches, then settled) opened with "
    "each library's default cache settings (lakekv 64 MiB block cache, RocksDB's default block cache, "
    "SQLite's default page cache; LMDB has none: it reads the OS page cache); SlateDB is left out.",
    "W2 'new-file commit floor': the system calls of a lakekv commit on a local directory and nothing else "
    "(write a 2 KB temp file, fsync, link to a fresh name, fsync the directory, unlink the temp): the floor "
    "of a commit that creates a new immutable file. lakekv and the floor are measured taking turns of 250 "
    "commits, on two fresh directories, so both see the same disk (measured minutes apart, fsync latency "
    "drifted by up to 2x between them). 'while 1 other thread runs Python': the same sequential "
    "commits while a second thread of the process runs a pure-Python loop (it competes for the GIL).",
    "W2 'no fsync' cases: the same sequential commits, idle and beside the busy thread, with lakekv without "
    "fsync, LMDB with sync=False and SQLite with synchronous=OFF: the disk no longer bounds a commit, so the "
    "busy ÷ idle ratio shows what the GIL costs each engine.",
    "W2 (but lakekv's taking-turns pair with the floor), W3, W6 and W7 run in rounds: every engine once per "
    "round, each time on a fresh store, with 1/rounds of the commits and of the time cap; each case reports "
    "its median round (rate and latencies of that round, n of all rounds; the notes list every round's rate). "
    "On this VM an fsync- or filesystem-bound rate drifts by 2-4x over minutes (lakekv's unsynced W2 commit "
    "gave 4,500 to 19,500 commits/s in back-to-back runs of the same script), so one run per engine "
    "charged the drift to whichever engine it hit.",
    "W5: row forms hand each (key, value) to Python as bytes; lakekv's Arrow form is compared with the "
    "peers' row form.",
    "W6: each transaction reads a counter and writes it back incremented. lakekv and SlateDB are optimistic "
    "(conflicts abort); LMDB and SQLite take the write lock first (never abort, writers wait).",
    "W6: lakekv's read-modify-write reads the counter with get_for_update (a per-process key lock; the "
    "transaction then reads the latest commit), LMDB and SQLite take their write lock (their native locking).",
    "W7: 'raw conditional PUT' is one If-None-Match PUT of a fresh object per commit through the S3 client "
    "lakekv uses: the physical floor of a commit on this server.",
)


def run(
    config: BenchConfig, out_dir: Path, data_dir: Path | None = None, log: Log = _print,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run the benchmark described by ``config``; write the report into ``out_dir``.

    Returns the results dict and the paths written (json, md, png).
    """
    config.validate()
    owns_dir = data_dir is None
    base = Path(tempfile.mkdtemp(prefix="lakekv-bench-")) if data_dir is None else data_dir
    base.mkdir(parents=True, exist_ok=True)
    meta = machine.describe(base)
    log(f"lakekv benchmark ({config.mode}): commit {meta['git']['commit'][:12]}, "
        f"{meta['machine']['cores']} cores, load average {meta['load_average_start']}, data in {base}")
    started = time.perf_counter()
    state = Run(config, base, log)
    try:
        engines = state.build_local_engines()
        state.notes.extend(STANDING_NOTES)
        if any(e.family == "slatedb" for e in engines):
            state.notes.append(
                f"SlateDB: flush_interval = {config.slatedb_flush_interval_ms:g} ms (its default is 100 ms). Every "
                "SlateDB write awaits durability, so this WAL timer is the floor of its commit latency; 1 ms gave "
                "it its lowest single-writer latency on this machine (p50 1.7 ms, vs 6 ms at 5 ms and 11 ms at 10 ms)."
            )
        state.run_read_group([e for e in engines if e.key not in COMMIT_ONLY])
        state.run_default_options_gets()
        state.run_commits(engines)
        state.run_transactions(engines)
        state.run_s3()
    finally:
        if owns_dir:
            shutil.rmtree(base, ignore_errors=True)
    meta["load_average_end"] = machine.load_average()
    meta["duration_s"] = time.perf_counter() - started
    results = state.results(meta)
    paths = report.write_all(results, out_dir, "bench" if config.mode == "full" else f"bench-{config.mode}")
    log(f"done in {meta['duration_s']:.0f} s; wrote " + ", ".join(str(p) for p in paths.values()))
    return results, paths


def failures(results: dict[str, Any]) -> list[str]:
    """Every failed workload and failed sanity check, as lines."""
    found = []
    for m in results["measurements"]:
        if "error" in m:
            found.append(f"{m['workload']} {m['engine']} {m['case']}: {m['error']}")
        bad = {k: v for k, v in m.get("checks", {}).items() if v}
        if bad:
            found.append(f"{m['workload']} {m['engine']} {m['case']}: checks failed {bad}")
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="lakekv vs LMDB, RocksDB, SQLite and SlateDB, in one run.")
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The harness options; shared with ``lakekv bench``."""
    parser.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes), for the test suite")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write results (default {DEFAULT_OUT})")
    parser.add_argument("--data-dir", type=Path, help="where stores live while measured (default: a temp dir, removed)")
    parser.add_argument("--workloads", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--engines", help="comma-separated subset of lakekv,lakekv-nofsync," + ",".join(PEERS))
    parser.add_argument("--rows", type=int, help="rows loaded by W1 and read by W4/W5")
    parser.add_argument("--phase-seconds", type=float, help="time cap of each measured phase")
    parser.add_argument("--rounds", type=int, help="rounds of the commit workloads W2, W3, W6, W7 (median reported)")
    parser.add_argument("--slatedb-flush-interval-ms", type=float, help="SlateDB's WAL flush timer")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """Turn parsed options into a validated :class:`BenchConfig`."""
    config = BenchConfig.quick() if args.quick else BenchConfig()
    overrides: dict[str, Any] = {}
    if args.workloads:
        overrides["workloads"] = tuple(w.strip().upper() for w in args.workloads.split(",") if w.strip())
    if args.engines:
        overrides["engines"] = tuple(e.strip().lower() for e in args.engines.split(",") if e.strip())
    if args.rows is not None:
        overrides["rows"] = args.rows
    if args.phase_seconds is not None:
        overrides["phase_seconds"] = args.phase_seconds
    if args.rounds is not None:
        overrides["rounds"] = args.rounds
    if args.slatedb_flush_interval_ms is not None:
        overrides["slatedb_flush_interval_ms"] = args.slatedb_flush_interval_ms
    return replace(config, **overrides).validate()


def main_with_args(args: argparse.Namespace) -> int:
    """Run with parsed options; exit code 1 if any workload or check failed."""
    results, _paths = run(config_from_args(args), args.out, args.data_dir)
    bad = failures(results)
    for line in bad:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config_from_args(args)
    except ValueError as exc:  # a bad size or name: say which, as argparse does, not a traceback
        parser.error(str(exc))
    return main_with_args(args)
