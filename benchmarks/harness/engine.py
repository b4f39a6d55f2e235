"""The one small interface every store under test implements.

A benchmark compares engines only through these methods, so a ratio in the
report means "the same work, asked the same way". Two shapes exist:

* :class:`CommitTarget` is the minimum W7 needs: open a fresh location, make
  a single-key write durable, close. The raw conditional-PUT reference
  (:mod:`harness.s3_reference`) is one, and so is every engine.
* :class:`Engine` adds batches, point gets, range scans and (where the engine
  has them) serializable read-modify-write transactions.

Every method that writes returns only once the write is durable in the sense
the engine's :attr:`~CommitTarget.durability` names; that sense is what the
report pairs engines by (see :func:`harness.report.ratio_pairs`).

Thread-safety: ``put``, ``get`` and ``rmw`` may be called from many threads
at once between ``open`` and ``close``; adapters hold per-thread resources
(SQLite connections, asyncio loops) where their binding needs them.
``open``, ``settle`` and ``close`` are called from one thread.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

# Durability classes. Engines are compared with the lakekv configuration of
# the same class, so no ratio ever sets an fsync'd commit against one that
# only reached the OS page cache.
FSYNC: Final = "fsync per commit"
OS_BUFFERED: Final = "OS page cache (no fsync)"
S3_PUT: Final = "S3 PUT acknowledged"

# A scan form: (start key, end key, row limit) -> rows seen. Row forms hand
# every (key, value) to Python as bytes; a batch form may keep them columnar.
ScanFn = Callable[[bytes, bytes, int], int]


class CommitTarget(Protocol):
    """Anything W7 can drive: fresh location, durable single-key writes."""

    key: str  # stable id in the JSON results, e.g. "lakekv-s3"
    label: str  # display name in tables and plots
    family: str  # "lakekv" for our configurations, else the peer's name
    durability: str  # one of the classes above

    def settings(self) -> dict[str, Any]:
        """Every setting that affects the numbers, JSON-serialisable."""
        ...

    def open(self, path: Path) -> None:
        """Create a fresh, empty store (``path`` is a scratch directory it may use)."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Durably write one key; return once durable."""
        ...

    def close(self) -> None:
        """Release everything ``open`` acquired; idempotent."""
        ...


class Engine(ABC):
    """A key-value store under test; see the module docstring.

    Subclasses set the class attributes and implement the abstract methods.
    Optional capabilities (transactions, extra scan forms, settling) have
    defaults that say plainly when a capability is absent.
    """

    key: str
    label: str
    family: str
    durability: str
    # Whether rmw() runs a real serializable transaction. When False,
    # transaction_note says why (printed in the report).
    has_transactions: bool = False
    transaction_note: str = ""

    def __init__(self) -> None:
        self.path: Path | None = None

    # -- lifecycle -------------------------------------------------------------

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Every setting that affects the numbers, JSON-serialisable."""

    @abstractmethod
    def open(self, path: Path) -> None:
        """Create a fresh, empty store under ``path`` (a new, empty directory)."""

    @abstractmethod
    def close(self) -> None:
        """Release everything ``open`` acquired; idempotent."""

    def settle(self) -> str:
        """Bring bulk-loaded data to the engine's steady on-disk state.

        Called after W1 and before the read workloads, so point gets and
        scans read the engine's real structures (SSTs, B-tree pages), not a
        write buffer. Returns a one-line description of what was done.
        """
        return "nothing to do"

    def disk_bytes(self) -> int:
        """Bytes allocated on disk under :attr:`path` (like ``du``)."""
        if self.path is None:
            raise RuntimeError(f"{self.label}: disk_bytes() before open()")
        return allocated_bytes(self.path)

    # -- operations ------------------------------------------------------------

    @abstractmethod
    def put(self, key: bytes, value: bytes) -> None:
        """Durably write one key in its own commit; return once durable."""

    @abstractmethod
    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Durably and atomically write ``items`` as one commit."""

    @abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The current value of ``key``, or None."""

    @abstractmethod
    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        """Read keys in ``[start, end)`` in order, at most ``limit``, as Python
        ``(key, value)`` bytes; return the number of rows read."""

    def scan_forms(self) -> dict[str, ScanFn]:
        """The scan forms this engine offers, by name; every engine has ``rows``."""
        return {"rows": self.scan}

    def rmw(self, key: bytes) -> bool:
        """One SERIALIZABLE transaction: read ``key`` (a decimal counter), write
        it back incremented, commit durably. True if it committed, False if it
        aborted on a conflict (not retried: the caller counts aborts).

        Raises:
            NotImplementedError: the engine (or its binding) has no transactions.
        """
        raise NotImplementedError(self.transaction_note or f"{self.label} has no transactions")

    def timed_gets(self, keys: Sequence[bytes], deadline: float) -> tuple[list[float], int]:
        """Get each key in order, stopping at ``deadline`` (perf_counter seconds).

        Returns per-get latencies in seconds and how many keys were missing.
        An adapter whose binding is asynchronous overrides this to run the
        loop inside its own event loop, so the figure is not inflated by a
        sync-to-async bridge per call.
        """
        get = self.get
        clock = time.perf_counter
        latencies: list[float] = []
        missing = 0
        for key in keys:
            started = clock()
            if get(key) is None:
                missing += 1
            ended = clock()
            latencies.append(ended - started)
            if ended > deadline:
                break
        return latencies, missing


def allocated_bytes(path: Path) -> int:
    """Sum of allocated blocks of every file under ``path`` (sparse files count
    what they use, as ``du`` does, not their apparent size)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue  # removed by the engine's background GC while we walked
    return total


def counter_value(old: bytes | None) -> bytes:
    """The read-modify-write step every engine's ``rmw`` applies.

    >>> counter_value(None), counter_value(b"41")
    (b'1', b'42')
    """
    return b"%d" % (int(old or b"0") + 1)
