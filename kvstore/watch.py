"""Watching a store: its version chain replayed as events, then followed as it grows.

Every version's root file holds the rows its commits wrote (the chain is the
write-ahead log), so a watch needs no server and no change feed of its own:
it reads root N, N+1, ... and turns each row under its prefix into a
:class:`WatchEvent`, in version order and, within a version, in commit (seq)
order. Past the newest version it probes for the next root file every
``poll_interval_s``, so it sees every process's and machine's commits; a
version whose root file retention has deleted cannot be replayed
(:class:`~kvstore.errors.SnapshotTooOldError`).

A put with a TTL has no later row when it expires. The watch remembers the
expiry of each such put it reports (and, when it starts at the newest
version, of each live key under its prefix) and reports an ``"expire"``
event, unless the key was written again first: before the first version
committed after the expiry (by the committing writer's clock, recorded in
the root file), or, once the watch has read every version there is, as
soon as the expiry passes. A replay thus puts an expiry where it happened
between versions: before a put that found the key gone.

A caught-up watch wakes at once when its own handle applies a version (a
commit of the handle, or the follower catching up): the handle's
:class:`VersionSignal`. Only other processes' commits wait for the poll.
The signal also holds the last few versions the handle applied, so a watch
reads those from memory instead of their root files (:meth:`Watch.poll_applied`
needs no storage request at all, which lets an event loop call it).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from kvstore.chain import VersionChain
from kvstore.errors import SnapshotTooOldError, StoreError
from kvstore.format.root import RootFile
from kvstore.format.rows import PUT, Row
from kvstore.reader import now_ms

PUT_EVENT: Final = "put"
DELETE_EVENT: Final = "delete"
EXPIRE_EVENT: Final = "expire"
# Applied roots a VersionSignal holds: enough for a watch woken by each
# version to find it, however many versions a group of wake-ups spans.
KEPT_ROOTS: Final = 64


def check_watch_args(prefix: object, start: object, end: object) -> None:
    """Refuse a bad watch ``prefix`` (bytes), ``start`` or ``end`` (versions, end >= start).

    Raises:
        TypeError / ValueError: naming the argument.
    """
    if type(prefix) is not bytes:
        raise TypeError(f"prefix must be bytes, not {type(prefix).__name__}")
    for name, value in (("start", start), ("end", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise TypeError(f"{name} must be a version (an int >= 0) or None, not {value!r}")
    if isinstance(start, int) and isinstance(end, int) and end < start:
        raise ValueError(f"end ({end}) is before start ({start})")


class VersionSignal:
    """Tells waiters that a handle applied a new version, and keeps the newest few. Thread-safe.

    Blocking waiters use :meth:`wait`; anything else (an event loop) registers
    a callback with :meth:`subscribe`, which runs in the thread that applied
    the version and must return quickly.

    The last :data:`KEPT_ROOTS` applied roots whose rows are inline (small
    commits; a root whose rows live in a delta SST is not kept, so what is
    held stays small) are held for :meth:`applied_root`.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._applied = 0
        self._callbacks: dict[int, Callable[[int], None]] = {}
        self._next_id = 0
        self._roots: dict[int, RootFile] = {}  # insertion order is version order

    def notify(self, root: RootFile) -> None:
        with self._cond:
            self._applied += 1
            if root.delta_sst is None:
                self._roots[root.version] = root
                if len(self._roots) > KEPT_ROOTS:
                    del self._roots[next(iter(self._roots))]
            self._cond.notify_all()
            callbacks = list(self._callbacks.values())
        for callback in callbacks:
            callback(root.version)

    def applied_root(self, version: int) -> RootFile | None:
        """Root ``version`` if this handle applied it recently and holds it; else None."""
        with self._cond:
            return self._roots.get(version)

    @property
    def applied(self) -> int:
        """How many versions have been applied: compare before and after a wait."""
        return self._applied

    def wait(self, since: int, timeout_s: float) -> None:
        """Until a version is applied after ``applied`` was ``since``, or ``timeout_s``."""
        with self._cond:
            if self._applied == since:
                self._cond.wait(timeout_s)

    def wake(self) -> None:
        """Wake every blocking waiter (e.g. so a closed watch sees it is closed)."""
        with self._cond:
            self._cond.notify_all()

    def subscribe(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(version)`` at each version applied; returns the unsubscribe function."""
        with self._cond:
            token = self._next_id
            self._next_id += 1
            self._callbacks[token] = callback

        def unsubscribe() -> None:
            with self._cond:
                self._callbacks.pop(token, None)

        return unsubscribe


@dataclass(frozen=True)
class WatchEvent:
    """One change of one key.

    Attributes:
        version: the store version that made it (for ``"expire"``: the newest
            version the watch had read when it saw the expiry).
        seq: the key's revision: the seq of the commit that wrote it (for
            ``"expire"``: of the put that expired).
        key: the key.
        value: the new value for ``"put"``; None for ``"delete"`` and ``"expire"``.
        kind: ``"put"``, ``"delete"`` or ``"expire"``.
    """

    version: int
    seq: int
    key: bytes
    value: bytes | None
    kind: str


class Watch:
    """An iterator of :class:`WatchEvent`; see the module docstring. Use ``Store.watch``.

    ``close()`` (from any thread, or the end of a ``with`` block) ends the
    iteration at the next event or poll; with ``end``, it also ends after
    version ``end``.
    """

    def __init__(
        self,
        chain: VersionChain,
        rows_of: Callable[[RootFile], list[Row]],
        known_head: Callable[[], int],
        prefix: bytes,
        start: int,
        end: int | None,
        poll_interval_s: float,
        live_rows: list[Row],
        signal: VersionSignal | None = None,
        min_seq: int = 0,
        next_revision: int = 0,
    ) -> None:
        self._chain = chain
        self._signal = signal if signal is not None else VersionSignal()
        self._rows_of = rows_of
        self._known_head = known_head
        self._prefix = prefix
        self._min_seq = min_seq  # rows below it (earlier commits of the start version) are not reported
        self._next = start
        # Revisions: every change below _next_revision has been read (reported if under the prefix);
        # _through[v] is the last revision of version v, for versions read lately (see revision_through).
        self._next_revision = max(next_revision, min_seq)
        # Expiries seen before the first version read carry the version before it.
        self._through: dict[int, int] = {start - 1: self._next_revision - 1} if self._next_revision else {}
        self._end = end
        self._poll_s = poll_interval_s
        self._closed = threading.Event()
        self._ready: list[WatchEvent] = []
        # Held roots are read only once the watch has caught up: a replay reads
        # the chain, so whether an old version is retained never depends on
        # what this handle happens to hold.
        self._caught_up = False
        # (expire_ms, seq, key) of puts reported; _latest[key] is the key's newest seq seen.
        self._expiries: list[tuple[int, int, bytes]] = []
        self._latest: dict[bytes, int] = {}
        for key, seq, _, _, expire in live_rows:
            self._latest[key] = seq
            if expire is not None:
                heapq.heappush(self._expiries, (expire, seq, key))

    @property
    def next_version(self) -> int:
        """The version the watch reads next: resume a later watch from here to miss nothing."""
        return self._next

    @property
    def next_revision(self) -> int:
        """The revision the watch reads next: a later ``watch(start_revision=...)`` from here misses nothing."""
        return self._next_revision

    def revision_through(self, version: int) -> int:
        """The last revision of ``version`` (an event's ``version``): resuming at the revision after it
        misses none of that version's changes and repeats none of the earlier ones."""
        return self._through.get(version, self._next_revision - 1)

    def close(self) -> None:
        self._closed.set()
        self._signal.wake()

    @property
    def closed(self) -> bool:
        """True once closed, or past ``end``: no more events will come."""
        return self._closed.is_set() or (self._end is not None and self._next > self._end and not self._ready)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        while not self._ready:
            if self._closed.is_set():
                raise StopIteration
            if self._end is not None and self._next > self._end:
                raise StopIteration
            applied = self._signal.applied
            if not self._advance():
                self._signal.wait(applied, self._wait_s())
        return self._ready.pop(0)

    def poll(self) -> list[WatchEvent]:
        """Every event ready now, without waiting (an empty list when caught up, closed or past ``end``).

        For callers that wait their own way (an event loop: ``Store.subscribe``
        says when this handle applied a version).

        Raises:
            SnapshotTooOldError: the next version is no longer retained.
            StoreError: storage failed. Either comes only once the events
                read before it have been returned (by an earlier call), so
                :attr:`next_version` is always where a resumed watch goes on.
        """
        while not self._closed.is_set() and not (self._end is not None and self._next > self._end):
            try:
                if not self._advance():
                    break
            except StoreError:
                if not self._ready:
                    raise
                break  # report what was read; the next poll meets the error again
        ready, self._ready = self._ready, []
        return ready

    def poll_applied(self) -> list[WatchEvent] | None:
        """Like :meth:`poll`, but only through versions this handle applied and holds in memory.

        Makes no storage request, so an event loop may call it. Returns None
        when the next version is not held (it may still exist: another
        process's commit, or one too large to hold), or the watch has not yet
        caught up with the chain; :meth:`poll` reads it.
        """
        if not self._caught_up:
            return None
        advanced = False
        while not self._closed.is_set() and not (self._end is not None and self._next > self._end):
            root = self._signal.applied_root(self._next)
            if root is None:
                break
            self._take(root)
            advanced = True
        if not advanced and not self._ready:
            return None
        ready, self._ready = self._ready, []
        return ready

    @property
    def wait_s(self) -> float:
        """How long a caught-up caller of :meth:`poll` may wait before polling again."""
        return self._wait_s()

    def _advance(self) -> bool:
        """Read the next version if it exists; False when caught up (expiries due now are reported)."""
        root = self._signal.applied_root(self._next) if self._caught_up else None
        if root is not None:
            self._take(root)
            return True
        # The head before the probe: a root is written before the head reaches
        # it, so a miss below that head means retention deleted the root. A
        # head read after the probe could include a commit that landed in
        # between, whose root was simply not there yet when probed.
        head = self._known_head()
        root = self._chain.try_read_root(self._next)
        if root is None:
            if self._next <= head:
                raise SnapshotTooOldError(
                    f"version {self._next} is no longer retained (its root file is gone): a watch can start "
                    "from a retained version only; start from a later one, e.g. the store's current version"
                )
            # Caught up: an expiry now is not undone by a write the watch has yet to read.
            self._caught_up = True
            self._expire(self._next - 1, now_ms())
            return False
        self._take(root)
        return True

    def _take(self, root: RootFile) -> None:
        """Report root ``self._next``'s changes and move past it."""
        # What expired before this version was committed (by its writer's clock) comes first.
        self._expire(self._next - 1, root.writer_clock_ms)
        self._read(root)
        self._next_revision = max(self._next_revision, root.last_seq + 1)
        self._through[root.version] = self._next_revision - 1
        if len(self._through) > KEPT_ROOTS:
            # Keep every version with an event not yet returned (a poll may return many versions);
            # what earlier polls returned has been used by their callers.
            keep_from = self._ready[0].version if self._ready else root.version
            for version in [v for v in self._through if v < keep_from]:
                del self._through[version]
        self._next += 1

    def _wait_s(self) -> float:
        """Until the next poll, or the next expiry if sooner."""
        if self._expiries:
            return max(0.0, min(self._poll_s, (self._expiries[0][0] - now_ms()) / 1000))
        return self._poll_s

    def _read(self, root: RootFile) -> None:
        rows = [row for row in self._rows_of(root) if row[0].startswith(self._prefix) and row[1] >= self._min_seq]
        rows.sort(key=lambda row: (row[1], row[0]))  # stored by key, then seq descending
        for key, seq, kind, value, expire in rows:
            self._latest[key] = seq
            if kind == PUT:
                self._ready.append(WatchEvent(root.version, seq, key, value, PUT_EVENT))
                if expire is not None:
                    heapq.heappush(self._expiries, (expire, seq, key))
            else:
                self._ready.append(WatchEvent(root.version, seq, key, None, DELETE_EVENT))

    def _expire(self, version: int, until_ms: int) -> None:
        """Report the expiries at or before ``until_ms`` of puts not written over since."""
        while self._expiries and self._expiries[0][0] <= until_ms:
            _, seq, key = heapq.heappop(self._expiries)
            if self._latest.get(key) == seq:  # not written again since that put
                self._ready.append(WatchEvent(version, seq, key, None, EXPIRE_EVENT))
                del self._latest[key]
