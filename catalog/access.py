"""Reading and writing catalog records through one lakekv view.

:class:`CatalogReader` reads namespaces, entries (the tables and views of a
namespace), table definitions, properties and live files from anything with
lakekv's read API (a ``Snapshot`` for time travel and plain reads, a
``Transaction`` inside a commit). :class:`CatalogWriter` adds the writes,
on a ``Transaction``.

Reads made on behalf of the *caller* of a multi-table transaction (a scan of
table A before writing table B) can be recorded with a digest of what they
returned: when the transaction loses a race and is re-applied on a newer
version, the same reads are repeated and compared (:meth:`reads_unchanged`),
which is what makes "read A, write B" conflict with a concurrent write to A.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Iterator, Protocol

from catalog import keys
from catalog.datafiles import DataFile
from catalog.errors import NoSuchNamespaceError, NoSuchTableError, NoSuchViewError
from catalog.names import Namespace, join
from catalog.records import TABLE, VIEW, NamespaceRecord, Pointer, TableDef


class KVReader(Protocol):
    def get(self, key: bytes) -> bytes | None:
        """The value stored at ``key``, or None if there is none."""
        ...

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """The ``(key, value)`` pairs in a key range or under a prefix, in key order.

        ``start``/``end`` bound the range, ``prefix`` restricts it, ``reverse``
        reverses the order and ``limit`` caps the number of pairs.
        """
        ...


class KVWriter(KVReader, Protocol):
    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        """Store ``value`` at ``key``, expiring after ``ttl`` seconds if given."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key`` (nothing happens if it is absent)."""
        ...


class _FileCache:
    """Decoded file entries by key. Entries are immutable (a file id is never
    reused), so one decode per process serves every later plan."""

    def __init__(self, limit: int = 500_000) -> None:
        self._lock = threading.Lock()
        self.entries: dict[bytes, DataFile] = {}
        self._limit = limit

    def get(self, key: bytes, raw: bytes) -> DataFile:
        entry = self.entries.get(key)
        if entry is None:
            entry = DataFile.decode(raw)
            with self._lock:
                if len(self.entries) >= self._limit:
                    self.entries.clear()
                self.entries[key] = entry
        return entry


FILE_CACHE = _FileCache()


class CatalogReader:
    """Catalog records as one lakekv view sees them."""

    def __init__(self, kv: KVReader) -> None:
        self.kv = kv
        self.recorded: list[tuple[str, bytes, bytes]] | None = None  # (kind, key/prefix, digest)

    # -- recording the caller's reads ----------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        value = self.kv.get(key)
        if self.recorded is not None:
            self.recorded.append(("get", key, hashlib.blake2b(value or b"\x00none", digest_size=16).digest()))
        return value

    def _scan(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        rows = list(self.kv.scan(prefix=prefix))
        if self.recorded is not None:
            h = hashlib.blake2b(digest_size=16)
            for k, v in rows:
                h.update(len(k).to_bytes(4, "little") + k + len(v).to_bytes(4, "little") + v)
            self.recorded.append(("scan", prefix, h.digest()))
        return rows

    def reads_unchanged(self, recorded: list[tuple[str, bytes, bytes]]) -> bool:
        """Repeat recorded reads on this view; True if each returns the same digest."""
        saved, self.recorded = self.recorded, []
        try:
            for kind, key, digest in recorded:
                if kind == "get":
                    self._get(key)
                else:
                    self._scan(key)
                if self.recorded[-1][2] != digest:
                    return False
            return True
        finally:
            self.recorded = saved

    # -- namespaces ----------------------------------------------------------

    def namespace(self, ns: Namespace) -> NamespaceRecord | None:
        """The namespace's record, or None if it does not exist."""
        raw = self._get(keys.namespace(ns))
        return None if raw is None else NamespaceRecord.decode(raw)

    def require_namespace(self, ns: Namespace) -> NamespaceRecord:
        """The namespace's record.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
        """
        record = self.namespace(ns)
        if record is None:
            raise NoSuchNamespaceError(f"namespace {join(ns)!r} does not exist")
        return record

    def child_namespaces(self, parent: Namespace, recursive: bool = False) -> list[Namespace]:
        """The namespaces directly under ``parent`` (all below it if ``recursive``), in key order."""
        depth = len(parent) + 1
        out = []
        for key, _ in self._scan(keys.namespace_children(parent)):
            ns = keys.namespace_from_key(key)
            if recursive or len(ns) == depth:
                out.append(ns)
        return out

    def namespace_properties(self, ns: Namespace) -> dict[str, str]:
        """The namespace's properties as a dict (empty if it has none)."""
        prefix = keys.namespace_properties(ns)
        return {k[len(prefix) :].decode(): v.decode() for k, v in self._scan(prefix)}

    # -- entries: the tables and views of a namespace -----------------------

    def pointer(self, ns: Namespace, name: str) -> Pointer | None:
        """The catalog entry (table or view) named ``name`` in ``ns``, or None."""
        raw = self._get(keys.obj(ns, name))
        return None if raw is None else Pointer.decode(raw)

    def entries(self, ns: Namespace) -> list[tuple[str, Pointer]]:
        """Every ``(name, pointer)`` of the tables and views directly in ``ns``, by name."""
        prefix = keys.entries_in(ns)
        return [(k[len(prefix) :].decode(), Pointer.decode(v)) for k, v in self._scan(prefix)]

    def entry_names(
        self, ns: Namespace, kind: str, after: str | None = None, limit: int | None = None
    ) -> tuple[list[str], bool]:
        """The names of the ``kind`` entries (tables or views) directly in ``ns``, by name.

        Only names after ``after`` (None: from the first), at most ``limit``
        (None: all). Returns them and whether another such entry follows.
        Reads only ``ns``'s entry keys from ``after`` on, in chunks, and
        decodes no table's pointer (:meth:`Pointer.kind_of`); a recording
        reader (a multi-table transaction) reads and records the whole
        namespace, so a rebase repeats the same read.
        """
        prefix = keys.entries_in(ns)
        cut = len(prefix)
        start = prefix if after is None else prefix + after.encode() + b"\x00"  # the first key after ``after``
        want = None if limit is None else limit + 1  # one more tells whether another follows
        kind_of = Pointer.kind_of
        out: list[str] = []
        if self.recorded is not None:
            rows = [(k, v) for k, v in self._scan(prefix) if k >= start]
            for k, v in rows:
                if kind_of(v) == kind:
                    out.append(k[cut:].decode())
                    if want is not None and len(out) == want:
                        break
        else:
            chunk = want
            while True:
                rows = list(self.kv.scan(start=start, prefix=prefix, limit=chunk))
                for k, v in rows:
                    if kind_of(v) == kind:
                        out.append(k[cut:].decode())
                if want is None or len(out) >= want or len(rows) < chunk:  # type: ignore[operator]
                    break
                chunk = want - len(out)  # views took part of the chunk: read only what is missing
                start = rows[-1][0] + b"\x00"
        if limit is not None and len(out) > limit:
            return out[:limit], True
        return out, False

    def require_table(self, ns: Namespace, name: str) -> tuple[Pointer, TableDef]:
        """The table's pointer and definition.

        Raises:
            NoSuchTableError: no table of that name (absent, a view, or its
                namespace does not exist).
        """
        pointer = self.pointer(ns, name)
        if pointer is None or pointer.kind != TABLE:
            if self.namespace(ns) is None:
                raise NoSuchTableError(f"table {join((*ns, name))!r} does not exist (no namespace {join(ns)!r})")
            raise NoSuchTableError(f"table {join((*ns, name))!r} does not exist")
        definition = self.table_def(pointer.id)
        if definition is None:
            raise NoSuchTableError(f"table {join((*ns, name))!r} does not exist")
        return pointer, definition

    def require_view(self, ns: Namespace, name: str) -> Pointer:
        """The view's pointer (its ``view`` holds the definition).

        Raises:
            NoSuchViewError: no view of that name (absent or a table).
        """
        pointer = self.pointer(ns, name)
        if pointer is None or pointer.kind != VIEW or pointer.view is None:
            raise NoSuchViewError(f"view {join((*ns, name))!r} does not exist")
        return pointer

    def table_def(self, table_id: str) -> TableDef | None:
        """The definition of the table with id ``table_id``, or None if there is none."""
        raw = self._get(keys.table_def(table_id))
        return None if raw is None else TableDef.decode(raw)

    def table_properties(self, table_id: str) -> dict[str, str]:
        """The table's properties as a dict (empty if it has none)."""
        prefix = keys.table_properties(table_id)
        return {k[len(prefix) :].decode(): v.decode() for k, v in self._scan(prefix)}

    def live_files(self, table_id: str) -> list[DataFile]:
        """The table's live data files (those a scan reads), decoded once per process and cached."""
        prefix = keys.table_files(table_id)
        batches = getattr(self.kv, "scan_batches", None)
        if self.recorded is not None or batches is None:
            return [FILE_CACHE.get(k, v) for k, v in self._scan(prefix)]
        # A plan over thousands of files: Arrow batches cost far less per row
        # than (key, value) tuples, and decoded entries come from the cache.
        out: list[DataFile] = []
        cached = FILE_CACHE.entries.get
        for batch in batches(prefix=prefix):
            for key, raw in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                entry = cached(key)
                out.append(entry if entry is not None else FILE_CACHE.get(key, raw))
        return out

    def gone_files(self, table_id: str) -> list[tuple[bytes, dict[str, Any]]]:
        """The ``(key, record)`` of each of the table's removed files that GC has not yet deleted."""
        return [(k, json.loads(v)) for k, v in self.kv.scan(prefix=keys.table_gone(table_id))]


class CatalogWriter(CatalogReader):
    """A :class:`CatalogReader` on a lakekv ``Transaction`` that can also write."""

    kv: KVWriter

    def __init__(self, kv: KVWriter) -> None:
        super().__init__(kv)

    def put(self, key: bytes, value: bytes) -> None:
        """Write ``value`` at ``key`` in the transaction."""
        self.kv.put(key, value)

    def delete(self, key: bytes) -> None:
        """Delete ``key`` in the transaction."""
        self.kv.delete(key)
