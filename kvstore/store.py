"""The Store facade: opens a store and wires state, committer, follower and
read path together. No algorithms live here.

Thread-safety: a Store may be shared by any number of threads.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from typing import Any, Iterator

import pyarrow as pa

from kvstore.batch import WriteBatch, check_key, check_value, check_limit, expiry_from_ttl, scan_bounds
from kvstore.cache import BlockCache
from kvstore.chain import HintWriter, VersionChain, encode_for_publish
from kvstore.committer import Committer, PendingCommit
from kvstore.errors import StoreClosedError, StoreError
from kvstore.follower import Follower
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

IDENTITY_PATH = "_lakekv_store"
STORE_FORMAT = 1


def open(url: str | ObjectStore, create: bool = True, **options: Any) -> Store:  # noqa: A001 - public API name
    """Open (or create) the store at ``url``.

    Args:
        url: ``file:///abs/dir``, a path, ``memory://name``, ``s3://bucket/prefix``,
            or an already built :class:`~kvstore.objstore.base.ObjectStore`.
        create: create the store if it does not exist (else raise).
        **options: :class:`~kvstore.options.StoreOptions` fields, plus backend
            options (``endpoint_url``, ``key``, ``secret``, ``commit_store``, ...)
            passed to :func:`~kvstore.objstore.open_store`.

    Raises:
        FileNotFoundError: no store there and ``create`` is false.
        TypeError / ValueError: a bad option.
    """
    store_fields = set(StoreOptions.__dataclass_fields__)
    store_opts = {k: v for k, v in options.items() if k in store_fields}
    backend_opts = {k: v for k, v in options.items() if k not in store_fields}
    parsed = StoreOptions.from_kwargs(**store_opts)
    if isinstance(url, str):
        from kvstore.objstore import open_store

        if "fsync" in store_opts:
            backend_opts["fsync"] = parsed.fsync
        objects = open_store(url, **backend_opts)
    elif backend_opts:
        raise ValueError(
            f"unknown store option(s) {sorted(backend_opts)}; known: {', '.join(sorted(store_fields))} "
            "(backend options such as endpoint_url are accepted only with a URL)"
        )
    else:
        objects = url
    return Store(objects, parsed, create=create)


class Store(TransactionMixin, MaintenanceMixin):
    """An open lakekv store. Use :func:`open`; close it (or use ``with``)."""

    def __init__(self, objects: ObjectStore, options: StoreOptions, *, create: bool = True) -> None:
        self.objects = objects
        self.options = options
        self.writer_id = uuid.uuid4().hex
        self._closed = False
        self._close_lock = threading.Lock()
        self._chain = VersionChain(objects)
        self._cache = BlockCache(options.cache_bytes)
        self._state = EngineState(objects, self._chain, self._cache, options.open_parallelism)
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
        self._hint = HintWriter(objects, options.hint_interval_s)
        self._oracle = Oracle()
        self._state.listeners.append(self._oracle.record_version)
        self._committer = Committer(self._state, options, self.writer_id, self._hint, self._oracle.validate_group)
        self._state.reload_listeners.append(self._oracle.set_horizon)
        self._follower = (
            Follower(self._state, options.poll_interval_s, options.stale_check_s) if options.poll_interval_s > 0 else None
        )
        self._start_maintenance()  # flush/compaction threads (kvstore.maintenance)

    # -- lifecycle -------------------------------------------------------------

    def _create(self) -> int:
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
        if identity.get("format") != STORE_FORMAT:
            raise StoreError(f"{self.objects.url}: unsupported store format {identity.get('format')!r}")

    def close(self) -> None:
        """Finish queued commits, stop background threads. Idempotent."""
        self._stop_maintenance()  # before the committer closes: a flush may be committing
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._follower is not None:
            self._follower.close()
        self._committer.close()
        self._hint.close(flush=True)

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

    def write(self, batch: WriteBatch) -> int:
        """Apply every operation of ``batch`` atomically (one seq); return that seq."""
        if not isinstance(batch, WriteBatch):
            raise TypeError(f"batch must be a WriteBatch, not {type(batch).__name__}")
        if not len(batch):
            raise ValueError("batch is empty")
        return self._commit(dict(batch.mutations))

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
            if self._pinned:
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
