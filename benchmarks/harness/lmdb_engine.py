"""LMDB (``lmdb`` binding): a copy-on-write B+tree in one memory-mapped file.

Durability: ``sync=True, metasync=True`` (the library defaults), so every
write transaction's commit fsyncs data and meta pages before it returns.
``LMDB(sync=False)`` (``lmdb-nosync``) commits to the OS page cache only: the
peer of lakekv without fsync where the disk must not hide CPU and GIL costs.
Writers are serialised by LMDB's single writer lock, so its read-modify-write
transactions never abort: they wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.engine import FSYNC, OS_BUFFERED, Engine, counter_value

GiB = 1 << 30


class LMDB(Engine):
    """LMDB with durable commits. ``map_size`` only reserves address space."""

    key = "lmdb"
    label = "LMDB"
    family = "lmdb"
    durability = FSYNC
    has_transactions = True

    def __init__(self, *, map_size: int = 16 * GiB, max_readers: int = 256, sync: bool = True) -> None:
        super().__init__()
        import lmdb  # noqa: F401 - fail at construction if the extra is missing

        self.sync = sync
        if not sync:
            self.key, self.label, self.durability = "lmdb-nosync", "LMDB (no sync)", OS_BUFFERED
        self.map_size = map_size
        self.max_readers = max_readers  # W3 runs 64 threads; the default is 126
        self._env: Any = None

    def settings(self) -> dict[str, Any]:
        import lmdb

        return {
            "version": lmdb.__version__,
            "library": ".".join(map(str, lmdb.version())),
            "sync": self.sync,
            "metasync": self.sync,
            "writemap": False,
            "map_size": self.map_size,
            "max_readers": self.max_readers,
            "batch": "one write transaction, cursor.putmulti",
            "transactions": "write transactions serialised by the writer lock (no aborts)",
        }

    def open(self, path: Path) -> None:
        import lmdb

        self.path = path
        self._env = lmdb.open(
            str(path), map_size=self.map_size, sync=self.sync, metasync=self.sync, writemap=False,
            max_readers=self.max_readers, lock=True,
        )

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def settle(self) -> str:
        self._env.sync(True)
        return "env.sync(force=True); a B+tree has no write buffer to flush"

    def put(self, key: bytes, value: bytes) -> None:
        with self._env.begin(write=True) as txn:
            txn.put(key, value)

    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        with self._env.begin(write=True) as txn:
            txn.cursor().putmulti(items)

    def get(self, key: bytes) -> bytes | None:
        with self._env.begin() as txn:
            return txn.get(key)  # type: ignore[no-any-return]

    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        rows = 0
        with self._env.begin() as txn:
            cursor = txn.cursor()
            if not cursor.set_range(start):
                return 0
            for key, _value in cursor.iternext(keys=True, values=True):
                if key >= end or rows >= limit:
                    break
                rows += 1
        return rows

    def rmw(self, key: bytes) -> bool:
        with self._env.begin(write=True) as txn:
            txn.put(key, counter_value(txn.get(key)))
        return True
