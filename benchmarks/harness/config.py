"""Run sizes and shared settings, parsed once into a frozen dataclass.

The default sizes are the issue's (1M rows of 16 B keys and 100 B values,
1000-row batches, 64 writer threads) and finish in well under 15 minutes on
2 cores; :meth:`BenchConfig.quick` shrinks every count so the whole harness,
SeaweedFS included, runs in the test suite in under 2 minutes. Every measured
phase also stops at ``phase_seconds``, and the report shows the operations it
really completed, so a slow engine cannot stretch a run without bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

MiB: Final = 1 << 20

WORKLOADS: Final = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")


@dataclass(frozen=True)
class BenchConfig:
    """Sizes of one run. Every field is recorded in the results."""

    mode: str = "full"
    seed: int = 42
    # W1: bulk load, then W4/W5 read the loaded store.
    rows: int = 1_000_000
    batch_rows: int = 1000
    # W2: sequential durable single-key commits.
    seq_commits: int = 5000
    # W3: concurrent durable single-key commits.
    writer_threads: int = 64
    commits_per_writer: int = 400
    # W4: point gets, uniform and Zipfian, after one untimed warm-up pass.
    gets: int = 100_000
    zipf_theta: float = 0.99
    # W4, default options: a separate store of this many rows, each engine
    # opened with its library's default cache settings (lakekv: 64 MiB).
    default_options_rows: int = 200_000
    # W5: range scans.
    scans: int = 2000
    scan_rows: int = 1000
    # W6: read-modify-write transactions, one counter space per contention level.
    txn_threads: int = 16
    txns_per_thread: int = 800
    contention_keys: tuple[int, ...] = (100_000, 100, 1)
    # W7: durable commits on SeaweedFS S3, 1 and N writers.
    s3_writers: tuple[int, ...] = (1, 64)
    s3_commits_single: int = 1000
    s3_commits_per_writer: int = 100
    # Every measured phase stops after this long (what it finished is reported).
    phase_seconds: float = 20.0
    # W2 (but the taking-turns pair), W3, W6 and W7 run in this many rounds,
    # every engine once per round on a fresh store, and report each case's
    # median round. Each round does 1/rounds of the commits in 1/rounds of
    # phase_seconds, so the run takes about as long as one round of the full
    # size; a disk or filesystem that drifts by 2-4x over minutes then moves
    # one round of each engine, not all of one engine's figure.
    rounds: int = 3
    # Block/page cache budget given to every engine that has one: large
    # enough for the whole W1 data set, so W4 reads a hot cache.
    cache_bytes: int = 512 * MiB
    # SlateDB's WAL flush timer, the floor of its durable commit latency.
    # 1 ms gave SlateDB its lowest durable-commit latency here (p50 1.7 ms
    # vs 6 ms at 5 ms and 11 ms at 10 ms); 64-writer throughput showed no
    # consistent trend between 1 and 25 ms on this machine.
    slatedb_flush_interval_ms: float = 1.0
    workloads: tuple[str, ...] = WORKLOADS
    engines: tuple[str, ...] = ("lakekv", "lakekv-nofsync", "lmdb", "rocksdb", "sqlite", "slatedb")

    @classmethod
    def quick(cls, **overrides: Any) -> BenchConfig:
        """Small sizes for the test suite: every workload and engine, in seconds."""
        small = cls(
            mode="quick", rows=20_000, default_options_rows=5000, seq_commits=100, commits_per_writer=4, gets=3000, scans=40,
            txns_per_thread=12, contention_keys=(10_000, 100, 1), s3_commits_single=30, s3_commits_per_writer=2,
            phase_seconds=5.0, cache_bytes=64 * MiB, rounds=2,
        )
        return replace(small, **overrides)

    def per_round(self, count: int) -> int:
        """How many of ``count`` operations one of the ``rounds`` does (at least one).

        >>> BenchConfig(rounds=3).per_round(400), BenchConfig(rounds=3).per_round(2)
        (134, 1)
        """
        return -(-count // self.rounds)

    def validate(self) -> BenchConfig:
        """Return self, or raise ValueError naming the first bad size."""
        unknown = sorted(set(self.workloads) - set(WORKLOADS))
        if unknown:
            raise ValueError(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
        if self.default_options_rows < 2:
            raise ValueError(f"default_options_rows must be >= 2, got {self.default_options_rows}")
        if self.rows < self.scan_rows or self.rows < 2:
            raise ValueError(f"rows ({self.rows}) must be at least scan_rows ({self.scan_rows}) and 2")
        for name in ("batch_rows", "seq_commits", "writer_threads", "commits_per_writer", "gets", "scans",
                     "txn_threads", "txns_per_thread", "s3_commits_single", "s3_commits_per_writer", "rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.zipf_theta < 1:
            raise ValueError(f"zipf_theta must be in (0, 1), got {self.zipf_theta}")
        if self.phase_seconds <= 0 or self.slatedb_flush_interval_ms <= 0:
            raise ValueError("phase_seconds and slatedb_flush_interval_ms must be > 0")
        if any(k < 1 for k in self.contention_keys) or any(w < 1 for w in self.s3_writers):
            raise ValueError("contention_keys and s3_writers must be >= 1")
        return self
