"""Linearizable reads: a read sees every commit acknowledged before it began.

A handle's view is the versions it has applied. Its own commits are in it at
once; other processes' arrive through the follower, every ``poll_interval_s``.
A linearizable read must not wait for that: before answering, it checks
whether the chain has a version newer than the view, and catches up if so.
Because versions are dense and a writer acknowledges a commit only after its
root file exists, "root ``version + 1`` is absent" proves no commit newer than
the view was acknowledged when the check began.

What the check costs depends on the storage:

* **Local directory** — a :class:`HeadBeacon`: an 8-byte file
  (``_head_beacon``) that every publisher raises to the version it created,
  after the root file exists and before acknowledging; readers map it and
  compare one integer with their view (about 0.2 µs, no system call). A
  directory store lives on one machine, so every writer shares the mapping.
  The beacon is only a trigger: catching up still reads the root files, and a
  beacon that is wrong can only cost a wasted catch-up or leave out a commit
  that was never acknowledged (its writer crashed between publishing and
  raising the beacon).
* **Anything else** (S3, memory, wrapped stores) — a probe for root
  ``version + 1``: one GET (404 when there is nothing new, the same cost as a
  HEAD). Concurrent readers share probes: a reader waits for the first probe
  that *started* after it arrived, so under load one probe answers many
  reads, and each reader still waits for at most about two probe round trips.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import Callable, Final

from kvstore.format.names import BEACON_PATH
from kvstore.options import CONSISTENCY_LEVELS, LINEARIZABLE, SERIALIZABLE_READS

__all__ = ["CONSISTENCY_LEVELS", "LINEARIZABLE", "SERIALIZABLE_READS", "HeadBeacon", "ReadBarrier", "SharedProbe",
           "check_consistency"]

_BEACON_BYTES: Final = 8
_U64: Final = struct.Struct("<Q")



def check_consistency(consistency: object) -> str:
    """``consistency`` if it names a read consistency level; else TypeError / ValueError.

    ``"linearizable"``: the read sees every commit acknowledged before it
    began, by any process. ``"serializable"``: the handle's view, which may lag
    other processes' commits by up to ``poll_interval_s``.
    """
    if not isinstance(consistency, str):
        raise TypeError(f"consistency must be a str, not {type(consistency).__name__}")
    if consistency not in CONSISTENCY_LEVELS:
        raise ValueError(f"consistency must be one of {CONSISTENCY_LEVELS}, got {consistency!r}")
    return consistency


class HeadBeacon:
    """The highest version any process has published in one local store directory.

    Raised under an exclusive ``flock`` (so a slower publisher never lowers
    it); read without a lock through a shared mapping (an aligned 8-byte
    load). Thread-safe.
    """

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size < _BEACON_BYTES:
                    os.ftruncate(fd, _BEACON_BYTES)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._map = mmap.mmap(fd, _BEACON_BYTES)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._closed = False

    @classmethod
    def for_directory(cls, directory: Path) -> HeadBeacon | None:
        """The beacon of the store in ``directory``, or None where it cannot be made
        (a read-only directory): readers then probe root files instead."""
        try:
            return cls(directory / BEACON_PATH)
        except OSError:
            return None

    @property
    def mapping(self) -> mmap.mmap:
        """The shared mapping :meth:`read` loads from (8 bytes, little-endian):
        the compiled point get reads it in place (``StoreGetter.set_barrier``),
        and must let go of it before :meth:`close`."""
        return self._map

    def read(self) -> int:
        """The highest version published so far (0 before any)."""
        return _U64.unpack_from(self._map)[0]  # type: ignore[no-any-return]

    def raise_to(self, version: int) -> None:
        """Record that ``version`` exists; never lowers the beacon."""
        if self._closed:
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if _U64.unpack_from(self._map)[0] < version:
                _U64.pack_into(self._map, 0, version)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._map.close()
            os.close(self._fd)


class SharedProbe:
    """Runs ``probe`` so that every caller of :meth:`sync` is answered by a probe
    that started after the call: concurrent callers share one.

    A failed probe raises in the caller that ran it; callers waiting for it
    start another instead of taking it as an answer.
    """

    def __init__(self, probe: Callable[[], object]) -> None:
        self._probe = probe
        self._cond = threading.Condition()
        self._started = 0  # probes begun
        self._finished = 0  # the newest probe that completed successfully
        self._running = False
        self.probes = 0  # for stats: how many probes ran

    def sync(self) -> None:
        with self._cond:
            needed = self._started + 1  # the first probe to start from now on
            while self._finished < needed:
                if not self._running:
                    self._started += 1
                    generation = self._started
                    self._running = True
                    break
                self._cond.wait()
            else:
                return
        done = False
        try:
            self.probes += 1
            self._probe()
            done = True
        finally:
            with self._cond:
                self._running = False
                if done:
                    self._finished = max(self._finished, generation)
                self._cond.notify_all()


class ReadBarrier:
    """``sync()`` brings a handle's view up to every commit acknowledged before the call.

    Args:
        version: the handle's current version.
        catch_up: applies every newer version (reads root files from
            ``version + 1`` until one is absent).
        beacon: the store's beacon on a local directory, else None (probe).
    """

    def __init__(self, version: Callable[[], int], catch_up: Callable[[], object], beacon: HeadBeacon | None) -> None:
        self._version = version
        self._probe = SharedProbe(catch_up)
        # Bound once: sync() runs before every default read.
        self._beacon_read = beacon.read if beacon is not None else None

    def is_current(self) -> bool:
        """True when :meth:`sync` would return at once (a beacon that has not moved past the view)."""
        beacon_read = self._beacon_read
        return beacon_read is not None and beacon_read() <= self._version()

    def sync(self) -> None:
        beacon_read = self._beacon_read
        if beacon_read is None or beacon_read() > self._version():
            self._probe.sync()
