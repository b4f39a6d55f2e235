"""The Store facade: opens a store and wires state, committer, follower and
read path together. No algorithms live here.

Thread-safety: a Store may be shared by any number of threads.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
import uuid
import weakref
from typing import Any, Iterator

import pyarrow as pa

from kvstore.batch import WriteBatch, check_key, check_limit, check_summary, check_value, expiry_from_ttl, scan_bounds
from kvstore.cache import BlockCache
from kvstore.chain import HintWriter, VersionChain, encode_for_publish
from kvstore.clock import StorageClock
from kvstore.committer import Committer, PendingCommit
from kvstore.errors import StoreClosedError, StoreError
from kvstore.follower import Follower
from kvstore.format.names import IDENTITY_PATH, STORE_FORMAT, SUPPORTED_STORE_FORMATS, is_engine_name
from kvstore.format.root import RootFile
from kvstore.format.rows import DELETE, PUT, Row, rows_to_batch
from kvstore.maintenance import MaintenanceMixin
from kvstore.objstore.base import ObjectStore
from kvstore.options import StoreOptions
from kvstore.iterators.arrow_scan import scan_kv_batches, scan_kv_pairs
from kvstore.reader import get_row, get_value, now_ms, scan_rows
from kvstore.state import EngineState, Layers
from kvstore.txn import TransactionMixin
from kvstore.watermark import Watermark
from kvstore.oracle import Oracle



log = logging.getLogger(__name__)


def open(  # noqa: A001 - public API name
    url: str | os.PathLike[str] | ObjectStore, create: bool = True, **options: Any
) -> Store:
    """Open (or create) the store at ``url``.

    Args:
        url: ``file:///abs/dir``, a path (``str`` or ``os.PathLike``),
            ``memory://name``, ``s3://bucket/prefix``, or an already built
            :class:`~kvstore.objstore.base.ObjectStore`.
            ``http(s)://host:port`` (a ``lakekv serve`` server) gives a :class:`~kvstore.remote.RemoteStore`.
        create: create the store if it does not exist (else raise). With
            False nothing is created on a mistyped path, not even a directory.
        **options: :class:`~kvstore.options.StoreOptions` fields, plus backend
            options (``endpoint_url``, ``key``, ``secret``, ``commit_store``, ...)
            passed to :func:`~kvstore.objstore.open_store`.

    Raises:
        FileNotFoundError: no store there and ``create`` is false.
        StoreError: ``url`` holds other files but no store (a store is only
            created where there is nothing yet), or an unsupported store.
        TypeError / ValueError: a bad ``url`` or option.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        from kvstore.remote import RemoteStore  # a `lakekv serve` server: same API over HTTP

        return RemoteStore(url, **options)  # type: ignore[return-value]
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


class Store(TransactionMixin, MaintenanceMixin):
    """An open lakekv store. Use :func:`open`; close it (or use ``with``)."""

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
        self._chain = VersionChain(objects)
        self._cache = BlockCache(options.cache_bytes)
        threaded = options.background_threads
        self._state = EngineState(objects, self._chain, self._cache, options.open_parallelism if threaded else 1)
        self._clock = StorageClock(objects)
        # Seqs pinned by this handle's open snapshots and transactions.
        self.watermark = Watermark()
        latest = self._chain.find_latest()
        if latest is None:
            if not create:
                raise FileNotFoundError(f"no lakekv store at {objects.url}")
            latest = self._create()
        else:
            self._check_identity()
        self._state.load(latest)
        self._hint = HintWriter(objects, options.hint_interval_s, threaded=threaded)
        self._oracle = Oracle()
        self._state.listeners.append(self._oracle.record_version)
        self._committer = Committer(
            self._state, options, self.writer_id, self._hint, self._oracle.validate_group, threaded=threaded
        )
        self._state.reload_listeners.append(self._oracle.set_horizon)
        self._follower = (
            Follower(self._state, options.poll_interval_s, options.stale_check_s)
            if options.poll_interval_s > 0 and threaded
            else None
        )
        self._start_maintenance()  # flush/compaction threads (kvstore.maintenance)

    # -- lifecycle -------------------------------------------------------------

    def _create(self) -> int:
        # Never turn someone's directory (or bucket prefix) into a store: GC
        # and export would then treat it as ours. Engine names are fine: a
        # concurrent creator may be half-way through.
        foreign = next((meta.path for meta in self.objects.list("") if not is_engine_name(meta.path)), None)
        if foreign is not None:
            raise StoreError(
                f"{self.objects.url} is not empty and holds no lakekv store (found {foreign!r}); "
                "refusing to create a store there: use an empty directory or prefix"
            )
        created_ms = int(time.time() * 1000)
        identity = {"format": STORE_FORMAT, "store_id": uuid.uuid4().hex, "created_ms": created_ms}
        self.objects.put_if_absent(IDENTITY_PATH, json.dumps(identity).encode())
        self._check_identity()
        genesis = RootFile(
            version=0, parent=None, first_seq=1, last_seq=0, writer_id=self.writer_id,
            writer_clock_ms=created_ms, commit_id=uuid.uuid4().hex, tree=None,
            flushed_upto=0, delta=rows_to_batch([]),
        )
        self._chain.publish(encode_for_publish(genesis), 0)  # a concurrent creator may win: fine
        return 0

    def _check_identity(self) -> None:
        try:
            identity = json.loads(self.objects.get(IDENTITY_PATH))
        except FileNotFoundError:
            raise StoreError(f"{self.objects.url} has root files but no {IDENTITY_PATH}: not a lakekv store") from None
        except ValueError as exc:
            raise StoreError(f"{self.objects.url}/{IDENTITY_PATH} is not valid JSON") from exc
        if not isinstance(identity, dict) or identity.get("format") not in SUPPORTED_STORE_FORMATS:
            found = identity.get("format") if isinstance(identity, dict) else identity
            raise StoreError(f"{self.objects.url}: unsupported store format {found!r}")
        if identity["format"] != STORE_FORMAT:
            # This handle writes root format 2: mark the store so that older
            # versions refuse it cleanly (see names.STORE_FORMAT).
            log.info("%s: upgrading store format %s -> %s", self.objects.url, identity["format"], STORE_FORMAT)
            self.objects.put(IDENTITY_PATH, json.dumps(dict(identity, format=STORE_FORMAT)).encode())

    def close(self) -> None:
        """Finish queued commits, stop background threads, and close the object
        store if :func:`open` built it from a URL. Idempotent."""
        self._stop_maintenance()  # before the committer closes: a flush may be committing
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._follower is not None:
            self._follower.close()
        self._committer.close()
        self._hint.close(flush=True)
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
        derived from the local clock, re-measured every minute.

        Raises:
            StoreClosedError: the store is closed.
            ObjectStoreError: the probe failed.
        """
        self._check_open()
        return self._clock.now()

    @property
    def storage_clock_resolution(self) -> float:
        """Granularity of the storage's timestamps in seconds (1.0 on S3; 0.001 for finer clocks)."""
        self._check_open()
        return self._clock.resolution

    def refresh(self) -> int:
        """Catch up with versions other writers committed; return the latest version."""
        self._check_open()
        self._state.catch_up(stale_after_s=self.options.stale_check_s)
        return self._state.version

    # -- writes --------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> int:
        """Durably set ``key`` to ``value``; return the commit's seq.

        Args:
            ttl: seconds until the value expires (reads then see no value).
        """
        mutation = (PUT, check_value(value), expiry_from_ttl(ttl))
        return self._commit({check_key(key): mutation})

    def delete(self, key: bytes) -> int:
        """Durably delete ``key``; return the commit's seq."""
        return self._commit({check_key(key): (DELETE, None, None)})

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
        if not isinstance(batch, WriteBatch):
            raise TypeError(f"batch must be a WriteBatch, not {type(batch).__name__}")
        if not len(batch):
            raise ValueError("batch is empty")
        descriptor: dict[str, Any] = {"op": "write", "keys": len(batch)}
        if summary is not None:
            descriptor["summary"] = check_summary(summary)
        return self._commit(dict(batch.mutations), descriptor)

    def _commit(self, mutations: dict, descriptor: dict | None = None) -> int:
        self._check_open()
        pending = PendingCommit(mutations, descriptor or {"op": "write", "keys": len(mutations)})
        return self._committer.submit(pending).seq

    # -- reads ---------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The current value of ``key``, or None."""
        self._check_open()
        state = self._state
        return get_value(state.layers, check_key(key), state.last_seq)  # type: ignore[no-any-return]

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for live keys in ``[start, end)`` (and with ``prefix``)."""
        self._check_open()
        return self._view().scan(start, end, prefix, reverse, limit)

    def scan_batches(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        batch_rows: int = 4096,
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`scan` (forward) but yields Arrow batches with columns key, value."""
        self._check_open()
        return self._view().scan_batches(start, end, prefix, batch_rows)

    def snapshot(self, fresh: bool = False) -> Snapshot:
        """A read-only view at the current version (``fresh``: catch up first)."""
        self._check_open()
        if fresh:
            self._state.catch_up()
        return self._view(pin=True)

    def _view(self, pin: bool = False) -> Snapshot:
        # An unpinned view serves one-shot reads such as Store.scan: nobody
        # would close it, so it must not hold back retention.
        # Lock-free: ``head`` first, then ``layers``, which are never older
        # than the head (apply_root installs layers before moving the head).
        version, seq = self._state.head
        return Snapshot(self, version, seq, self._state.layers, pin=pin)

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring and tests."""
        return {
            "version": self._state.version,
            "seq": self._state.last_seq,
            "memtable_keys": len(self._state.layers.memtable),
            "memtable_rows": self._state.layers.memtable.row_count,
            "groups_committed": self._committer.groups_committed,
            "races_lost": self._committer.races_lost,
            "hint_writes": self._hint.writes,
            "cache": self._cache.stats(),
        }


class Snapshot:
    """A consistent read-only view of the store at one ``(version, seq)``.

    Cheap to create; reads never block writers. Use as a context manager or
    call :meth:`close` when done: while open, a snapshot pins its seq in the
    store's watermark so retention keeps what it can see.
    """

    def __init__(self, store: Store, version: int, seq: int, layers: Layers, *, pin: bool = False) -> None:
        self._store = store
        self.version = version
        self.seq = seq
        self._layers = layers
        self._closed = False
        self._pinned = pin
        if pin:
            store.watermark.pin(seq)
            # Dropped without close(): release the pin when garbage-collected.
            self._release = weakref.finalize(self, store.watermark.release_later, seq)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("snapshot is closed")
        self._store._check_open()

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` at this snapshot, or None."""
        self._check_open()
        return get_value(self._layers, check_key(key), self.seq)  # type: ignore[no-any-return]

    def get_row(self, key: bytes) -> Row | None:
        """The raw newest row of ``key`` at this snapshot (DELETEs and expired rows included)."""
        self._check_open()
        return get_row(self._layers, check_key(key), self.seq)

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for live keys in ``[start, end)`` and ``prefix``, in key order."""
        self._check_open()
        lo, hi = scan_bounds(start, end, prefix)
        check_limit(limit)
        if reverse:
            return _kv_pairs(scan_rows(self._layers, self.seq, lo, hi, True), limit)
        # Forward scans merge cached blocks in place (kvstore.iterators.arrow_scan).
        pairs = scan_kv_pairs(self._layers, self.seq, lo, hi, now_ms(), 256 if limit is None else min(limit, 4096))
        return pairs if limit is None else itertools.islice(pairs, limit)

    def scan_batches(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        batch_rows: int = 4096,
    ) -> Iterator[pa.RecordBatch]:
        """Forward scan as Arrow record batches (columns ``key``, ``value``)."""
        self._check_open()
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")
        lo, hi = scan_bounds(start, end, prefix)
        return scan_kv_batches(self._layers, self.seq, lo, hi, batch_rows, now_ms())

    def close(self) -> None:
        """Release the snapshot (and its pin). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._pinned and self._release.detach() is not None:
                self._store.watermark.unpin(self.seq)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kv_pairs(rows: Iterator[Row], limit: int | None) -> Iterator[tuple[bytes, bytes]]:
    if limit is None:
        for row in rows:
            yield row[0], row[3]  # type: ignore[misc]
        return
    for count, row in enumerate(rows):
        if count >= limit:
            return
        yield row[0], row[3]  # type: ignore[misc]
