"""Store options, parsed once into a frozen dataclass. Each default says why."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Final

from kvstore.format.sst_format import DEFAULT_SST_COMPRESSION, SST_COMPRESSIONS

KiB: Final = 1024
MiB: Final = 1024 * KiB

# Hard limits, enforced with ValueError at the API.
MAX_KEY_BYTES: Final = 64 * KiB  # keys live in blocks, bloom filters and the memtable index
MAX_VALUE_BYTES: Final = 64 * MiB  # a value is read whole; larger blobs belong in files

# Read consistency levels (kvstore.freshness): every acknowledged commit, or the handle's view.
LINEARIZABLE: Final = "linearizable"
SERIALIZABLE_READS: Final = "serializable"
CONSISTENCY_LEVELS: Final = (LINEARIZABLE, SERIALIZABLE_READS)


@dataclass(frozen=True)
class StoreOptions:
    """Tunables of one store handle (not persisted: every handle chooses its own)."""

    # fsync objects and directories on local stores. Off trades durability on
    # power loss for ~10x commit latency.
    fsync: bool = True
    # A commit whose delta is larger than this goes to a delta SST (one more
    # PUT) instead of inline in the root file: keeps root files small, so
    # tailing other writers and opening the store stay cheap.
    inline_delta_bytes: int = 256 * KiB
    # How often the background follower looks for other writers' versions;
    # 0 disables it (refresh() and fresh snapshots still catch up).
    poll_interval_s: float = 1.0
    # What a read sees by default: "linearizable" (every commit acknowledged
    # before the read began, by any process: a local directory checks one
    # shared integer, S3 one probe GET per read, shared by concurrent reads)
    # or "serializable" (this handle's view, up to poll_interval_s behind
    # other processes; no storage request). Each read may override it.
    read_consistency: str = "linearizable"
    # Minimum time between two _latest_hint writes: one PUT per interval, not
    # per commit, keeps PUTs per commit ~1 under load.
    hint_interval_s: float = 1.0
    # Block cache budget for SST blocks and footers.
    cache_bytes: int = 64 * MiB
    # Group commit caps: one root file carries at most this many transactions
    # / bytes, bounding root size and the time a late joiner waits.
    max_group_commits: int = 4096
    max_group_bytes: int = 8 * MiB
    # Lost-race retries before a commit fails with CommitError. Each retry
    # first catches up with the winners, so this only trips under extreme,
    # sustained contention.
    max_commit_attempts: int = 1000
    # Jittered backoff between attempts after a lost race, in seconds.
    backoff_min_s: float = 0.0005
    backoff_max_s: float = 0.05
    # Parallel GETs when loading many unflushed versions at open.
    open_parallelism: int = 16
    # Default transaction lifetime: a forgotten transaction stops pinning the
    # oracle's memory and retention after this long.
    txn_ttl_s: float = 3600.0
    # How long Transaction.get_for_update waits for a key another transaction
    # of this handle has locked before raising LockTimeoutError. Long enough
    # for a queue of commits on a hot key (each holds the lock for one commit),
    # short enough that a forgotten lock holder does not stall callers for
    # long; 0 = never wait. Lock cycles fail at once (DeadlockError).
    lock_timeout_s: float = 10.0
    # A handle that has not confirmed the chain head for this long double-checks
    # (hint + probes) before committing, so a root GC removed while it slept is
    # never re-created. Keep it far below retention_window_s + gc_grace_s (the
    # age a root must reach before GC deletes it); costs a few HEADs.
    stale_check_s: float = 30.0

    # False makes a cheap short-lived handle (e.g. a worker that opens, commits
    # once and closes): the handle starts no thread at all. No follower
    # (reads see the version at open, refresh() and fresh snapshots catch up),
    # no flush/compaction/GC threads (call flush()/compact()/gc()), commits run
    # in the calling thread (concurrent callers take turns instead of sharing
    # a group commit), the _latest_hint is written inline at most once per
    # hint_interval_s and at close, and open reads unflushed roots one by one
    # (open_parallelism is not used).
    background_threads: bool = True

    # -- maintenance: flush, compaction, retention, GC (kvstore.housekeeping) --
    # Run flush and compaction in background threads of this handle; off for
    # handles that only read, or when `lakekv compact` runs as its own process.
    background_maintenance: bool = True
    # How often the background threads check their thresholds (an in-memory
    # check; I/O happens only when there is work).
    maintenance_interval_s: float = 0.5
    # Flush once this many versions are unflushed: opening the store reads
    # one root per unflushed version, so this bounds open time.
    flush_max_versions: int = 256
    # ... or once the memtable holds this many bytes: bounds memory per handle.
    flush_max_bytes: int = 32 * MiB
    # Compact once L0 holds this many small SSTs (together under
    # l0_compaction_bytes / l0_compaction_trigger): every L0 SST is a probe
    # per point get, and small ones are cheap to merge.
    l0_compaction_trigger: int = 4
    # ... or once L0 holds this many bytes (or 3x the trigger in SSTs): large
    # L0 SSTs (bulk loads) cost a rewrite to merge, so they wait until they are
    # worth it; a 1M-row bulk load is then written once before compaction.
    l0_compaction_bytes: int = 256 * MiB
    # Size-tiered merging: a run joins a compaction when it is at most
    # (1 + ratio) x the bytes gathered so far, so runs grow geometrically.
    compaction_size_ratio: float = 1.0
    # More sorted runs than this are merged even if their sizes differ:
    # with the L0 trigger this bounds SSTs consulted per point get.
    max_sorted_runs: int = 4
    # Full compaction when (all data but the oldest run) >= this x the oldest
    # run: bounds space amplification (obsolete versions and tombstones).
    max_space_amplification: float = 2.0
    # Target size of compaction output SSTs, counted before compression: large
    # enough for few objects and cheap listings, small enough to build one in memory.
    sst_target_bytes: int = 32 * MiB
    # Codec of the Arrow buffers in every SST this handle writes (flush, compaction,
    # large-commit delta SSTs): "lz4", "zstd" or "none". The files stay plain
    # Arrow IPC (any Arrow reader with the codec decompresses them); readers of
    # this store accept every codec, so handles may differ. lz4 by default: on
    # W1 rows (incompressible values) it takes SSTs from 1.24 to 1.03 bytes per
    # logical byte for no flush CPU (fewer bytes to copy and checksum), and
    # decodes a 64 KiB block in ~20 us; zstd saves 8 % more but costs
    # ~1 us a row in compaction and ~150 us per block read (pyarrow's zstd
    # spends ~90 us compressing even a 64-byte buffer, and a block has ~15).
    sst_compression: str = DEFAULT_SST_COMPRESSION
    # Time-travel window: versions committed within it stay readable with
    # at(...), and other processes' snapshots younger than it stay valid.
    retention_window_s: float = 24 * 3600.0
    # GC never deletes a file younger than this: it may belong to a flush or
    # compaction that has not committed yet. Must exceed the longest one.
    gc_grace_s: float = 3600.0
    # GC always keeps at least this many newest root files, whatever the window.
    gc_min_roots: int = 16
    # Run GC in the background this often (seconds); 0 = only on gc() / `lakekv gc`.
    gc_interval_s: float = 600.0

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> StoreOptions:
        """Build options from keyword arguments, rejecting unknown names and bad values.

        >>> StoreOptions.from_kwargs(poll_interval_s=0).poll_interval_s
        0.0
        >>> StoreOptions.from_kwargs(poll_interval_s=float("nan"))
        Traceback (most recent call last):
        ...
        ValueError: store option 'poll_interval_s' must be a finite number, got nan

        Raises:
            TypeError: a value of the wrong type (``bool`` is not an ``int``).
            ValueError: an unknown name, or a value out of range.
        """
        known = {f.name: f for f in fields(cls)}
        for name, value in kwargs.items():
            if name not in known:
                raise ValueError(f"unknown store option {name!r}; known: {', '.join(sorted(known))}")
            default = known[name].default
            expected = type(default)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                kwargs[name] = float(value)
            elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise TypeError(f"store option {name!r} must be {expected.__name__}, not {type(value).__name__}")
            if expected is float and not math.isfinite(kwargs[name]):
                raise ValueError(f"store option {name!r} must be a finite number, got {value!r}")
            if expected in (int, float) and kwargs[name] < 0:
                raise ValueError(f"store option {name!r} must be >= 0, got {value!r}")
        options = cls(**kwargs)
        if options.max_group_commits < 1 or options.max_commit_attempts < 1:
            raise ValueError("max_group_commits and max_commit_attempts must be >= 1")
        if options.backoff_max_s < options.backoff_min_s:
            raise ValueError("backoff_max_s must be >= backoff_min_s")
        # A flush commit is itself one unflushed version: a threshold of 1
        # would make every flush trigger the next.
        if options.flush_max_versions < 2:
            raise ValueError(f"flush_max_versions must be >= 2, got {options.flush_max_versions}")
        # Zero would expire every transaction at once / spin a core in the
        # maintenance loop: both are positive durations.
        for name in ("txn_ttl_s", "maintenance_interval_s"):
            if getattr(options, name) <= 0:
                raise ValueError(f"store option {name!r} must be > 0 seconds, got {getattr(options, name)!r}")
        for name in ("flush_max_bytes", "l0_compaction_trigger", "l0_compaction_bytes", "max_sorted_runs", "sst_target_bytes"):
            if getattr(options, name) < 1:
                raise ValueError(f"store option {name!r} must be >= 1, got {getattr(options, name)!r}")
        if options.read_consistency not in CONSISTENCY_LEVELS:
            raise ValueError(
                f"store option 'read_consistency' must be one of {CONSISTENCY_LEVELS}, got {options.read_consistency!r}"
            )
        if options.sst_compression not in SST_COMPRESSIONS:
            raise ValueError(
                f"store option 'sst_compression' must be one of {tuple(SST_COMPRESSIONS)}, got {options.sst_compression!r}"
            )
        if options.max_space_amplification <= 0:
            raise ValueError(f"max_space_amplification must be > 0, got {options.max_space_amplification!r}")
        return options
