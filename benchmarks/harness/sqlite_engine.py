"""SQLite (stdlib ``sqlite3``): one ``WITHOUT ROWID`` table keyed by the key.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, so every commit
fsyncs the WAL before it returns. ``SQLite(synchronous="OFF")``
(``sqlite-nosync``) never fsyncs: the peer of lakekv without fsync. Each thread has its own connection (the
module's rule); writers are serialised by SQLite's write lock, waiting up to
``busy_timeout``. Transactions are ``BEGIN IMMEDIATE``: they take the write
lock first and so never abort; SQLite's isolation is serializable.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.engine import FSYNC, OS_BUFFERED, Engine, counter_value

# Long enough that 64 threads queueing for the write lock never time out.
BUSY_TIMEOUT_MS = 120_000


class SQLite(Engine):
    """SQLite in WAL mode with synchronous=FULL."""

    key = "sqlite"
    label = "SQLite"
    family = "sqlite"
    durability = FSYNC
    has_transactions = True

    def __init__(self, *, cache_bytes: int | None, synchronous: str = "FULL") -> None:
        super().__init__()
        if synchronous not in ("FULL", "OFF"):
            raise ValueError(f"synchronous must be 'FULL' or 'OFF', got {synchronous!r}")
        self.synchronous = synchronous
        if synchronous == "OFF":
            self.key, self.label, self.durability = "sqlite-nosync", "SQLite (synchronous=OFF)", OS_BUFFERED
        self.cache_bytes = cache_bytes
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._file: Path | None = None

    def settings(self) -> dict[str, Any]:
        return {
            "version": sqlite3.sqlite_version,
            "journal_mode": "WAL",
            "synchronous": self.synchronous,
            "cache_size_kib": self.cache_bytes // 1024 if self.cache_bytes is not None else "library default",
            "busy_timeout_ms": BUSY_TIMEOUT_MS,
            "schema": "CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
            "connections": "one per thread",
            "transactions": "BEGIN IMMEDIATE (pessimistic: waits for the write lock, never aborts)",
        }

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._file is None:
                raise RuntimeError("SQLite: used before open()")
            # isolation_level=None: autocommit, so a bare INSERT is its own
            # durable transaction and explicit BEGINs mean what they say.
            # check_same_thread=False only so close() may run on the main
            # thread; each connection is otherwise used by its own thread only.
            conn = sqlite3.connect(
                self._file, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            if self.cache_bytes is not None:  # None: SQLite's default page cache
                conn.execute(f"PRAGMA cache_size=-{self.cache_bytes // 1024}")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def open(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self._file = path / "kv.sqlite"
        self._local = threading.local()
        conn = self._conn()
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"SQLite refused WAL mode (got {mode!r})")
        conn.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()
        self._file = None

    def settle(self) -> str:
        busy, log_frames, moved = self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return f"wal_checkpoint(TRUNCATE): busy={busy}, frames={log_frames}, checkpointed={moved}"

    def put(self, key: bytes, value: bytes) -> None:
        self._conn().execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, value))

    def write_batch(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", items)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def get(self, key: bytes) -> bytes | None:
        row = self._conn().execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def scan(self, start: bytes, end: bytes, limit: int) -> int:
        rows = self._conn().execute(
            "SELECT k, v FROM kv WHERE k >= ? AND k < ? ORDER BY k LIMIT ?", (start, end, limit)
        ).fetchall()
        return len(rows)

    def rmw(self, key: bytes) -> bool:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, counter_value(None if row is None else row[0])))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return True
