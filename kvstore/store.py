"""The Store facade: opens a store and wires state, committer, follower and
read path together. No algorithms live here.

Thread-safety: a Store may be shared by any number of threads.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from concurrent.futures import Future
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Callable, Iterator, TypeVar, overload

import pyarrow as pa

from kvstore.api import KeyValueStore
from kvstore.batch import (
    DELETE_MUTATION, Mutation, WriteBatch, check_key, check_lease_id, check_limit, check_summary, put_mutation,
)
from kvstore.cache import BlockCache
from kvstore.chain import HintWriter, VersionChain
from kvstore.clock import StorageClock
from kvstore.committer import Committer, PendingCommit
from kvstore.errors import StoreClosedError
from kvstore.follower import Follower
from kvstore.format.rows import Row
from kvstore.freshness import LINEARIZABLE, HeadBeacon, ReadBarrier, check_consistency
from kvstore.export import ExportReport
from kvstore.flush import FlushResult
from kvstore.gc import GCReport
from kvstore.history import VersionInfo
from kvstore.housekeeping import CompactionResult, Housekeeper
from kvstore.identity import check_identity, create_store
from kvstore import cas, leases, revisions
from kvstore.keyrange import prefix_bounds
from kvstore.lease_reads import LeaseReads
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.local import LocalStore
from kvstore.oracle import SERIALIZABLE, Oracle
from kvstore.options import MAX_KEY_BYTES, StoreOptions
from kvstore.registry import opener_for, registered_scheme
from kvstore.reader import StoreGetter, get_row, scan_rows, visible_value
from kvstore.retention import Checkpoint, RetentionFloor
from kvstore.snapshot import Snapshot, scan_revision_view, scan_view, scan_view_batches
from kvstore.state import EngineState
from kvstore.timetravel import TimeTravel
from kvstore.txn import Transaction, OptimisticTransactions
from kvstore.verify import VerifyReport, verify_store
from kvstore.watch import VersionSignal, Watch, check_watch_args
from kvstore.watermark import Watermark

T = TypeVar("T")



log = logging.getLogger(__name__)


@overload
def open(url: ObjectStore | os.PathLike[str], create: bool = True, **options: Any) -> Store: ...  # noqa: A001
@overload
def open(url: str, create: bool = True, **options: Any) -> KeyValueStore: ...  # noqa: A001
def open(  # noqa: A001 - public API name
    url: str | os.PathLike[str] | ObjectStore, create: bool = True, **options: Any
) -> KeyValueStore:
    """Open (or create) the store at ``url``.

    An embedded :class:`Store` for every URL but one whose scheme another
    package opens (:mod:`kvstore.registry`): ``http(s)://host:port``, a
    ``lakekv serve`` server, gives a :class:`kvclient.remote.RemoteStore`.
    Both are a :class:`~kvstore.api.KeyValueStore`, the type of a ``str``
    URL's result; :func:`open_embedded` always gives a :class:`Store`, for
    what only an embedded store offers (snapshots, maintenance, time travel).

    Args:
        url: ``file:///abs/dir``, a path (``str`` or ``os.PathLike``),
            ``memory://name``, ``s3://bucket/prefix``, an already built
            :class:`~kvstore.objstore.base.ObjectStore`, or a URL of a
            registered scheme (``http(s)://``).
        create: create the store if it does not exist (else raise). With
            False nothing is created on a mistyped path, not even a directory.
        **options: :class:`~kvstore.options.StoreOptions` fields, plus backend
            options (``endpoint_url``, ``key``, ``secret``, ``commit_store``, ...)
            passed to :func:`~kvstore.objstore.open_store`; for a registered
            scheme, its opener's options (``token``, ``timeout``, ... for http).

    Raises:
        FileNotFoundError: no store there and ``create`` is false.
        StoreError: ``url`` holds other files but no store (a store is only
            created where there is nothing yet), or an unsupported store.
        TypeError / ValueError: a bad ``url`` or option; ValueError also for
            a scheme no installed package registers (naming what to install).
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if isinstance(url, str):
        scheme = registered_scheme(url)
        if scheme is not None:
            return opener_for(scheme)(url, create=create, **options)
    return open_embedded(url, create, **options)


def open_embedded(
    url: str | os.PathLike[str] | ObjectStore, create: bool = True, **options: Any
) -> Store:
    """Open (or create) an embedded store: :func:`open` for the URLs the engine opens itself.

    For callers that need what only an embedded :class:`Store` offers
    (snapshots, maintenance, time travel, its object store): the result is
    always a :class:`Store`.

    Args:
        url: ``file:///abs/dir``, a path (``str`` or ``os.PathLike``),
            ``memory://name``, ``s3://bucket/prefix``, or an already built
            :class:`~kvstore.objstore.base.ObjectStore`.
        create: as for :func:`open`.
        **options: as for :func:`open`.

    Raises:
        ValueError: ``url`` has another scheme (``http(s)://`` is a ``lakekv
            serve`` server, which :func:`open` returns a client for); and as
            for :func:`open`.
        FileNotFoundError, StoreError, TypeError: as for :func:`open`.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if isinstance(url, str) and (scheme := registered_scheme(url)) is not None:
        raise ValueError(
            f"{url!r} is not an embedded store: the engine opens paths and file://, memory:// and s3:// URLs; "
            f"kvstore.open hands {scheme}:// to the package that registers it (http(s)://: a lakekv serve client)"
        )
    if not isinstance(url, (str, ObjectStore)):
        raise TypeError(f"url must be a str, an os.PathLike or an ObjectStore, not {type(url).__name__}")
    if not isinstance(create, bool):
        raise TypeError(f"create must be a bool, not {type(create).__name__}")
    store_fields = set(StoreOptions.__dataclass_fields__)
    store_opts = {k: v for k, v in options.items() if k in store_fields}
    backend_opts = {k: v for k, v in options.items() if k not in store_fields}
    parsed = StoreOptions.from_kwargs(**store_opts)
    if isinstance(url, str):
        from kvstore.objstore import open_store

        if "fsync" in store_opts:  # a store option that local backends implement
            backend_opts["fsync"] = parsed.fsync
        objects = open_store(url, create=create, **backend_opts)
        # The store built here is the handle's to close (LMDB env, S3 sessions).
        try:
            return Store(objects, parsed, create=create, owns_objects=True)
        except BaseException:
            objects.close()
            raise
    if backend_opts:
        raise ValueError(
            f"unknown store option(s) {sorted(backend_opts)}; known: {', '.join(sorted(store_fields))} "
            "(backend options such as endpoint_url are accepted only with a URL)"
        )
    return Store(url, parsed, create=create)


def _check_batch(batch: object) -> None:
    if not isinstance(batch, WriteBatch):
        raise TypeError(f"batch must be a WriteBatch, not {type(batch).__name__}")
    if not len(batch):
        raise ValueError("batch is empty")


class Store:
    """An open lakekv store. Use :func:`open`; close it (or use ``with``).

    A facade over parts that each own their state: the engine state and
    read path (:mod:`kvstore.state`, :mod:`kvstore.reader`), the committer,
    the follower, the transaction manager (:mod:`kvstore.txn`), the
    housekeeper (flush, compaction, GC: :mod:`kvstore.housekeeping`) and time
    travel (:mod:`kvstore.timetravel`). No part imports this module.

    Reads (``get``, ``get_with_revision``, ``scan``, ``snapshot``, ``begin``)
    are linearizable by default: each sees every commit acknowledged before
    it began, by any process (:mod:`kvstore.freshness`: one mapped integer on
    a local directory, one probe GET on S3). ``consistency="serializable"``
    (per read, or the ``read_consistency`` option) reads this handle's view
    instead, which may be up to ``poll_interval_s`` behind other processes.
    """

    def __init__(
        self, objects: ObjectStore, options: StoreOptions, *, create: bool = True, owns_objects: bool = False
    ) -> None:
        """Use :func:`open`. ``owns_objects``: :meth:`close` also closes ``objects``."""
        self.objects = objects
        self.options = options
        self.writer_id = uuid.uuid4().hex
        self._closed = False
        self._owns_objects = owns_objects
        self._close_lock = threading.Lock()
        beacon = HeadBeacon.for_directory(objects.root) if isinstance(objects, LocalStore) else None
        self._chain = VersionChain(objects, beacon)
        self._cache = BlockCache(options.cache_bytes)
        threaded = options.background_threads
        self._state = EngineState(objects, self._chain, self._cache, options.open_parallelism if threaded else 1)
        # Store.get's whole path in one compiled call (kvstore.reader.StoreGetter).
        self._getter = StoreGetter(self._state, check_key, MAX_KEY_BYTES, self._check_open)
        # Reads hide the keys of ended leases (a keepalive rewrites no key: kvstore.lease_reads).
        self._lease_reads = LeaseReads()
        self._getter.bind_store(self._lease_reads, self._sync)
        # The hottest call, without a Python frame: this handle's ``get`` is
        # the compiled getter's ``read``, which does exactly what Store.get
        # below does (Store.get stays, for the class and the docs; a subclass
        # that overrides it keeps its override).
        if type(self).get is Store.get:
            self.get = self._getter.read  # type: ignore[method-assign]
        self._clock = StorageClock(objects)
        # Seqs pinned by this handle's open snapshots and transactions.
        self.watermark = Watermark()
        latest = self._chain.find_latest()
        if latest is None:
            if not create:
                raise FileNotFoundError(f"no lakekv store at {objects.url}")
            latest = create_store(objects, self._chain, self.writer_id)
        else:
            check_identity(objects)
        self._state.load(latest)
        self._linearizable = options.read_consistency == LINEARIZABLE
        state, chain = self._state, self._chain

        def catch_up_if_moved() -> None:
            # Probe without the chain lock (our committer holds it while
            # publishing: a read need not wait for a commit still in flight).
            # A GET, not a HEAD: s3fs answers a HEAD of a missing key with a
            # HEAD and a LIST (two round trips), a GET with one 404.
            if chain.try_read_root(state.head[0] + 1) is not None:
                state.catch_up(stale_after_s=options.stale_check_s)

        self._barrier = ReadBarrier(lambda: state.head[0], catch_up_if_moved, beacon)
        self._getter.set_barrier(beacon, self._barrier.sync if self._linearizable else None)
        self._hint = HintWriter(objects, options.hint_interval_s, threaded=threaded)
        self._oracle = Oracle()
        self._committer = Committer(
            self._state, options, self.writer_id, self._hint, self._oracle.validate_group, threaded=threaded
        )
        self._txns = OptimisticTransactions(
            self._oracle, self._state, self._committer, self.watermark, options, self._check_open,
            self._barrier.sync if self._linearizable else None,
        )
        # Wakes watches (and subscribers, e.g. a server's watch streams) at each version applied.
        self._signal = VersionSignal()
        self._state.listeners.append(lambda root, rows: self._signal.notify(root))
        self._follower = (
            Follower(self._state, options.poll_interval_s, options.stale_check_s)
            if options.poll_interval_s > 0 and threaded
            else None
        )
        self._housekeeper = Housekeeper(
            self._state, self._committer, self.watermark, options, self._clock, self._check_open,
            reap_leases=lambda: self.reap_leases(),
        )
        self._timetravel = TimeTravel(
            objects, self._state, self._committer, self.watermark, options, self._housekeeper.index, self._check_open
        )
        self._housekeeper.start()

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Finish queued commits, stop background threads, and close the object
        store if :func:`open` built it from a URL. Idempotent."""
        self._housekeeper.stop()  # before the committer closes: a flush may be committing
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._getter.closed = True
        if self._follower is not None:
            self._follower.close()
        self._committer.close()
        self._hint.close(flush=True)
        if self._chain.beacon is not None:
            self._chain.beacon.close()
        if self._owns_objects:
            self.objects.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.objects.url} is closed")

    # -- state ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.objects.url

    @property
    def version(self) -> int:
        """The latest version this handle has seen."""
        return self._state.version

    @property
    def seq(self) -> int:
        """The last seq of :attr:`version`: what a read now sees."""
        return self._state.last_seq

    def storage_now(self) -> float:
        """The current time on the storage's own clock, in seconds since the epoch.

        Comparable with the storage's object timestamps (``ObjectMeta.mtime``,
        ``VersionInfo.timestamp``), whatever the skew of the local clock. Its
        resolution is the storage's (whole seconds on S3 and SeaweedFS, see
        :attr:`storage_clock_resolution`): the value never runs ahead of the
        storage clock and may lag it by up to one resolution step. Measured
        with a probe object (``_clock_probe``: one PUT and one HEAD), then
        derived from the local clock, re-measured every minute. When the
        PUT fails (a full disk), a local directory re-stamps the existing
        probe instead (no new bytes; :mod:`kvstore.clock`).

        Raises:
            StoreClosedError: the store is closed.
            ObjectStoreError: the probe could be neither written nor re-stamped.
        """
        self._check_open()
        return self._clock.now()

    @property
    def storage_clock_resolution(self) -> float:
        """Granularity of the storage's timestamps in seconds (1.0 on S3; 0.001 for finer clocks)."""
        self._check_open()
        return self._clock.resolution

    def refresh(self) -> int:
        """Catch up with versions other writers committed; return the latest version.

        Raises:
            StoreClosedError: the store is closed.
            ObjectStoreError / CorruptionError: reading the chain failed.
        """
        self._check_open()
        self._state.catch_up(stale_after_s=self.options.stale_check_s)
        return self._state.version

    # -- writes --------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl: float | None = None, lease: int | str | None = None) -> int:
        """Durably set ``key`` to ``value``; return the commit's seq.

        Args:
            ttl: seconds until the value expires (reads then see no value);
                positive, at most 100 years.
            lease: a lease id (:meth:`grant_lease`): the key lives as long
                as the lease (excludes ``ttl``).

        Raises:
            TypeError / ValueError: a bad key, value, ttl or lease (nothing is written).
            LeaseNotFoundError: the lease expired or was revoked (nothing is written).
            StoreClosedError: the store is closed.
            CommitError / ObjectStoreError: the commit could not be made durable.
        """
        if lease is not None:
            return self.write(WriteBatch().put(key, value, ttl, lease=lease))
        return self._commit({check_key(key): put_mutation(value, ttl)})

    def grant_lease(self, ttl: float) -> leases.Lease:
        """A new lease of ``ttl`` seconds (etcd's Grant): keys put with ``lease=lease.id`` vanish,
        for every reader, when it expires or is revoked; ``lease.keepalive()`` restarts its ttl.
        See :mod:`kvstore.leases`.

        Raises:
            ValueError: a bad ttl. StoreClosedError: the store is closed.
        """
        self._check_open()
        return leases.grant(self._txns.run_on_newest, ttl)

    def lease(self, lease_id: int | str) -> leases.Lease:
        """A handle on lease ``lease_id``, granted by any process (its ttl as granted).

        Raises:
            TypeError: not a lease id. LeaseNotFoundError: it expired or was revoked.
        """
        self._check_open()
        return leases.attach(self._txns.run_on_newest, check_lease_id(lease_id))

    def leases(self) -> list[leases.Lease]:
        """Every lease alive now, granted by any process (etcd's LeaseLeases).

        Raises:
            StoreClosedError: the store is closed.
        """
        self._check_open()
        return leases.every(self._txns.run_on_newest)

    def reap_leases(self) -> list[int | str]:
        """Revoke every lease whose deadline has passed, one delete commit each (as etcd's lessor),
        so watchers see its keys' "delete" events; the ids revoked. Reads hide those keys already;
        background maintenance (and ``lakekv serve``) calls this every ``maintenance_interval_s``.
        """
        self._check_open()
        state = self._state
        if not self._lease_reads.active(state.layers, state.head[1]):
            return []  # no lease record in the view: nothing to read or revoke
        return leases.reap(self._txns.run_on_newest)

    def delete(self, key: bytes) -> int:
        """Durably delete ``key``; return the commit's seq.

        Raises:
            TypeError / ValueError: a bad key. StoreClosedError, CommitError,
            ObjectStoreError: as for :meth:`put`.
        """
        return self._commit({check_key(key): DELETE_MUTATION})

    def write(self, batch: WriteBatch, summary: dict[str, Any] | None = None) -> int:
        """Apply every operation of ``batch`` atomically (one seq); return that seq.

        Args:
            batch: the operations.
            summary: a JSON-serialisable dict (at most 64 KiB encoded) stored
                with the commit in its root file; ``history()`` returns it.

        Raises:
            TypeError / ValueError: not a WriteBatch, an empty batch, or a bad summary.
            StoreClosedError / CommitError / ObjectStoreError: the commit failed.
        """
        _check_batch(batch)
        descriptor: dict[str, Any] = {"op": "write", "keys": len(batch)}
        if summary is not None:
            descriptor["summary"] = check_summary(summary)
        if batch.conditions or batch.leases:
            self._check_open()
            return cas.write(self._txns.run_on_newest, batch, descriptor.get("summary"))
        return self._commit(dict(batch.mutations), descriptor)

    def submit_write(self, batch: WriteBatch) -> Future[int] | None:
        """Start :meth:`write` of ``batch`` without blocking: a Future of its seq,
        completed by the committer thread (join it from an event loop with
        ``asyncio.wrap_future``). None when this handle cannot (no background
        threads, or a batch with compares or leases, which runs a transaction):
        call :meth:`write` then.

        Raises:
            TypeError / ValueError: as :meth:`write`. StoreClosedError: the store is closed.
        """
        _check_batch(batch)
        self._check_open()
        if batch.conditions or batch.leases:
            return None
        future: Future[int] = Future()

        def settle(pending: PendingCommit) -> None:
            if pending.error is not None:
                future.set_exception(pending.error)
            else:
                future.set_result(pending.seq)

        pending = PendingCommit(dict(batch.mutations), {"op": "write", "keys": len(batch)}, on_finished=settle)
        return future if self._committer.submit_nowait(pending) else None

    def _commit(self, mutations: dict[bytes, Mutation], descriptor: dict[str, Any] | None = None) -> int:
        self._check_open()
        pending = PendingCommit(mutations, descriptor or {"op": "write", "keys": len(mutations)})
        return self._committer.submit(pending).seq

    # -- reads ---------------------------------------------------------------

    def get(self, key: bytes, consistency: str | None = None) -> bytes | None:
        """The value of ``key``, or None.

        Args:
            consistency: ``"linearizable"`` (every commit acknowledged before
                the call, by any process, is seen) or ``"serializable"`` (this
                handle's view: its own commits, and other processes' up to
                ``poll_interval_s`` late); None: the ``read_consistency`` option.

        Raises:
            TypeError / ValueError: a bad key or consistency.
            StoreClosedError: the store is closed.
            CorruptionError / ObjectStoreError: an SST or root file could not be read.
        """
        # A closed store is refused by the getter, which also runs the default
        # consistency's barrier and the lease filter (StoreGetter.read).
        return self._getter.read(key, consistency)

    def reads_without_waiting(self) -> bool:
        """True when a linearizable read now would need no storage request and no lock:
        the handle's view is known to be current (a local directory whose head
        beacon has not moved) and its data is in memory or local files. A
        server uses it to answer such reads on its event loop, without a
        thread hop.
        """
        return not self._closed and self._barrier.is_current()  # current only with a local directory's beacon

    def _sync(self, consistency: str | None = None) -> None:
        """Bring the view up to date when the read is linearizable (see :meth:`get`)."""
        self._check_open()
        if consistency is None:
            if self._linearizable:
                self._barrier.sync()
        elif check_consistency(consistency) == LINEARIZABLE:
            self._barrier.sync()

    def get_with_revision(self, key: bytes, consistency: str | None = None) -> tuple[bytes | None, int | None]:
        """``(value, revision)`` of ``key``: the revision is the seq of the commit that
        wrote the value, for ``WriteBatch.put(..., if_seq=revision)``; ``(None, None)``
        when the key has no value (never written, deleted or expired).
        ``consistency`` as for :meth:`get`.

        Raises:
            TypeError / ValueError: a bad key or consistency. StoreClosedError: the store is closed.
        """
        key = check_key(key)
        self._sync(consistency)
        seq = self._state.head[1]  # head first: the layers read after it hold every row up to seq
        layers = self._state.layers
        row = get_row(layers, key, seq)
        value = visible_value(row)
        if value is None or row is None or not self._lease_reads.shows(row[4], layers, seq):
            return None, None
        return value, int(row[1])

    def watch(
        self, prefix: bytes = b"", start: int | None = None, end: int | None = None, poll_interval_s: float = 0.05,
        *, start_revision: int | None = None,
    ) -> Watch:
        """Changes of the keys under ``prefix`` as they are committed, by any process: a :class:`~kvstore.watch.Watch`.

        Args:
            prefix: only keys starting with it (b"": every key).
            start: replay from retained version ``start`` (its changes
                included) before following new ones; None: only commits
                after the current version.
            end: stop after version ``end``; None: until ``close()``.
            poll_interval_s: how often a caught-up watch probes for the next
                version (one HEAD request on S3).
            start_revision: instead of ``start``: replay every change with
                a revision (commit seq) at or above this one, as etcd's watch
                does; a revision not yet committed follows from there.

        Raises:
            TypeError / ValueError: a bad argument.
            SnapshotTooOldError: the start is below the compaction floor (:meth:`compact_revisions`);
                (while iterating) ``start`` is no longer retained.
        """
        self._check_open()
        check_watch_args(prefix, start, end)
        if isinstance(poll_interval_s, bool) or not isinstance(poll_interval_s, (int, float)) or not poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be a positive number of seconds, not {poll_interval_s!r}")
        min_seq = next_revision = 0
        if start_revision is not None:
            if start is not None:
                raise TypeError("give start= (a version) or start_revision=, not both")
            self.refresh()
            start = self._timetravel.version_of_revision(start_revision)
            min_seq = start_revision
        live: list[Row] = []
        if start is None:
            head = self.refresh()
            start = head + 1
            next_revision = self._state.last_seq + 1
            low, high = prefix_bounds(prefix)
            live = [row for row in scan_rows(self._state.layers, self._state.head[1], low or None, high)
                    if row[4] is not None]  # live keys with a TTL: the watch reports their expiry
        elif start_revision is None:
            next_revision = self._timetravel.first_revision_of(start)
            # A version whose changes lie below the compaction floor is compacted, as a revision is.
            if next_revision:
                revisions.check_not_compacted(self.objects, next_revision)
        return Watch(self._chain, self._state.rows_of, lambda: self._state.version, prefix, start, end,
                     float(poll_interval_s), live, self._signal, min_seq=min_seq,
                     next_revision=next_revision)

    def compacted_revision(self) -> int:
        """The compaction floor: reads and watches below this revision are refused (0: none). See :mod:`kvstore.revisions`."""
        self._check_open()
        return revisions.compacted_revision(self.objects)

    def compact_revisions(self, revision: int) -> int:
        """Raise the compaction floor to ``revision`` (etcd's Compact); return it. See :mod:`kvstore.revisions`.

        Raises:
            TypeError / ValueError: not an int, or a revision that does not exist yet.
            SnapshotTooOldError: the floor is already at or above ``revision``.
        """
        self._check_open()
        if isinstance(revision, int) and revision > self._state.last_seq:
            self.refresh()
        return revisions.compact_revisions(self.objects, revision, self._state.last_seq)

    def subscribe(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(version)`` whenever this handle applies a version (its own
        commit, or other processes' commits as it catches up); returns a function
        that unsubscribes. The callback runs in the applying thread: keep it short
        and non-blocking (e.g. ``loop.call_soon_threadsafe``).

        Raises:
            TypeError: ``callback`` is not callable. StoreClosedError: the store is closed.
        """
        self._check_open()
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        return self._signal.subscribe(callback)

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        consistency: str | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for live keys in ``[start, end)`` (and with ``prefix``).

        Reads one view, fixed when the call is made; ``consistency`` as for :meth:`get`.

        Raises:
            TypeError / ValueError: bad bounds, limit or consistency.
            StoreClosedError: the store is closed.
        """
        self._sync(consistency)
        # An unpinned view, as _view() makes, without building the Snapshot object.
        seq = self._state.head[1]
        layers = self._state.layers
        if self._lease_reads.active(layers, seq):
            pairs = scan_view(layers, seq, start, end, prefix, reverse, None)
            return self._lease_reads.pairs(pairs, layers, seq, check_limit(limit))
        return scan_view(layers, seq, start, end, prefix, reverse, limit)

    def scan_with_revision(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        consistency: str | None = None,
    ) -> Iterator[tuple[bytes, bytes, int]]:
        """Like :meth:`scan`, yielding ``(key, value, revision)`` (the revision as
        :meth:`get_with_revision` gives it). Read at an older revision with
        ``at(revision=...).scan_with_revision(...)``.

        Raises:
            TypeError / ValueError: bad bounds, limit or consistency.
            StoreClosedError: the store is closed.
        """
        self._sync(consistency)
        seq = self._state.head[1]
        layers = self._state.layers
        if self._lease_reads.active(layers, seq):
            triples = scan_revision_view(layers, seq, start, end, prefix, reverse, None)
            return self._lease_reads.pairs(triples, layers, seq, check_limit(limit))
        return scan_revision_view(layers, seq, start, end, prefix, reverse, limit)

    def scan_batches(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        batch_rows: int = 4096,
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`scan` (forward) but yields Arrow batches with columns key, value."""
        self._sync()
        seq = self._state.head[1]
        layers = self._state.layers
        batches = scan_view_batches(layers, seq, start, end, prefix, batch_rows)
        return self._lease_reads.batches(batches, layers, seq) if self._lease_reads.active(layers, seq) else batches

    def snapshot(self, fresh: bool | None = None) -> Snapshot:
        """A read-only view at the current version.

        Args:
            fresh: True: catch up with other processes first; False: this
                handle's view; None: as the ``read_consistency`` option says
                (linearizable by default, see :meth:`get`).
        """
        self._check_open()
        if fresh:
            self._state.catch_up()
        elif fresh is None:
            self._sync()
        return self._view(pin=True)

    def _view(self, pin: bool = False) -> Snapshot:
        # An unpinned view serves one-shot reads such as Store.scan: nobody
        # would close it, so it must not hold back retention.
        # Lock-free: ``head`` first, then ``layers``, which are never older
        # than the head (apply_root installs layers before moving the head).
        version, seq = self._state.head
        return Snapshot(
            version, seq, self._state.layers, check_open=self._check_open, watermark=self.watermark if pin else None,
            lease_reads=self._lease_reads,
        )

    def stats(self) -> dict[str, Any]:
        """This handle's figures, for monitoring and tests (a snapshot; nothing is kept live).

        Keys: ``version`` and ``seq`` (the head this handle has seen);
        ``memtable_keys`` and ``memtable_rows`` (unflushed data);
        ``tree`` (the tree manifest's path, None before the first flush),
        ``flushed_upto`` and ``flushed_seq`` (versions up to this one, seqs
        up to that one, are in SSTs),
        ``floor_seq`` (the retention floor the tree was built at),
        ``l0_files`` and ``sorted_runs`` (the LSM shape: compaction keeps
        both small); ``running_transactions`` (this handle's open optimistic
        transactions), ``key_locks`` (keys locked by ``get_for_update``) and
        ``key_lock_waiters`` (transactions queued for one of those locks);
        ``groups_committed``, ``races_lost`` (commit attempts that lost the
        version race to another writer), ``hint_writes`` and ``cache``.
        """
        state = self._state
        tree = state.tree
        return {
            "version": state.version,
            "seq": state.last_seq,
            "memtable_keys": len(state.layers.memtable),
            "memtable_rows": state.layers.memtable.row_count,
            "tree": state.tree_path,
            "flushed_upto": tree.flushed_upto,
            "flushed_seq": tree.flushed_seq,
            "floor_seq": tree.floor_seq,
            "l0_files": len(tree.l0),
            "sorted_runs": len(tree.runs),
            "running_transactions": self._txns.running_count(),
            "key_locks": self._txns.key_lock_count(),
            "key_lock_waiters": self._txns.key_lock_waiter_count(),
            "groups_committed": self._committer.groups_committed,
            "races_lost": self._committer.races_lost,
            "hint_writes": self._hint.writes,
            "cache": self._cache.stats(),
        }

    # -- transactions (kvstore.txn.OptimisticTransactions) ---------------------------

    def begin(self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None) -> Transaction:
        return self._txns.begin(isolation, ttl, fresh)

    def transaction(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> AbstractContextManager[Transaction]:
        return self._txns.transaction(isolation, ttl, fresh)

    def run(
        self, fn: Callable[[Transaction], T], isolation: str = SERIALIZABLE, retries: int = 10, ttl: float | None = None
    ) -> T:
        return self._txns.run(fn, isolation, retries, ttl)

    # -- flush, compaction, GC (kvstore.housekeeping.Housekeeper) ------------------

    def flush(self) -> FlushResult | None:
        return self._housekeeper.flush()

    def compact(self, full: bool = False) -> list[CompactionResult]:
        return self._housekeeper.compact(full)

    def gc(self, dry_run: bool = False) -> GCReport:
        return self._housekeeper.gc(dry_run)

    def retention_floor(self) -> RetentionFloor:
        return self._housekeeper.retention_floor()

    def maintenance_stats(self) -> dict[str, Any]:
        return self._housekeeper.maintenance_stats()

    # -- past versions (kvstore.timetravel.TimeTravel) -----------------------------

    def at(
        self,
        version: int | None = None,
        *,
        timestamp: float | datetime | None = None,
        checkpoint: str | None = None,
        revision: int | None = None,
    ) -> Snapshot:
        return self._timetravel.at(version, timestamp=timestamp, checkpoint=checkpoint, revision=revision)

    def history(self, limit: int | None = 20, start: int | None = None) -> list[VersionInfo]:
        return self._timetravel.history(limit, start)

    def checkpoint(self, name: str, ttl: float | None = None) -> Checkpoint:
        return self._timetravel.checkpoint(name, ttl)

    def checkpoints(self) -> list[Checkpoint]:
        return self._timetravel.checkpoints()

    def remove_checkpoint(self, name: str) -> None:
        self._timetravel.remove_checkpoint(name)

    def export(
        self, dest_url: str | ObjectStore, version: int | None = None, *, progress: bool = False, **dest_options: Any
    ) -> ExportReport:
        return self._timetravel.export(dest_url, version, progress=progress, **dest_options)

    def verify(self) -> VerifyReport:
        """Read every live file and check checksums and references (see :mod:`kvstore.verify`).

        Raises:
            StoreClosedError: the store is closed.
        """
        self._check_open()
        return verify_store(self.objects, parallelism=self.options.open_parallelism)


# The delegating methods above carry their part's documentation: one text,
# where the behaviour is implemented.
for _name, _part in (
    *((name, OptimisticTransactions) for name in ("begin", "transaction", "run")),
    *((name, Housekeeper) for name in ("flush", "compact", "gc", "retention_floor", "maintenance_stats")),
    *((name, TimeTravel) for name in ("at", "history", "checkpoint", "checkpoints", "remove_checkpoint", "export")),
):
    getattr(Store, _name).__doc__ = getattr(_part, _name).__doc__
del _name, _part
