"""RocksDB through ``rocksdict`` (raw bytes mode, no pickling).

Durability: ``WriteOptions.sync = True``, so every write fsyncs the WAL
before it returns (RocksDB groups concurrent writers into one WAL sync).
Reads get the same block-cache budget as every engine and a 10 bits/key
bloom filter (RocksDB's block-based tables have none by default; lakekv and
SlateDB always build one).

Transactions: rocksdict exposes neither ``TransactionDB`` nor
``OptimisticTransactionDB``, so W6 has no RocksDB figure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.engine import FSYNC, Engine

# After a flush, wait at most this long for RocksDB's own compactions.
SETTLE_TIMEOUT_S = 120.0


class RocksDB(Engine):
    """RocksDB with synced WAL writes."""

    key = "rocksdb"
    label = "RocksDB"
    family = "rocksdb"
    durability = FSYNC
    transaction_note = "rocksdict exposes no TransactionDB / OptimisticTransactionDB"

    def __init__(self, *, cache_bytes: int | None, bloom_bits_per_key: int = 10) -> None:
        super().__init__()
        import rocksdict  # noqa: F401 - fail at construction if the extra is missing

        self.cache_bytes = cache_bytes
        self.bloom_bits_per_key = bloom_bits_per_key
        self._db: Any = None

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "version": version("rocksdict"),
            "write_options": {"sync": True, "disable_wal": False},
            "block_cache_bytes": self.cache_bytes if self.cache_bytes is not None else "library default",
            "bloom_filter_bits_per_key": self.bloom_bits_per_key,
            "other_options": "library defaults (snappy compression, leveled compaction)",
            "batch": "rocksdict.WriteBatch",
            "transactions": self.transaction_note,
        }

    def open(self, path: Path) -> None:
        from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteOptions

        self.path = path
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        table = BlockBasedOptions()
        if self.cache_bytes is not None:  # None: the library's default block cache
            table.set_block_cache(Cache(self.cache_bytes))
        table.set_bloom_filter(self.bloom_bits_per_key, False)
        options.set_block_based_table_factory(table)
        self._db = Rdict(str(path), options)
        write_options = WriteOptions()
        write_options.sync = True
        self._db.set_write_options(write_options)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def settle(self) -> str:
        self._db.flush(True)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            busy = self._db.property_int_value("rocksdb.num-running-compactions")
            pending = self._db.property_int_value("rocksdb.compaction-pending")
            if not busy and not pending:
                files = self._db.property_value("rocksdb.num-files-at-level0")
                return f"flush(wait=True), then waited for its compactions; L0 files: {files}"
            time.sleep(0.1)
        return f"flush(wait=True); compactions still running after {SETTLE_TIMEOUT_S:.0f}s"

    def put(self, key: bytes, value: bytes) -> None:
        self._db.put(key, value)

    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        from rocksdict import WriteBatch

        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key, value)
        self._db.write(batch)

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)  # type: ignore[no-any-return]

    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        rows = 0
        iterator = self._db.iter()
        iterator.seek(start)
        while iterator.valid() and rows < limit:
            key = iterator.key()
            if key >= end:
                break
            iterator.value()
            rows += 1
            iterator.next()
        return rows
