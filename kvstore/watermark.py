"""Watermark: the oldest seq any open reader of this process still needs.

A multiset of pinned seqs (open snapshots, running transactions). Retention
never drops a version a pinned reader can see; the oracle forgets committed
write sets older than the oldest running transaction. Thread-safe.

Readers dropped without ``close()`` release their pin from a garbage-collection
finalizer through :meth:`Watermark.release_later`, which takes no lock (a
finalizer may run in any thread at any allocation, even one holding this
lock); the next call that reads the pins applies the releases.
"""

from __future__ import annotations

import threading
from collections import Counter, deque


class Watermark:
    """Multiset of pinned seqs; :meth:`oldest` is the watermark."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pins: Counter[int] = Counter()
        self._released: deque[int] = deque()  # appended by finalizers, lock-free

    def release_later(self, seq: int) -> None:
        """Release one pin of ``seq`` at the next call (safe from a finalizer)."""
        self._released.append(seq)

    def _apply_releases(self) -> None:
        # Requires the lock.
        while self._released:
            seq = self._released.popleft()
            count = self._pins.get(seq, 0)
            if count <= 1:
                self._pins.pop(seq, None)
            else:
                self._pins[seq] = count - 1

    def pin(self, seq: int) -> None:
        with self._lock:
            self._pins[seq] += 1

    def unpin(self, seq: int) -> None:
        """Release one pin of ``seq``. Raises ValueError if it is not pinned."""
        with self._lock:
            self._apply_releases()
            count = self._pins.get(seq, 0)
            if count == 0:
                raise ValueError(f"seq {seq} is not pinned")
            if count == 1:
                del self._pins[seq]
            else:
                self._pins[seq] = count - 1

    def oldest(self) -> int | None:
        """The smallest pinned seq, or None when nothing is pinned. O(distinct pins)."""
        with self._lock:
            self._apply_releases()
            return min(self._pins) if self._pins else None

    def __len__(self) -> int:
        with self._lock:
            self._apply_releases()
            return sum(self._pins.values())
