"""SlateDB through its own Python binding (``slatedb.uniffi``, asynchronous).

Durability: a write returns a handle whose ``await_durable()`` resolves once
the WAL segment holding it is written to the object store; WAL segments are
written every ``flush_interval`` (SlateDB's default is 100 ms). Every write
here awaits durability, so ``flush_interval`` is the floor of its commit
latency; the harness sets it to a value that suits durable commits and
states it in the report.

On a local directory SlateDB uses the ``object_store`` crate's
``LocalFileSystem``, which writes and links files but never calls fsync
(verified with ``strace -f -c -e trace=fsync,fdatasync``: zero calls). Its
durable writes are therefore compared with lakekv without fsync.

The binding is async-only. The harness interface is synchronous, so each
calling thread gets its own event loop and runs one coroutine per call; W4's
timed get loop runs inside one coroutine instead, so no per-call bridge
inflates SlateDB's get latency.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.engine import OS_BUFFERED, S3_PUT, Engine, counter_value

T = TypeVar("T")


class SlateDB(Engine):
    """SlateDB on a local directory or (with ``s3``) an S3 bucket.

    Args:
        flush_interval_ms: WAL flush timer; what ``await_durable`` waits for.
        cache_bytes: in-memory block cache (moka) budget.
        s3: S3 connection settings (``endpoint``, ``access_key_id``,
            ``secret_access_key``, ``bucket``, ``region``); every ``open``
            then uses a fresh database path in that bucket.
    """

    family = "slatedb"
    has_transactions = True

    def __init__(self, *, flush_interval_ms: float, cache_bytes: int, s3: dict[str, str] | None = None) -> None:
        super().__init__()
        import slatedb.uniffi  # noqa: F401 - fail at construction if the extra is missing

        self.flush_interval_ms = flush_interval_ms
        self.cache_bytes = cache_bytes
        self.s3 = s3
        if s3 is not None:
            self.key, self.label, self.durability = "slatedb-s3", "SlateDB (S3)", S3_PUT
        else:
            self.key, self.label, self.durability = "slatedb", "SlateDB", OS_BUFFERED
        self._db: Any = None
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "version": version("slatedb"),
            "object_store": "S3 (SeaweedFS)" if self.s3 else "local filesystem (object_store LocalFileSystem, no fsync)",
            "flush_interval_ms": self.flush_interval_ms,
            "durable_writes": "every write awaits WriteHandle.await_durable()",
            "block_cache": f"moka, {self.cache_bytes} bytes",
            "runtime_threads": os.environ.get("SLATEDB_UNIFFI_RUNTIME_THREADS", "default (host parallelism)"),
            "other_settings": "Settings.default()",
            "batch": "slatedb WriteBatch",
            "transactions": "IsolationLevel.SERIALIZABLE_SNAPSHOT (optimistic; conflicts raise Error.Transaction)",
        }

    # -- sync bridge ---------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._lock:
                self._loops.append(loop)
        return loop.run_until_complete(coro)

    # -- lifecycle -----------------------------------------------------------

    def _object_store(self, path: Path) -> Any:
        from slatedb.uniffi import ObjectStoreBuilder, ObjectStoreType

        if self.s3 is None:
            builder = ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)
            builder.with_config("local_path", str(path))
        else:
            builder = ObjectStoreBuilder.from_env(ObjectStoreType.S3)
            for name, value in self.s3.items():
                builder.with_config(name, value)
            builder.with_config("allow_http", "true")  # SeaweedFS on 127.0.0.1 speaks plain HTTP
        return builder.build()

    def open(self, path: Path) -> None:
        from slatedb.uniffi import DbBuilder, DbCache, MokaCacheOptions, Settings

        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        settings = Settings.default()
        settings.set("flush_interval", json.dumps(f"{self.flush_interval_ms:g}ms"))
        db_path = "db" if self.s3 is None else f"slatedb-{uuid.uuid4().hex[:12]}"
        builder = DbBuilder(db_path, self._object_store(path))
        builder.with_settings(settings)
        cache = DbCache.new_moka_cache(MokaCacheOptions(max_capacity=self.cache_bytes, time_to_live=None, time_to_idle=None))
        builder.with_db_cache(cache, 1)
        self._db = self._run(builder.build())

    def close(self) -> None:
        if self._db is not None:
            self._run(self._db.shutdown())
            self._db = None
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            loop.close()
        self._local = threading.local()

    def settle(self) -> str:
        from slatedb.uniffi import FlushOptions, FlushType

        self._run(self._db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)))
        return "flush_with_options(MEM_TABLE) to L0 SSTs; compaction left to its background compactor"

    # -- operations ----------------------------------------------------------

    async def _put(self, key: bytes, value: bytes) -> None:
        handle = await self._db.put(key, value)
        await handle.await_durable()

    def put(self, key: bytes, value: bytes) -> None:
        self._run(self._put(key, value))

    async def _write(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        from slatedb.uniffi import WriteBatch

        batch = WriteBatch()
        for key, value in items:
            batch.put(key, value)
        handle = await self._db.write(batch)
        await handle.await_durable()

    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        self._run(self._write(items))

    def get(self, key: bytes) -> bytes | None:
        return self._run(self._db.get(key))  # type: ignore[no-any-return]

    async def _timed_gets(self, keys: Sequence[bytes], deadline: float) -> tuple[list[float], int]:
        get = self._db.get
        clock = time.perf_counter
        latencies: list[float] = []
        missing = 0
        for key in keys:
            started = clock()
            if await get(key) is None:
                missing += 1
            ended = clock()
            latencies.append(ended - started)
            if ended > deadline:
                break
        return latencies, missing

    def timed_gets(self, keys: Sequence[bytes], deadline: float) -> tuple[list[float], int]:
        return self._run(self._timed_gets(keys, deadline))

    async def _scan(self, start: bytes, end: bytes, limit: int) -> int:
        from slatedb.uniffi import KeyRange

        iterator = await self._db.scan(KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False))
        # next_batch: one FFI crossing per batch, the binding's fastest way
        # to hand rows to Python.
        rows = await iterator.next_batch(limit)
        pairs = [(row.key, row.value) for row in rows]
        return len(pairs)

    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        return self._run(self._scan(start, end, limit))

    async def _rmw(self, key: bytes) -> bool:
        from slatedb.uniffi import Error, IsolationLevel

        txn = await self._db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT)
        await txn.put(key, counter_value(await txn.get(key)))
        try:
            handle = await txn.commit()
        except Error.Transaction as exc:
            if "conflict" not in str(exc):
                raise  # some other transaction failure: not an abort to count
            return False
        if handle is not None:
            await handle.await_durable()
        return True

    def rmw(self, key: bytes) -> bool:
        return self._run(self._rmw(key))
