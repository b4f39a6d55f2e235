"""The version chain on storage: reading, probing and publishing root files.

Versions are dense: version N exists only if N-1 did (every writer creates
N+1 only after reading N). So the latest version can be found by galloping
upward from any version known to exist: probe N+1, N+2, N+4, ... until a miss,
then binary-search between the last hit and the first miss — about
2*log2(distance) probes however stale the starting point is.

``_latest_hint`` (decimal text) is a best-effort shortcut written off the
commit path; readers never trust it alone.
"""

from __future__ import annotations

import logging
import threading
import time

from kvstore.errors import StoreError
from kvstore.format.names import HINT_PATH
from kvstore.freshness import HeadBeacon
from kvstore.format.root import RootFile, decode_root, encode_root, parse_root_path, root_path
from kvstore.objstore.base import ObjectStore
from kvstore.search import last_true

log = logging.getLogger(__name__)



class VersionChain:
    """Root-file I/O for one store. Thread-safe (stateless apart from ``store``)."""

    def __init__(self, store: ObjectStore, beacon: HeadBeacon | None = None) -> None:
        self.store = store
        # Raised after each publish, before the publisher acknowledges: how
        # readers on a local directory learn cheaply that the chain moved.
        self.beacon = beacon

    def read_root(self, version: int) -> RootFile:
        """Read and verify root ``version``. Raises FileNotFoundError if absent."""
        return decode_root(self.store.get(root_path(version)), version)

    def try_read_root(self, version: int) -> RootFile | None:
        """Like :meth:`read_root` but None when the version does not exist (yet)."""
        try:
            return self.read_root(version)
        except FileNotFoundError:
            return None

    def exists(self, version: int) -> bool:
        try:
            self.store.head(root_path(version))
        except FileNotFoundError:
            return False
        return True

    def publish(self, data: bytes, version: int) -> bool:
        """Create root ``version`` from encoded bytes; False if it already exists."""
        created = self.store.put_if_absent(root_path(version), data)
        if created:
            self.note_exists(version)
        return created

    def note_exists(self, version: int) -> None:
        """Tell local readers root ``version`` exists (see :class:`~kvstore.freshness.HeadBeacon`)."""
        if self.beacon is not None:
            self.beacon.raise_to(version)

    def read_hint(self) -> int | None:
        """The hinted latest version, or None if there is no usable hint."""
        try:
            text = self.store.get(HINT_PATH)
        except FileNotFoundError:
            return None
        try:
            value = int(text.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            log.warning("ignoring malformed %s in %s: %r", HINT_PATH, self.store.url, text[:40])
            return None
        return value if value >= 0 else None

    def find_latest(self, known: int | None = None) -> int | None:
        """The latest existing version, or None if the store has no root at all.

        Args:
            known: a version this caller already saw exist (a lower bound).
        """
        start = known
        hint = self.read_hint()
        if hint is not None and (start is None or hint > start) and self.exists(hint):
            start = hint
        if start is None:
            if self.exists(0):
                start = 0
            else:
                start = self._oldest_listed()
                if start is None:
                    return None
        return self._gallop(start)

    def _gallop(self, lo: int) -> int:
        """Largest existing version >= ``lo`` (which must exist)."""
        return last_true(lo, None, self.exists, low_holds=True)

    def _oldest_listed(self) -> int | None:
        """Oldest root by listing: only needed when GC removed version 0."""
        versions = [v for v in (parse_root_path(m.path) for m in self.store.list("_")) if v is not None]
        return min(versions) if versions else None

    def list_versions(self) -> list[int]:
        """Every version whose root file exists, ascending (one LIST call)."""
        return sorted(v for v in (parse_root_path(m.path) for m in self.store.list("_")) if v is not None)


def encode_for_publish(root: RootFile, encoded_rows: bytes | None = None) -> bytes:
    """Encode a root, refusing versions the file name cannot hold.

    ``encoded_rows``: as for :func:`~kvstore.format.root.encode_root`.
    """
    root_path(root.version)  # raises ValueError past 2**32-1
    return encode_root(root, encoded_rows)


class HintWriter:
    """Writes ``_latest_hint`` in a background thread, at most once per interval.

    The hint is an optimisation for readers; a failure to write it is logged
    and never reaches a committer. With ``threaded=False`` there is no thread:
    :meth:`offer` writes inline when the interval has passed (one PUT on that
    commit's path) and :meth:`close` writes the last pending hint.
    """

    def __init__(self, store: ObjectStore, interval_s: float, *, threaded: bool = True) -> None:
        self._store = store
        self._interval_s = interval_s
        self._cond = threading.Condition()
        self._pending: int | None = None
        self._written = -1
        self._last_write = float("-inf")  # the first hint is written at once
        self._closed = False
        # The thread waits for a first offer (not for its interval to pass):
        # only then does an offer need to wake it. Waking it on every commit
        # costs the committing thread a GIL hand-off each time.
        self._idle = False
        self.writes = 0
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name="lakekv-hint", daemon=True)
            self._thread.start()

    def offer(self, version: int) -> None:
        """Note that ``version`` is committed; cheap, never blocks on I/O (when threaded)."""
        with self._cond:
            if self._pending is None or version > self._pending:
                self._pending = version
                if self._idle:
                    self._cond.notify()
            inline = self._thread is None and time.monotonic() - self._last_write >= self._interval_s
        if inline:
            self._write(version)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._pending is None or self._pending <= self._written):
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                if self._closed:
                    return
                # Sleep until the interval is over (offers meanwhile only move _pending).
                while not self._closed and (wait := self._last_write + self._interval_s - time.monotonic()) > 0:
                    self._cond.wait(wait)
                if self._closed:
                    return
                version = self._pending
            assert version is not None
            self._write(version)

    def _write(self, version: int) -> None:
        try:
            self._store.put(HINT_PATH, str(version).encode("ascii"))
        except (OSError, StoreError) as exc:  # best effort: readers probe past a stale hint
            log.warning("could not write %s=%d to %s: %s", HINT_PATH, version, self._store.url, exc)
        with self._cond:
            self._written = max(self._written, version)
            self._last_write = time.monotonic()
            self.writes += 1

    def close(self, flush: bool = True) -> None:
        """Stop the thread; with ``flush``, write the last pending hint first."""
        with self._cond:
            pending = self._pending if flush and self._pending is not None and self._pending > self._written else None
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        if pending is not None:
            self._write(pending)
