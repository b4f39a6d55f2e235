"""lakekv under test: the same public API an application uses.

Configurations: a local directory with fsync (the durable default, compared
with LMDB, RocksDB and SQLite), a local directory without fsync (compared with
SlateDB, whose local object store never fsyncs) and an S3 prefix (W7).
Background maintenance (flush, compaction) stays on: it is part of the engine.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kvstore
from kvstore.errors import ConflictError
from kvstore.options import StoreOptions

from harness.engine import FSYNC, OS_BUFFERED, S3_PUT, Engine, ScanFn, counter_value


class LakeKV(Engine):
    """A lakekv store on a local directory or (with ``s3``) an S3 prefix.

    Args:
        fsync: fsync objects and directories on local stores.
        cache_bytes: block cache budget (the same budget every engine gets);
            None: lakekv's default (``StoreOptions.cache_bytes``).
        s3: ``(bucket URL, open options)`` of an S3 server; every ``open``
            then uses a fresh prefix under it instead of the local path.
    """

    family = "lakekv"
    has_transactions = True

    def __init__(self, *, fsync: bool = True, cache_bytes: int | None, s3: tuple[str, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.fsync = fsync
        self.cache_bytes = cache_bytes
        self.s3 = s3
        if s3 is not None:
            self.key, self.label, self.durability = "lakekv-s3", "lakekv (S3)", S3_PUT
        elif fsync:
            self.key, self.label, self.durability = "lakekv", "lakekv", FSYNC
        else:
            self.key, self.label, self.durability = "lakekv-nofsync", "lakekv (no fsync)", OS_BUFFERED
        self._db: kvstore.Store | None = None

    def settings(self) -> dict[str, Any]:
        # Parse the options exactly as kvstore.open will, so the record shows
        # the defaults this checkout really used, not what we believe they are.
        options = StoreOptions.from_kwargs(fsync=self.fsync, poll_interval_s=0, **self._cache_option())
        return {
            "backend": "s3 (SeaweedFS)" if self.s3 else "local directory",
            "flush_available": hasattr(kvstore.Store, "flush"),
            "options": asdict(options),
        }

    @property
    def db(self) -> kvstore.Store:
        if self._db is None:
            raise RuntimeError(f"{self.label}: used before open()")
        return self._db

    def open(self, path: Path) -> None:
        self.path = path
        options: dict[str, Any] = {"poll_interval_s": 0, **self._cache_option()}
        if self.s3 is not None:
            base_url, backend = self.s3
            self._db = kvstore.open(f"{base_url}/lakekv-{uuid.uuid4().hex[:12]}", **options, **backend)
        else:
            self._db = kvstore.open(str(path), fsync=self.fsync, **options)

    def _cache_option(self) -> dict[str, Any]:
        return {} if self.cache_bytes is None else {"cache_bytes": self.cache_bytes}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def settle(self) -> str:
        # Until Store.flush exists every row stays in the memtable, and the
        # read workloads measure memtable reads; the report says which.
        if not hasattr(self.db, "flush"):
            return "no Store.flush in this build: data stays in the memtable"
        self.db.flush()
        done = "flush() to L0 SSTs"
        if hasattr(self.db, "compact"):
            # RocksDB's settle flushes and then waits for the compactions its
            # own policy schedules (it leaves its L0 files when there are fewer
            # than its trigger); the equivalent here is the compactions
            # lakekv's policy schedules now. A full merge would be work RocksDB
            # is not asked to do, and would count every byte a third time.
            compactions = self.db.compact()
            done += f", then compact() ran the {len(compactions)} compaction(s) the policy scheduled"
        stats = self.db.stats()
        layers = getattr(self.db, "_state", None)
        shape = ""
        if layers is not None:
            layers = layers.layers
            shape = f"; L0 SSTs: {len(layers.l0)}, sorted runs: {len(layers.runs)}"
        return f"{done}; memtable keys after: {stats['memtable_keys']}{shape}"

    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)

    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        # put_many is lakekv's bulk form, as putmulti is LMDB's and
        # executemany SQLite's in their adapters.
        self.db.write(kvstore.WriteBatch().put_many(items))

    def get(self, key: bytes) -> bytes | None:
        # ``self._db``, not the checked ``db`` property: the same one-frame
        # shape as the RocksDB adapter's get (the property cost ~0.3 µs a get).
        return self._db.get(key)  # type: ignore[union-attr]

    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        rows = 0
        for _key, _value in self.db.scan(start=start, end=end, limit=limit):
            rows += 1
        return rows

    def scan_arrow(self, start: bytes, end: bytes, limit: int) -> int:
        """The batch form: Arrow record batches, no per-row Python objects."""
        rows = 0
        for batch in self.db.scan_batches(start=start, end=end, batch_rows=limit):
            rows += batch.num_rows
        return rows

    def scan_forms(self) -> dict[str, ScanFn]:
        return {"rows": self.scan, "arrow batches": self.scan_arrow}

    def rmw(self, key: bytes) -> bool:
        txn = self.db.begin("serializable")
        txn.put(key, counter_value(txn.get_for_update(key)))
        try:
            txn.commit()
        except ConflictError:
            return False
        return True
