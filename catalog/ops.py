"""Catalog operations as records that are applied inside one lakekv transaction.

Every change to the lakehouse is an :class:`Op`: a small record of the
caller's intent (append these files, drop that table, ...) with one method,
:meth:`Op.apply`, that checks the operation's preconditions against the
catalog as a lakekv transaction sees it and writes its keys. Because an op is
a record, the same op can be

* applied directly (``table.append``), or as one of many in a multi-table
  transaction (``lake.transaction()``);
* re-applied on a newer version after losing a race (a *rebase*: the second
  and later applications run with ``rebase=True`` and check that what the op
  observed the first time still holds, raising
  :class:`~catalog.errors.StaleObservationError` when it does not — see
  :mod:`catalog.conflicts` for which pairs rebase);
* stored as JSON (:meth:`Op.to_record` / :func:`from_record`) and applied
  later, by another process (durable transactions, Spark commits).

Data work (writing and rewriting Parquet files) happens before or during the
first application and never again: a rebase only re-checks and re-writes keys.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from catalog import file_index, keys, table_locations
from catalog.access import CatalogWriter
from catalog.context import Context
from catalog.datafiles import DataFile, read_file, write_files
from catalog.errors import (
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    RetryableConflictError,
    SchemaMismatchError,
    StaleObservationError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from catalog.names import Namespace, join
from catalog.opcodec import decode_value, encode_value
from catalog.planning import matches, prune, whole_matches
from catalog.records import TABLE, VIEW, NamespaceRecord, Pointer, TableDef, ViewRecord
from catalog.schema import SchemaChange, by_id, can_widen, field_id


def now_ms() -> int:
    """The current time in milliseconds since the Unix epoch."""
    return int(time.time() * 1000)


def summary(kind: str, obj: str, **counts: Any) -> dict[str, Any]:
    """A history summary: ``{"kind": kind, "object": obj}`` plus the given counts."""
    out: dict[str, Any] = {"kind": kind, "object": obj}
    out.update(counts)
    return out


@dataclass
class Op(ABC):
    """Base: one catalog operation. Subclasses are dataclasses of their intent."""

    kind: ClassVar[str] = ""

    @abstractmethod
    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Check preconditions and write this op's keys; return its history summary."""

    @property
    @abstractmethod
    def object_name(self) -> str:
        """The namespace, table or view the op acts on (for messages and history)."""

    def new_files(self) -> list[DataFile]:
        """Data files this op makes referenced: written for it, checked by
        :mod:`catalog.freshness` before it commits or is staged, deleted if it finally fails."""
        return []

    def new_paths(self) -> list[str]:
        """The object paths of :meth:`new_files`."""
        return [f.path for f in self.new_files()]

    def to_record(self) -> dict[str, Any]:
        """This op as a JSON-ready dict: its ``kind`` and its encoded fields (read back by :func:`from_record`)."""
        return {"kind": self.kind, **_encode_fields(self)}


# -- namespaces --------------------------------------------------------------


@dataclass
class CreateNamespace(Op):
    kind: ClassVar[str] = "create_namespace"
    ns: Namespace
    properties: dict[str, str] = field(default_factory=dict)
    parents: bool = False

    @property
    def object_name(self) -> str:
        """The namespace's dotted name."""
        return join(self.ns)

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Create the namespace, its properties and (with ``parents``) its missing parents; return its summary.

        The summary counts the namespaces created (``namespaces_created``).

        Raises:
            NamespaceAlreadyExistsError: the namespace already exists.
            NoSuchNamespaceError: a parent namespace does not exist and ``parents`` is False.
        """
        if w.namespace(self.ns) is not None:
            raise NamespaceAlreadyExistsError(f"namespace {join(self.ns)!r} already exists")
        created = 1
        for depth in range(1, len(self.ns)):
            parent = self.ns[:depth]
            if w.namespace(parent) is None:
                if not self.parents:
                    raise NoSuchNamespaceError(
                        f"parent namespace {join(parent)!r} of {join(self.ns)!r} does not exist (pass parents=True)"
                    )
                w.put(keys.namespace(parent), NamespaceRecord(now_ms()).encode())
                created += 1
        w.put(keys.namespace(self.ns), NamespaceRecord(now_ms()).encode())
        for k, v in self.properties.items():
            w.put(keys.namespace_property(self.ns, k), v.encode())
        return summary(self.kind, join(self.ns), namespaces_created=created)


@dataclass
class DropNamespace(Op):
    kind: ClassVar[str] = "drop_namespace"
    ns: Namespace
    cascade: bool = False

    @property
    def object_name(self) -> str:
        """The namespace's dotted name."""
        return join(self.ns)

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Drop the namespace (with ``cascade``, all it holds, however deep); return its history summary.

        The tables' files are recorded as removed, not purged. The summary counts
        the namespaces and tables dropped and the files and rows removed.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            NamespaceNotEmptyError: the namespace holds a namespace, table or view
                and ``cascade`` is False.
        """
        w.require_namespace(self.ns)
        children = w.child_namespaces(self.ns, recursive=True)
        entries = w.entries(self.ns)
        if (children or entries) and not self.cascade:
            what = f"namespace {join(children[0])!r}" if children else f"object {join((*self.ns, entries[0][0]))!r}"
            raise NamespaceNotEmptyError(f"namespace {join(self.ns)!r} is not empty (holds {what}); pass cascade=True")
        dropped_tables = 0
        files_removed = rows_removed = 0
        for ns in sorted(children, key=len, reverse=True) + [self.ns]:
            for name, pointer in w.entries(ns):
                if pointer.kind == TABLE:
                    f, r = _drop_table_keys(w, pointer.id, purge=False)
                    files_removed += f
                    rows_removed += r
                    dropped_tables += 1
                w.delete(keys.obj(ns, name))
            for prop in w.namespace_properties(ns):
                w.delete(keys.namespace_property(ns, prop))
            w.delete(keys.namespace(ns))
        return summary(
            self.kind,
            join(self.ns),
            namespaces_dropped=len(children) + 1,
            tables_dropped=dropped_tables,
            files_removed=files_removed,
            rows_removed=rows_removed,
        )


@dataclass
class UpdateNamespaceProperties(Op):
    kind: ClassVar[str] = "update_namespace_properties"
    ns: Namespace
    updates: dict[str, str] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)

    @property
    def object_name(self) -> str:
        """The namespace's dotted name."""
        return join(self.ns)

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Set ``updates`` and remove ``removals`` in the namespace's properties; return its history summary.

        The summary lists the properties ``updated``, ``removed`` and ``missing``
        (to remove but not set); :meth:`last_outcome` returns the same lists.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            ValueError: a property is both in ``updates`` and in ``removals``.
        """
        w.require_namespace(self.ns)
        result = _update_props(
            w, self.kind, join(self.ns), lambda k: keys.namespace_property(self.ns, k), self.updates, self.removals
        )
        self._outcome = result  # the last application's (after a rebase: the one that committed)
        return result

    def last_outcome(self) -> dict[str, list[str]]:
        """``updated``/``removed``/``missing`` as the last application found them."""
        outcome: dict[str, Any] = getattr(self, "_outcome", None) or {}
        return {key: list(outcome.get(key, [])) for key in ("updated", "removed", "missing")}


def _update_props(
    w: CatalogWriter, kind: str, obj: str, key_of: Any, updates: dict[str, str], removals: list[str]
) -> dict[str, Any]:
    overlap = set(updates) & set(removals)
    if overlap:
        raise ValueError(f"property {sorted(overlap)[0]!r} is both updated and removed")
    removed, missing = [], []
    for k in removals:
        if w._get(key_of(k)) is None:
            missing.append(k)
        else:
            w.delete(key_of(k))
            removed.append(k)
    for k, v in updates.items():
        w._get(key_of(k))  # read it: two updates of one key conflict (see catalog.conflicts)
        w.put(key_of(k), v.encode())
    return summary(kind, obj, updated=sorted(updates), removed=removed, missing=missing)


# -- tables --------------------------------------------------------------------


@dataclass
class _NamedOp(Op):
    """An op on the object ``<ns>.<name>`` (a table or view addressed by name)."""

    ns: Namespace
    name: str

    @property
    def object_name(self) -> str:
        """The object's dotted name, ``<ns>.<name>``."""
        return join((*self.ns, self.name))


@dataclass
class CreateTable(_NamedOp):
    kind: ClassVar[str] = "create_table"
    definition: TableDef
    properties: dict[str, str] = field(default_factory=dict)

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Create the table: its name, definition and properties; return its history summary (with its id and format).

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            TableAlreadyExistsError: a table or view of that name already exists.
            ValueError: an Iceberg table's location overlaps another's (see :mod:`catalog.table_locations`).
        """
        w.require_namespace(self.ns)
        existing = w.pointer(self.ns, self.name)
        if existing is not None:
            what = "table" if existing.kind == TABLE else "view"
            raise TableAlreadyExistsError(f"a {what} named {self.object_name!r} already exists")
        table_locations.created(w, self.definition, self.object_name)
        w.put(keys.obj(self.ns, self.name), Pointer(TABLE, self.definition.id).encode())
        w.put(keys.table_def(self.definition.id), self.definition.encode())
        for k, v in self.properties.items():
            w.put(keys.table_property(self.definition.id, k), v.encode())
        if self.definition.format == "parquet":
            file_index.mark_indexed(w, self.definition.id)
        return summary(self.kind, self.object_name, table_id=self.definition.id, format=self.definition.format)


def _drop_table_keys(w: CatalogWriter, table_id: str, purge: bool) -> tuple[int, int]:
    definition = w.table_def(table_id)
    if definition is not None:
        table_locations.dropped(w, definition)
    files = w.live_files(table_id)
    for f in files:
        w.delete(keys.table_file(table_id, f.id))
        w.put(keys.table_gone_file(table_id, f.id), _gone(f, purge))
    file_index.drop_all(w, table_id)
    for prop in w.table_properties(table_id):
        w.delete(keys.table_property(table_id, prop))
    w.delete(keys.table_def(table_id))
    return len(files), sum(f.rows for f in files)


def _gone(f: DataFile, purge: bool = False) -> bytes:
    record: dict[str, Any] = {"path": f.path, "size": f.size, "purge": purge}
    if f.crc32c is not None:  # lake.verify() checks removed files that retained versions still read
        record["crc32c"] = f.crc32c
    return json.dumps(record, separators=(",", ":")).encode()


@dataclass
class DropTable(_NamedOp):
    kind: ClassVar[str] = "drop_table"
    purge: bool = False

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Drop the table: its name, definition, properties and files; return its history summary.

        Each live file is recorded as removed, with the ``purge`` flag (see
        :func:`catalog.maintenance.purge_dropped`); the summary counts the files
        and rows removed.

        Raises:
            NoSuchTableError: no table of that name exists.
        """
        pointer, _ = w.require_table(self.ns, self.name)
        files, rows = _drop_table_keys(w, pointer.id, self.purge)
        w.delete(keys.obj(self.ns, self.name))
        return summary(self.kind, self.object_name, table_id=pointer.id, files_removed=files, rows_removed=rows)


@dataclass
class RenameTable(_NamedOp):
    kind: ClassVar[str] = "rename_table"
    new_ns: Namespace
    new_name: str

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Move the table's name to ``new_name`` in ``new_ns``; return its history summary (with the new name).

        Raises:
            NoSuchTableError: no table of the old name exists.
            NoSuchNamespaceError: ``new_ns`` does not exist.
            TableAlreadyExistsError: a table or view of the new name already exists.
        """
        pointer, definition = w.require_table(self.ns, self.name)
        w.require_namespace(self.new_ns)
        target = join((*self.new_ns, self.new_name))
        if w.pointer(self.new_ns, self.new_name) is not None:
            raise TableAlreadyExistsError(f"cannot rename {self.object_name!r}: {target!r} already exists")
        table_locations.renamed(w, definition, target)
        w.delete(keys.obj(self.ns, self.name))
        w.put(keys.obj(self.new_ns, self.new_name), pointer.encode())
        return summary(self.kind, self.object_name, table_id=pointer.id, new_name=target)


def _require_def(w: CatalogWriter, table_id: str, name: str) -> TableDef:
    definition = w.table_def(table_id)
    if definition is None:
        raise NoSuchTableError(f"table {name!r} (id {table_id}) no longer exists: it was dropped")
    return definition


def _check_files_fit(files_schema: pa.Schema, definition: TableDef, name: str) -> None:
    """The files were written under ``files_schema``; can the current schema read them?"""
    assert definition.schema is not None
    written = by_id(files_schema)
    for f in definition.schema:
        old = written.get(field_id(f))
        if old is None:
            if not f.nullable:
                raise SchemaMismatchError(f"table {name!r} now requires column {f.name!r}, which the new files lack")
            continue
        if not can_widen(old.type, f.type):
            raise SchemaMismatchError(
                f"table {name!r}: column {f.name!r} is now {f.type}; the new files hold {old.type}"
            )


@dataclass
class Append(Op):
    kind: ClassVar[str] = "append"
    table: str  # the name, for messages and history
    table_id: str
    files: list[DataFile]
    schema: pa.Schema  # the schema the files were written under

    @property
    def object_name(self) -> str:
        """The table's name."""
        return self.table

    def new_files(self) -> list[DataFile]:
        """The data files this append adds (a copy of ``files``)."""
        return list(self.files)

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Add ``files`` to the table's live files; return its history summary (files and rows added).

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: the table is not a native parquet table.
            SchemaMismatchError: the table's current schema cannot read the files
                (a required column they lack, or a type they hold that does not widen to it).
        """
        definition = _require_def(w, self.table_id, self.table)
        _check_native(definition, self.table)
        _check_files_fit(self.schema, definition, self.table)
        for f in self.files:
            w.put(keys.table_file(self.table_id, f.id), f.encode())
        file_index.add_files(w, self.table_id, self.files, self.schema)
        return summary(
            self.kind,
            self.table,
            table_id=self.table_id,
            files_added=len(self.files),
            rows_added=sum(f.rows for f in self.files),
            files_removed=0,
            rows_removed=0,
        )


def _current_schema(w: CatalogWriter, table_id: str, fallback: pa.Schema | None) -> pa.Schema:
    """The table's schema now (its group summaries decode statistics by it)."""
    definition = w.table_def(table_id)
    schema = definition.schema if definition is not None else None
    return schema if schema is not None else (fallback if fallback is not None else pa.schema([]))


def _check_native(definition: TableDef, name: str) -> None:
    if definition.format != "parquet":
        raise ValueError(f"table {name!r} has format {definition.format!r}; only native parquet tables take data here")


@dataclass
class _Rewrite(Op):
    """Shared by overwrite-with-filter and delete: copy-on-write of matching files."""

    table: str
    table_id: str
    filter: pc.Expression | None = None
    removed: list[DataFile] = field(default_factory=list)
    added: list[DataFile] = field(default_factory=list)
    observed: list[str] | None = None  # live file ids at the first application
    schema: pa.Schema | None = None

    @property
    def object_name(self) -> str:
        """The table's name."""
        return self.table

    def new_files(self) -> list[DataFile]:
        """The data files this rewrite wrote (the kept rows of the files it rewrites)."""
        return list(self.added)

    def plan(self, w: CatalogWriter, ctx: Context, definition: TableDef) -> None:
        """First application: choose the files to rewrite and write what remains of them."""
        assert definition.schema is not None
        live = w.live_files(self.table_id)
        self.observed = [f.id for f in live]
        self.schema = definition.schema
        if self.filter is None:
            self.removed = list(live)
            return
        candidates = prune(live, definition.schema, self.filter)
        for entry, whole in zip(candidates, whole_matches(candidates, definition.schema, self.filter)):
            if whole:  # every row matches, by statistics: removed without reading it
                self.removed.append(entry)
                continue
            data = read_file(ctx.objects, entry, definition.schema, table=self.table)
            hit = matches(data, self.filter)
            hits = pc.sum(hit).as_py() or 0
            if hits == 0:
                continue
            self.removed.append(entry)
            if hits < data.num_rows:
                kept = data.filter(pc.invert(hit))
                self.added.extend(
                    write_files(
                        ctx.objects,
                        definition.location,
                        kept,
                        definition.schema,
                        definition.partition_by,
                        ctx.target_file_bytes,
                    )
                )

    def check_rebase(self, w: CatalogWriter, definition: TableDef) -> None:
        """On a rebase, check that what the first application observed still holds.

        Raises:
            StaleObservationError: a file this rewrite removes was rewritten or
                removed meanwhile, or a file added meanwhile may hold rows matching
                ``filter`` (with no filter, any added file).
        """
        live = {f.id: f for f in w.live_files(self.table_id)}
        gone = [f.id for f in self.removed if f.id not in live]
        if gone:
            raise StaleObservationError(
                f"{self.kind} of {self.table!r}: data file {gone[0]} was rewritten or removed meanwhile"
            )
        observed = set(self.observed or ())
        new = [f for i, f in live.items() if i not in observed]
        if new and (self.filter is None or prune(new, definition.schema, self.filter)):
            raise StaleObservationError(
                f"{self.kind} of {self.table!r}: {len(new)} data file(s) were added meanwhile that may hold affected rows"
            )

    def write(self, w: CatalogWriter, extra_added: list[DataFile]) -> dict[str, Any]:
        """Write the rewrite's keys: record the ``removed`` files as removed and add ``added`` and ``extra_added``.

        Returns the history summary, counting the files and rows added and removed.
        """
        for f in self.removed:
            w.delete(keys.table_file(self.table_id, f.id))
            w.put(keys.table_gone_file(self.table_id, f.id), _gone(f))
        file_index.remove_files(w, self.table_id, self.removed)
        added = self.added + extra_added
        for f in added:
            w.put(keys.table_file(self.table_id, f.id), f.encode())
        file_index.add_files(w, self.table_id, added, _current_schema(w, self.table_id, self.schema))
        return summary(
            self.kind,
            self.table,
            table_id=self.table_id,
            files_added=len(added),
            rows_added=sum(f.rows for f in added),
            files_removed=len(self.removed),
            rows_removed=sum(f.rows for f in self.removed),
        )


@dataclass
class Delete(_Rewrite):
    kind: ClassVar[str] = "delete"

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Delete the rows matching ``filter``; return its history summary (with the rows removed).

        The first application chooses the files to rewrite and writes their
        remaining rows; a rebase only re-checks that choice.

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: the table is not a native parquet table, or ``filter`` is None
                (on the first application).
            StaleObservationError: on a rebase, what the first application observed
                changed (see :meth:`check_rebase`).
        """
        definition = _require_def(w, self.table_id, self.table)
        _check_native(definition, self.table)
        if self.observed is None:
            if self.filter is None:
                raise ValueError("delete needs a filter; use overwrite() with an empty table to remove every row")
            self.plan(w, ctx, definition)
        elif rebase:
            self.check_rebase(w, definition)
        out = self.write(w, [])
        # The rows this delete removed are those of the removed files minus the rows kept.
        out["rows_removed"] = out["rows_removed"] - out["rows_added"]
        out["rows_added"] = 0
        return out


@dataclass
class Overwrite(_Rewrite):
    """Replace the live files (or the rows matching ``filter``) by ``files``.

    ``read_files``: for a read-modify-write, the ids of the table's live files
    when the new data was *computed* (read), which may be long before this
    commit. Live files not among them (an append, overwrite or compaction
    committed in between) may hold rows the new data never saw: the first
    application raises :class:`~catalog.errors.StaleObservationError` rather
    than replace them. None (a blind overwrite) replaces whatever is live at
    commit.
    """

    kind: ClassVar[str] = "overwrite"
    files: list[DataFile] = field(default_factory=list)
    files_schema: pa.Schema | None = None
    read_files: list[str] | None = None
    # A copy-on-write rewrite (Spark's UPDATE and MERGE): the ids of exactly
    # the files replaced, whose every row the new files hold (changed or not).
    # ``filter`` is then only the rows the rewrite read, for the conflict
    # checks: no file is read or rewritten here.
    replaced: list[str] | None = None

    def new_files(self) -> list[DataFile]:
        """The data files this overwrite adds: the kept rows of the files it rewrites, then ``files``."""
        return self.added + self.files

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Replace the live files (or the matching rows, or the ``replaced`` files) by ``files``; return its summary.

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: the table is not a native parquet table.
            SchemaMismatchError: ``files_schema`` is set and the table's current
                schema cannot read the new files.
            StaleObservationError: on the first application, a file committed since
                ``read_files`` were read may hold affected rows or a ``replaced`` file
                is gone; on a rebase, what the first application observed changed.
        """
        definition = _require_def(w, self.table_id, self.table)
        _check_native(definition, self.table)
        if self.files_schema is not None:
            _check_files_fit(self.files_schema, definition, self.table)
        if self.observed is None:
            self.check_read_files(w, definition)
            if self.replaced is None:
                self.plan(w, ctx, definition)
            else:
                self.take_replaced(w, definition)
        elif rebase:
            self.check_rebase(w, definition)
        return self.write(w, self.files)

    def take_replaced(self, w: CatalogWriter, definition: TableDef) -> None:
        """For a copy-on-write rewrite: note the live files as observed and the ``replaced`` ones as removed.

        Raises:
            StaleObservationError: a ``replaced`` file was rewritten or removed after it was read.
        """
        live = {f.id: f for f in w.live_files(self.table_id)}
        self.observed = list(live)
        self.schema = definition.schema
        gone = [i for i in self.replaced or () if i not in live]
        if gone:
            raise StaleObservationError(
                f"rewrite of {self.table!r}: data file {gone[0]} was rewritten or removed after it was read"
            )
        self.removed = [live[i] for i in self.replaced or ()]

    def check_read_files(self, w: CatalogWriter, definition: TableDef) -> None:
        """Check that no file committed since ``read_files`` were read may hold affected rows.

        Nothing is checked when ``read_files`` is None (a blind overwrite).

        Raises:
            StaleObservationError: a live file not in ``read_files`` may hold rows
                matching ``filter`` (with no filter, any such file).
        """
        if self.read_files is None:
            return
        read = set(self.read_files)
        new = [f for f in w.live_files(self.table_id) if f.id not in read]
        if new and (self.filter is None or prune(new, definition.schema, self.filter)):
            raise StaleObservationError(
                f"overwrite of {self.table!r}: {len(new)} data file(s) were committed after its input was "
                "read and may hold rows it never saw; read the table again and redo the overwrite"
            )


@dataclass
class Compact(_Rewrite):
    """Rewrite small files into larger ones: same rows, fewer files."""

    kind: ClassVar[str] = "compact"

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Replace the ``removed`` files by the ``added`` ones (same rows); return its history summary.

        Every application, the first included, checks that the inputs are
        still live: they were planned and read at an earlier version than the
        one this transaction starts at (a linearizable begin catches up with
        every commit since), and a compaction that committed in between and
        took them would otherwise have its rows added a second time. Point
        reads of the inputs' keys, not a listing: a concurrent append (new
        keys) does not conflict with them, a concurrent removal does.

        Raises:
            NoSuchTableError: the table was dropped.
            StaleObservationError: an input file was removed after it was planned.
        """
        _require_def(w, self.table_id, self.table)
        gone = [f.id for f in self.removed if w.kv.get(keys.table_file(self.table_id, f.id)) is None]
        if gone:
            raise StaleObservationError(f"compaction of {self.table!r}: input file {gone[0]} was removed meanwhile")
        out = self.write(w, [])
        out["rows_added"] = out["rows_removed"] = 0  # same rows, new files
        return out


@dataclass
class UpdateSchema(Op):
    kind: ClassVar[str] = "update_schema"
    table: str
    table_id: str
    change: SchemaChange
    base_version: int  # the schema_version the change was built on

    @property
    def object_name(self) -> str:
        """The table's name."""
        return self.table

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Apply ``change`` to the table's schema, bumping its version; return its summary (with the new version).

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: the table is not a native parquet table, or a step of
                ``change`` cannot apply to its schema.
            StaleObservationError: the table's schema version is no longer ``base_version``.
        """
        definition = _require_def(w, self.table_id, self.table)
        _check_native(definition, self.table)
        if definition.schema_version != self.base_version:
            raise StaleObservationError(
                f"schema of {self.table!r} changed meanwhile (version {definition.schema_version})"
            )
        assert definition.schema is not None
        schema, last = self.change.apply(definition.schema, definition.last_field_id, definition.partition_ids)
        definition.schema = schema
        definition.last_field_id = last
        definition.schema_version += 1
        w.put(keys.table_def(self.table_id), definition.encode())
        return summary(self.kind, self.table, table_id=self.table_id, schema_version=definition.schema_version)


@dataclass
class UpdateProperties(Op):
    kind: ClassVar[str] = "update_properties"
    table: str
    table_id: str
    updates: dict[str, str] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)

    @property
    def object_name(self) -> str:
        """The table's name."""
        return self.table

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Set ``updates`` and remove ``removals`` in the table's properties; return its history summary.

        The summary lists the properties ``updated``, ``removed`` and ``missing``
        (to remove but not set).

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: a property is both in ``updates`` and in ``removals``.
        """
        _require_def(w, self.table_id, self.table)
        out = _update_props(
            w, self.kind, self.table, lambda k: keys.table_property(self.table_id, k), self.updates, self.removals
        )
        out["table_id"] = self.table_id
        return out


@dataclass
class CommitMetadata(Op):
    """Compare-and-set of an Iceberg table's metadata location."""

    kind: ClassVar[str] = "commit_metadata"
    table: str
    table_id: str
    new_location: str
    expected: str | None

    @property
    def object_name(self) -> str:
        """The table's name."""
        return self.table

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Set the table's metadata location to ``new_location`` if it is still ``expected``; return its history summary.

        Raises:
            NoSuchTableError: the table was dropped.
            ValueError: the table is not an iceberg table.
            StaleObservationError: the metadata location is no longer ``expected``.
        """
        definition = _require_def(w, self.table_id, self.table)
        if definition.format != "iceberg":
            raise ValueError(f"table {self.table!r} has format {definition.format!r}, not iceberg")
        if definition.metadata_location != self.expected:
            raise StaleObservationError(
                f"metadata of {self.table!r} is at {definition.metadata_location!r}, not the expected {self.expected!r}"
            )
        definition.metadata_location = self.new_location
        w.put(keys.table_def(self.table_id), definition.encode())
        return summary(self.kind, self.table, table_id=self.table_id, metadata_location=self.new_location)


# -- views -----------------------------------------------------------------------


@dataclass
class CreateView(_NamedOp):
    kind: ClassVar[str] = "create_view"
    view: ViewRecord
    view_id: str
    replace: bool = False

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Create the view, or with ``replace`` replace it; return its history summary (with the view's version).

        A replacement keeps the view's id and creation time, takes the fields of
        ``view`` that are not None over the current ones and bumps its version.

        Raises:
            NoSuchNamespaceError: the namespace does not exist.
            NoSuchViewError: ``replace`` is True and no view of that name exists.
            ViewAlreadyExistsError: ``replace`` is False and a table or view of that name already exists.
        """
        w.require_namespace(self.ns)
        existing = w.pointer(self.ns, self.name)
        view = self.view
        if self.replace:
            current = w.require_view(self.ns, self.name)
            assert current.view is not None
            view = ViewRecord(**{**current.view.__dict__, **{k: v for k, v in self.view.__dict__.items() if v is not None}})
            view.version = current.view.version + 1
            view.created_ms = current.view.created_ms
            pointer = Pointer(VIEW, current.id, view)
        else:
            if existing is not None:
                what = "table" if existing.kind == TABLE else "view"
                raise ViewAlreadyExistsError(f"a {what} named {self.object_name!r} already exists")
            pointer = Pointer(VIEW, self.view_id, view)
        w.put(keys.obj(self.ns, self.name), pointer.encode())
        return summary("replace_view" if self.replace else self.kind, self.object_name, view_version=view.version)


@dataclass
class DropView(_NamedOp):
    kind: ClassVar[str] = "drop_view"

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Remove the view's name from the catalog; return its history summary.

        Raises:
            NoSuchViewError: no view of that name exists.
        """
        w.require_view(self.ns, self.name)
        w.delete(keys.obj(self.ns, self.name))
        return summary(self.kind, self.object_name)


# -- records ---------------------------------------------------------------------

@dataclass
class CheckRead(_NamedOp):
    """Writes nothing: fails the commit if rows a write was computed from changed since they were read.

    Staged into a durable transaction by a write whose query read table
    ``<ns>.<name>`` at some lakehouse version (a Spark CREATE TABLE AS
    SELECT, say), so its commit is serializable with every other commit:
    ``read_ids`` are the ids of the table's live files at that version,
    ``selected_ids`` those of them that may hold rows the read selected
    (``filter``; None is every row). Applied, it raises
    :class:`RetryableConflictError` when the table was dropped or replaced,
    a selected file is gone, or a file added since may hold selected rows.
    """

    kind: ClassVar[str] = "check_read"
    table_id: str
    read_ids: list[str]
    selected_ids: list[str]
    filter: pc.Expression | None = None
    # An iceberg table's metadata location when it was read: its files are in
    # its own manifests, so any commit to it since (a moved pointer) conflicts.
    metadata_location: str | None = None

    def apply(self, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
        """Check that the rows the read selected are unchanged; write nothing and return its history summary.

        Raises:
            RetryableConflictError: the table was dropped or replaced since it was
                read, a selected file is gone, or a file added since may hold
                selected rows.
            NoSuchTableError: the name still points to the table but its definition is gone.
        """
        pointer = w.pointer(self.ns, self.name)
        if pointer is None or pointer.kind != TABLE or pointer.id != self.table_id:
            raise RetryableConflictError(
                f"table {self.object_name!r} was dropped or replaced since it was read; nothing was committed: "
                "run the write again",
                ours=self.kind,
                object=self.object_name,
            )
        definition = _require_def(w, self.table_id, self.object_name)
        if definition.format == "iceberg":
            if definition.metadata_location != self.metadata_location:
                raise RetryableConflictError(
                    f"iceberg table {self.object_name!r} got a commit since it was read, so what was written from "
                    "it may depend on rows it never saw; nothing was committed: run the write again",
                    ours=self.kind,
                    object=self.object_name,
                )
            return summary(self.kind, self.object_name, table_id=self.table_id, files_checked=0)
        live = w.live_files(self.table_id)
        live_ids = {f.id for f in live}
        read = set(self.read_ids)
        gone = [i for i in self.selected_ids if i not in live_ids]
        added = prune([f for f in live if f.id not in read], definition.schema, self.filter)
        if gone or added:
            raise RetryableConflictError(
                f"table {self.object_name!r} changed since it was read: {len(gone)} data file(s) that may hold "
                f"rows the read selected were removed and {len(added)} were added, so what was written from "
                "them may depend on rows it never saw; nothing was committed: run the write again",
                ours=self.kind,
                object=self.object_name,
            )
        return summary(self.kind, self.object_name, table_id=self.table_id, files_checked=len(self.selected_ids))


_KINDS: dict[str, type[Op]] = {
    cls.kind: cls
    for cls in (
        CreateNamespace,
        DropNamespace,
        UpdateNamespaceProperties,
        CreateTable,
        DropTable,
        RenameTable,
        Append,
        Overwrite,
        Delete,
        Compact,
        UpdateSchema,
        UpdateProperties,
        CommitMetadata,
        CreateView,
        DropView,
        CheckRead,
    )
}


def _encode_fields(op: Op) -> dict[str, Any]:
    return {name: encode_value(getattr(op, name)) for name in op.__dataclass_fields__}


def from_record(record: dict[str, Any]) -> Op:
    """The op a :meth:`Op.to_record` dict describes.

    Raises:
        ValueError: ``record`` is not a dict, its ``kind`` names no operation,
            or its fields do not fit that operation.
    """
    if not isinstance(record, dict) or record.get("kind") not in _KINDS:
        raise ValueError(f"not a catalog operation record: {str(record)[:200]}")
    cls = _KINDS[record["kind"]]
    args = {k: decode_value(v) for k, v in record.items() if k != "kind"}
    try:
        return cls(**args)
    except TypeError as exc:
        raise ValueError(f"malformed {record['kind']} record: {exc}") from None
