"""Retention: which versions must stay readable, and the checkpoints that pin them.

The *retention floor* is a seq. Compaction keeps, per key, every version
above it and one boundary version at or below it (so a read at any seq at or
above the floor is exact), and GC keeps every root file — and what it
references — from the oldest version whose last seq reaches the floor. The
floor is the oldest of:

* the time-travel window: the last seq of the newest version committed
  (storage timestamp) at or before ``now - retention_window_s``: a read "as
  of" any time inside the window lands on a version at or above it;
* every live checkpoint (a durable pin, recorded in the root chain);
* this process's open snapshots and transactions (``Store.watermark``).

Other processes' snapshots are protected by the window only: a snapshot held
longer than the window in another process may find its files gone.

Checkpoints live in every root file's ``checkpoints`` map, carried forward by
the committer; a :class:`CheckpointChange` (set or remove one name) is applied
to the map of the version it commits on top of, so concurrent changes to
different names never conflict. Expired entries are dropped whenever the map
changes, and ignored by retention before that.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Final

from kvstore.clock import StorageClock
from kvstore.history import RootIndex
from kvstore.options import StoreOptions
from kvstore.state import EngineState
from kvstore.watermark import Watermark

MAX_CHECKPOINT_NAME: Final = 200  # names are JSON keys in every root file: keep them short


@dataclass(frozen=True)
class Checkpoint:
    """A named, durable pin on one version.

    Attributes:
        name: the checkpoint's name.
        version: the pinned version.
        seq: its last seq (what retention keeps readable).
        created_ms: wall clock of the creating handle, ms since the epoch.
        expires_ms: when the pin lapses, or None for never.
    """

    name: str
    version: int
    seq: int
    created_ms: int
    expires_ms: int | None = None

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms is not None and self.expires_ms <= now_ms

    def to_entry(self) -> dict[str, Any]:
        """The JSON value stored under the name in a root's ``checkpoints`` map."""
        return {"version": self.version, "seq": self.seq, "created_ms": self.created_ms, "expires_ms": self.expires_ms}

    @classmethod
    def from_entry(cls, name: str, entry: dict[str, Any]) -> Checkpoint:
        return cls(name, int(entry["version"]), int(entry["seq"]), int(entry["created_ms"]), entry.get("expires_ms"))


@dataclass(frozen=True)
class CheckpointChange:
    """Set (``entry``) or remove (``entry=None``) checkpoint ``name`` in the next root."""

    name: str
    entry: dict[str, Any] | None
    now_ms: int

    def apply(self, checkpoints: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint map after this change; expired entries are dropped too."""
        out = {
            name: entry
            for name, entry in checkpoints.items()
            if entry.get("expires_ms") is None or entry["expires_ms"] > self.now_ms
        }
        if self.entry is None:
            out.pop(self.name, None)
        else:
            out[self.name] = self.entry
        return out


def check_checkpoint_name(name: object) -> str:
    """Return ``name`` if it is a valid checkpoint name.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: it is empty, too long or has control characters.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not name or len(name) > MAX_CHECKPOINT_NAME or not name.isprintable():
        raise ValueError(f"name must be 1..{MAX_CHECKPOINT_NAME} printable characters, got {name!r}")
    return name


def check_ttl(ttl: object) -> float | None:
    """Return ``ttl`` (seconds) if valid: None or a positive finite number.

    Raises:
        TypeError / ValueError: naming ``ttl``.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be a number of seconds or None, not {type(ttl).__name__}")
    if not (ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def live_checkpoints(checkpoints: dict[str, Any], now_ms: int) -> list[Checkpoint]:
    """The unexpired checkpoints of a root's map, by name."""
    parsed = (Checkpoint.from_entry(name, entry) for name, entry in sorted(checkpoints.items()))
    return [checkpoint for checkpoint in parsed if not checkpoint.expired(now_ms)]


@dataclass(frozen=True)
class RetentionFloor:
    """The retention floor and what set it.

    Attributes:
        seq: the floor seq (see the module docstring).
        version: the oldest version that must stay readable: the first whose
            last seq reaches ``seq``.
        reason: ``"window"``, ``"checkpoint <name>"`` or ``"snapshot"``.
    """

    seq: int
    version: int
    reason: str


class Retention:
    """Computes the retention floor of one store handle. Thread-safe."""

    def __init__(
        self, state: EngineState, index: RootIndex, watermark: Watermark, options: StoreOptions, clock: StorageClock
    ) -> None:
        self._state = state
        self._clock = clock
        self._index = index
        self._watermark = watermark
        self._window_s = options.retention_window_s
        # The window's edge only moves forward: start each search where the
        # last one ended instead of at version 0.
        self._window_low = 0

    def floor(self) -> RetentionFloor:
        """The floor now.

        The window is measured on the storage's clock (root timestamps are
        the storage's), conservatively: a root counts as outside the window
        only if it is certainly older than ``retention_window_s`` whatever
        the storage's timestamp resolution (:meth:`StorageClock.cutoff`).
        Checkpoint expiry uses the local clock, like the handles that set them.

        Raises:
            ObjectStoreError: the storage clock could not be probed.
        """
        now = time.time()
        head, head_seq = self._state.head
        window_seq, window_version = self._window_floor(self._clock.cutoff(self._window_s), head)
        # (seq, reason, a version known to reach seq: where the search for the
        # oldest such version starts)
        candidates = [(head_seq, "head", head), (window_seq, "window", window_version)]
        now_ms = int(now * 1000)
        for checkpoint in live_checkpoints(self._state.checkpoints, now_ms):
            # A pinned root normally exists; in an export it may predate the copy.
            known = checkpoint.version <= head and self._index.summary(checkpoint.version) is not None
            candidates.append((checkpoint.seq, f"checkpoint {checkpoint.name}", checkpoint.version if known else head))
        pinned = self._watermark.oldest()
        if pinned is not None:
            candidates.append((pinned, "snapshot", head))
        seq, reason, start = min(candidates, key=lambda candidate: candidate[0])
        return RetentionFloor(seq, self._index.oldest_reaching_seq(seq, start), reason)

    def _window_floor(self, cutoff: float, head: int) -> tuple[int, int]:
        """``(last seq, version)`` of the newest version committed at or before ``cutoff``."""
        low = min(self._window_low, head)
        version = self._index.newest_at_or_before(cutoff, head, low)
        summary = self._index.summary(version) if version >= 0 else None
        if summary is None:
            # Every surviving version is inside the window: the oldest of
            # them, right after the deleted ones, must stay readable.
            summary = self._index.summary(version + 1)
            if summary is None:  # deleted while we looked: keep everything
                return 0, head
        else:
            self._window_low = version
        return summary.last_seq, summary.version
