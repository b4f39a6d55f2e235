"""A table handle: data operations, scans, schema and property changes.

A :class:`Table` is bound to the host it was loaded from (a
:class:`TableHost`): the live lakehouse (every write commits at once and
returns the new lakehouse version), a multi-table or durable transaction
(writes are applied to, or staged in, the transaction and become visible at
its commit; they return None), or a read-only past version (writes raise
:class:`~catalog.errors.ReadOnlyError`).

A table of format ``"iceberg"`` (created over the Iceberg REST API, its
metadata written by Iceberg clients) has the same reads and ``append``,
``overwrite`` and ``delete``, made by pyiceberg and committed as a pointer
swap through the same host (:mod:`catalog.iceberg_tables`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from catalog import file_columns
from catalog.arguments import checked
from catalog.access import CatalogReader
from catalog.context import LakeContext
from catalog.datafiles import DataFile, read_file, write_files
from catalog.errors import NoSuchTableError, UnreadableMetadataError
from catalog.lazy_module import LazyModule
from catalog.names import Namespace, join
from catalog.ops import Append, Delete, Op, Overwrite, UpdateProperties, UpdateSchema
from catalog.planning import matches, plan_files, plan_table
from catalog.predicates import check_expression
from catalog.records import ICEBERG, TableDef
from catalog.schema import SchemaChange, check_column_name, conform
from kvstore.objstore.base import ObjectStore
from kvstore.snapshot import Snapshot

if TYPE_CHECKING:
    from catalog import iceberg_tables
else:  # it imports pyiceberg (about 1 s), which only tables of that format need
    iceberg_tables = LazyModule("catalog.iceberg_tables")


class TableHost(Protocol):
    """What a :class:`Table`, and a :class:`~catalog.tree.LakeTree`, need of the session they read and write through.

    The live lakehouse (:class:`catalog.transactions.LiveHost`), a
    multi-table transaction, a past version and a durable transaction are
    each one; tables and trees know their host only through these names, so
    this module does not depend on the sessions.
    """

    objects: ObjectStore  # where the table's data files live
    target_file_bytes: int  # the size data files are cut to when written

    def reading(self) -> AbstractContextManager[CatalogReader]:
        """A catalog reader at the host's view."""

    def resolving(self) -> AbstractContextManager[CatalogReader]:
        """A reader for looking up an object to act on; a multi-table transaction does not
        record these reads as the caller's (each op re-checks what it needs when rebased)."""

    def submit(self, op: Op) -> int | None:
        """Commit ``op`` now (returns the version) or stage it in the open transaction (returns None)."""

    def check_writable(self) -> None:
        """Raise ``ReadOnlyError`` (or the host's own error) if the host takes no writes."""


def to_table(data: object) -> pa.Table:
    """Accept a Table, RecordBatch, RecordBatchReader or list of batches.

    Raises:
        TypeError: ``data`` is none of those.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, (list, tuple)) and data and all(isinstance(b, pa.RecordBatch) for b in data):
        return pa.Table.from_batches(list(data))
    raise TypeError(
        f"data must be a pyarrow Table, RecordBatch, RecordBatchReader or list of RecordBatch, not {type(data).__name__}"
    )


def _check_filter(expr: object, what: str = "filter") -> pc.Expression | None:
    if expr is None:
        return None
    if not isinstance(expr, pc.Expression):
        raise TypeError(f"{what} must be a pyarrow.compute.Expression (e.g. pc.field('x') > 1), not {type(expr).__name__}")
    return expr


class Table:
    """One table as of the moment it was loaded (its definition is a snapshot)."""

    def __init__(
        self, host: TableHost, ns: Namespace, name: str, definition: TableDef, properties: dict[str, str]
    ) -> None:
        self._host = host
        self.namespace = ns
        self.short_name = name
        self._def = definition
        self._properties = properties
        self._iceberg_schema: pa.Schema | None = None  # an iceberg table's, read from its metadata on first use

    def __repr__(self) -> str:
        return f"Table({self.name!r}, id={self.id}, format={self.format})"

    # -- what it is ------------------------------------------------------------

    @property
    def name(self) -> str:
        """The table's full dotted name (``namespace.table``)."""
        return join((*self.namespace, self.short_name))

    @property
    def id(self) -> str:
        """The table's id, which stays the same across renames."""
        return self._def.id

    @property
    def format(self) -> str:
        """The table's format: ``"parquet"`` (native) or ``"iceberg"``."""
        return self._def.format

    @property
    def location(self) -> str:
        """Where the table's data lives: ``data/<id>`` in the lakehouse for a native table, the given location for an iceberg one."""
        return self._def.location

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema, each column carrying its field id.

        An iceberg table's is its Iceberg metadata's current schema (as of the
        metadata location the table was loaded with).
        """
        if self._def.format == ICEBERG:
            if self._iceberg_schema is None:  # the handle is a snapshot: its schema never changes
                self._iceberg_schema = iceberg_tables.arrow_schema(self._iceberg()[0].metadata)
            return self._iceberg_schema
        assert self._def.schema is not None  # every native table has one
        return self._def.schema

    @property
    def partition_by(self) -> list[str]:
        """The names of the table's partition columns, in order."""
        return self._def.partition_by

    @property
    def properties(self) -> dict[str, str]:
        """The table's properties as of when it was loaded (a copy)."""
        return dict(self._properties)

    @property
    def metadata_location(self) -> str | None:
        """Where the table's Iceberg ``metadata.json`` is (an absolute URI any Iceberg engine reads).

        An iceberg table's metadata pointer; for a native table, its
        metadata derived for the version its host shows (a past version's,
        or the live lakehouse's newest), written on first ask
        (:mod:`catalog.iceberg_derived`). None for a native table in a
        transaction that has not committed: it has no version yet.

        Raises:
            ValueError: a column type with no Iceberg equivalent.
            SnapshotTooOldError: the table's version is past retention.
        """
        if self._def.format != "parquet":
            return self._def.metadata_location
        context = getattr(self._host, "context", None)
        if not isinstance(context, LakeContext):
            return None
        with self._host.reading() as reader:
            # The live lakehouse and a past version read a committed snapshot;
            # a transaction reads its own uncommitted state, which has no version.
            version = reader.kv.version if isinstance(reader.kv, Snapshot) else None
        if version is None:
            return None
        # Imported on first use: pyiceberg costs ~0.5 s to import, which every
        # short-lived process that never asks (a Spark commit worker) would pay.
        from catalog import iceberg_derived

        return iceberg_derived.derive_table(context, self.id, int(version)).metadata_location

    @property
    def schema_version(self) -> int:
        """The version of the table's schema, counting its committed schema changes."""
        return self._def.schema_version

    # -- writes ------------------------------------------------------------------

    def _require_native(self, what: str) -> None:
        if self._def.format != "parquet":
            raise ValueError(
                f"table {self.name!r} has format {self._def.format!r}: {what} is for native parquet tables "
                "(an iceberg table takes append, overwrite and delete, and its schema changes through pyiceberg)"
            )

    def _iceberg(self) -> Any:
        """pyiceberg's view of this iceberg table at its loaded metadata location, and its commit seam."""
        assert self._def.metadata_location is not None  # every iceberg table has a pointer
        try:
            return iceberg_tables.load(self._host, self.name, self.id, self._def.metadata_location)
        except UnreadableMetadataError as exc:
            raise UnreadableMetadataError(f"iceberg table {self.name!r}: {exc}") from None

    def _iceberg_writable(self) -> str:
        """The metadata location a write starts from: the table's current one, not the handle's.

        A write planned on the metadata this handle was loaded with would miss
        rows committed since (its own appends included): a delete of them would
        find nothing, commit nothing, and so lose no race to correct it.
        Refuses a table another catalog owns.
        """
        iceberg_tables.check_writable(self.name, self._properties)
        with self._host.reading() as reader:
            current = reader.table_def(self.id)
        if current is None or current.metadata_location is None:
            raise NoSuchTableError(f"table {self.name!r} was dropped after it was loaded")
        try:  # read (and cached) here: unreadable metadata names the table
            table = iceberg_tables.load(self._host, self.name, self.id, current.metadata_location)[0]
        except UnreadableMetadataError as exc:
            raise UnreadableMetadataError(f"iceberg table {self.name!r}: {exc}") from None
        return str(table.metadata_location)

    def _conformed(self, data: object) -> pa.Table:
        self._require_native("write_files")
        table = to_table(data)
        return conform(table, self.schema)

    @checked
    def write_files(self, data: object) -> list[DataFile]:
        """Write ``data`` as Parquet files under the table's location; commit nothing.

        Raises:
            TypeError: ``data`` is not Arrow data.
            ValueError: the table is not a native parquet table.
            SchemaMismatchError: ``data`` does not fit the table's schema.
            ReadOnlyError: the table was loaded from a past version (or the host's own
                error: ``TransactionClosedError`` for an ended transaction).
        """
        self._host.check_writable()
        return self._write(data)

    def _write(self, data: object) -> list[DataFile]:
        table = self._conformed(data)
        return write_files(
            self._host.objects, self.location, table, self.schema, self.partition_by, self._host.target_file_bytes
        )

    @checked
    def append(self, data: object) -> int | None:
        """Add rows in one commit; returns the new lakehouse version (None inside a transaction).

        An iceberg table's rows are written by pyiceberg's writer and committed
        as a fast append (see :mod:`catalog.iceberg_tables`).

        Raises:
            TypeError: ``data`` is not Arrow data.
            ValueError: an iceberg table registered from another catalog, or rows that do
                not fit an iceberg table's schema (pyiceberg's check names the column).
            UnreadableMetadataError: an iceberg table's metadata file cannot be read.
            SchemaMismatchError: a column is missing, extra, or of another type.
            ReadOnlyError: the table was loaded from a past version (or the host's own
                error: ``TransactionClosedError`` for an ended transaction).
            IncompatibleConflictError: the table was dropped or its schema
                changed incompatibly meanwhile.
            LockConflictError: a durable transaction's lock forbids it.
        """
        self._host.check_writable()
        if self._def.format == ICEBERG:
            location = self._iceberg_writable()
            return iceberg_tables.append(self._host, self.name, self.id, location, to_table(data))
        files = self._write(data)
        return self._host.submit(Append(table=self.name, table_id=self.id, files=files, schema=self.schema))

    @checked
    def commit_files(
        self,
        added: list[DataFile],
        mode: str = "append",
        filter: object = None,  # noqa: A002
        read_files: list[DataFile] | None = None,
        replaced: list[DataFile] | None = None,
    ) -> int | None:
        """Commit files written by :meth:`write_files` (maybe in other processes).

        ``mode="append"`` adds them; ``mode="overwrite"`` replaces every live
        file, or with ``filter`` only the rows matching it, by them.

        ``mode="replace"`` is a copy-on-write rewrite: it removes exactly the
        ``replaced`` files (which the new files hold every row of, changed or
        not) and adds ``added``. ``filter`` is then the rows the rewrite read:
        with ``read_files``, a file committed after the read that may hold
        such rows is a ``RetryableConflictError``, as is a replaced file that
        is no longer live.

        ``read_files`` (overwrite only) makes it a read-modify-write: the
        table's live files when the new data was read, e.g. ``files()`` of the
        version it was read at. If any other file is live at commit (an
        append, overwrite or compaction committed in between, that may hold
        rows matching ``filter``), it raises ``RetryableConflictError``
        instead of silently replacing rows the new data never saw.

        Raises:
            TypeError: an argument of the wrong type (``added``, ``read_files`` or
                ``replaced`` not a list of DataFile, a filter not an expression).
            ValueError: the table is not a native parquet table, an unknown
                ``mode``, a ``filter``/``read_files``/``replaced`` that does not go with it, or a
                filter naming an unknown column.
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`). Also when ``read_files`` or ``replaced`` no longer
                describe the live files.
        """
        self._host.check_writable()
        self._require_native("commit_files")
        if not isinstance(added, (list, tuple)) or not all(isinstance(f, DataFile) for f in added):
            raise TypeError("added must be a list of DataFile")
        if read_files is not None and (
            not isinstance(read_files, (list, tuple)) or not all(isinstance(f, DataFile) for f in read_files)
        ):
            raise TypeError("read_files must be a list of DataFile (e.g. table.files() of the version read)")
        if replaced is not None and (
            not isinstance(replaced, (list, tuple)) or not all(isinstance(f, DataFile) for f in replaced)
        ):
            raise TypeError("replaced must be a list of DataFile (the files the rewrite read)")
        if (replaced is None) != (mode != "replace"):
            raise ValueError("replaced goes with mode='replace', and only there")
        expr = self._filter(filter)
        if mode == "append":
            if expr is not None:
                raise ValueError("filter only goes with mode='overwrite'")
            if read_files is not None:
                raise ValueError("read_files only goes with mode='overwrite' (an append replaces nothing)")
            op: Any = Append(table=self.name, table_id=self.id, files=list(added), schema=self.schema)
        elif mode in ("overwrite", "replace"):
            op = Overwrite(
                table=self.name,
                table_id=self.id,
                filter=expr,
                files=list(added),
                files_schema=self.schema,
                read_files=None if read_files is None else [f.id for f in read_files],
                replaced=None if replaced is None else [f.id for f in replaced],
            )
        else:
            raise ValueError(f"mode must be 'append', 'overwrite' or 'replace', not {mode!r}")
        return self._host.submit(op)

    @checked
    def append_data_files(self, added: list[Any]) -> int | None:
        """Append Iceberg data files (pyiceberg ``DataFile``, written e.g. by Spark tasks) to this iceberg table, in one commit.

        Returns the new lakehouse version (None inside a transaction).

        Raises:
            TypeError: ``added`` is not a list of pyiceberg DataFile.
            ValueError: the table is not an iceberg table, or another catalog owns it (registered).
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to concurrent commits (see
                :func:`catalog.iceberg_tables.commit_retrying`).
        """
        from pyiceberg.manifest import DataFile as IcebergDataFile

        self._host.check_writable()
        if self._def.format != ICEBERG:
            raise ValueError(f"table {self.name!r} is a native parquet table: commit its files with commit_files")
        if not all(isinstance(f, IcebergDataFile) for f in added):
            raise TypeError(f"table {self.name!r}: added must be a list of pyiceberg DataFile")
        return iceberg_tables.append_files(self._host, self.name, self.id, self._iceberg_writable(), list(added))

    @checked
    def iceberg_table(self) -> Any:
        """pyiceberg's ``Table`` of this iceberg table, at the metadata location it was loaded with.

        Its reads are pyiceberg's (branches, tags, ``inspect``); a commit
        through it is a lakehouse commit of this table's host, as the table's
        own writes are.

        Raises:
            ValueError: the table is a native parquet table.
        """
        if self._def.format != ICEBERG:
            raise ValueError(f"table {self.name!r} is a native parquet table: it has no client-written Iceberg metadata")
        return self._iceberg()[0]

    @checked
    def overwrite(self, data: object, filter: object = None) -> int | None:  # noqa: A002 - the API's word
        """Replace every row (or only the rows matching ``filter``) with ``data``, in one commit.

        With a filter, every new row must match it (``ValueError`` otherwise),
        so the table afterwards holds exactly the old rows not matching plus
        ``data``.

        Raises:
            TypeError: ``data`` is not Arrow data, or ``filter`` not an expression.
            ValueError: a new row does not match ``filter``, or the filter names an unknown
                column; for an iceberg table also a filter with no exact Iceberg form, or
                a table registered from another catalog.
            SchemaMismatchError: ``data`` does not fit the table's schema.
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        expr = self._filter(filter)
        self._host.check_writable()  # before any file is written: a refused write leaves none behind
        if self._def.format == ICEBERG:
            location = self._iceberg_writable()
            new = to_table(data)
            if expr is not None and new.num_rows and (pc.sum(matches(new, expr)).as_py() or 0) != new.num_rows:
                raise ValueError(f"overwrite with a filter: some new rows do not match the filter {expr}")
            return iceberg_tables.overwrite(self._host, self.name, self.id, location, new, expr)
        table = self._conformed(data)
        if expr is not None and table.num_rows:
            hit = matches(table, expr)
            misses = table.num_rows - (pc.sum(hit).as_py() or 0)
            if misses:
                raise ValueError(f"overwrite with a filter: {misses} new row(s) do not match the filter {expr}")
        files = write_files(
            self._host.objects, self.location, table, self.schema, self.partition_by, self._host.target_file_bytes
        )
        return self.commit_files(files, mode="overwrite", filter=expr)

    @checked
    def delete(self, filter: object) -> int | None:  # noqa: A002
        """Delete the rows matching ``filter``: files holding any are rewritten without them.

        Raises:
            TypeError: ``filter`` is not an expression.
            ValueError: ``filter`` is None, or it names an unknown column; for an iceberg
                table (deleted by pyiceberg's copy-on-write delete) also a filter with no
                exact Iceberg form, or a table registered from another catalog.
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        self._host.check_writable()
        expr = self._filter(filter)
        if expr is None:
            raise ValueError("delete needs a filter (to remove every row, overwrite with an empty table)")
        if self._def.format == ICEBERG:
            return iceberg_tables.delete(self._host, self.name, self.id, self._iceberg_writable(), expr)
        return self._host.submit(Delete(table=self.name, table_id=self.id, filter=expr))

    @checked
    def update_properties(self, updates: dict[str, str] | None = None, removals: list[str] | None = None) -> int | None:
        """Set and remove table properties in one commit; returns the new lakehouse version (None inside a transaction).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed property name, or a property both updated and removed.
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        from catalog.keys import check_properties, check_property_name

        ups = check_properties(updates, "updates")
        rems = [check_property_name(r, "removals") for r in (removals or [])]
        return self._host.submit(UpdateProperties(table=self.name, table_id=self.id, updates=ups, removals=rems))

    def _filter(self, expr: object) -> pc.Expression | None:
        """``expr`` as a filter on this table's rows: checked for type, columns and their types."""
        checked_expr = _check_filter(expr)
        if checked_expr is not None:
            check_expression(checked_expr, self.schema, f"filter on table {self.name!r}")
        return checked_expr

    @checked
    def update_schema(self) -> UpdateSchemaBuilder:
        """Start a schema change: ``.add_column(...).rename_column(...).commit()``."""
        self._require_native("update_schema")
        return UpdateSchemaBuilder(self)

    # -- reads -------------------------------------------------------------------

    @checked
    def files(self, filter: object = None) -> list[DataFile]:  # noqa: A002
        """The live data files a scan with ``filter`` would read (pruned by statistics).

        For an iceberg table, the data files of pyiceberg's scan plan at the
        loaded snapshot: ``path`` is the file's full URI and there are no
        statistics (they stay in the Iceberg manifests).
        """
        expr = self._filter(filter)
        if self._def.format == ICEBERG:
            return [iceberg_tables.as_data_file(task) for task in iceberg_tables.plan(self._iceberg()[0], expr)]
        with self._host.reading() as r:
            if r.recorded is not None:
                r.table_def(self.id)  # in a transaction, reading the data depends on the table still being there
            return plan_files(r, self.id, self.schema, self.partition_by, expr)

    @checked
    def files_table(self, filter: object = None) -> pa.Table:  # noqa: A002
        """The files :meth:`files` lists, as an Arrow table with one row per file, in no set order.

        Its columns (:data:`catalog.file_columns.SCHEMA`) are the entry's
        fields; ``partition``, ``stats`` and ``column_ids`` are JSON text
        (``catalog.file_columns.to_entries`` turns rows into ``DataFile``).
        With no filter, a native table's plan reads one packed value per
        commit's file group, not one entry per file, and the process keeps
        them unpacked (a later plan reads only the groups' summaries): what
        a caller that needs every file of a large table takes.
        """
        expr = self._filter(filter)
        if self._def.format == ICEBERG:
            return file_columns.from_entries(self.files(filter))
        with self._host.reading() as r:
            if r.recorded is not None:
                r.table_def(self.id)  # in a transaction, reading the data depends on the table still being there
            return plan_table(r, self.id, self.schema, self.partition_by, expr)

    @checked
    def scan(self, filter: object = None, columns: list[str] | None = None, limit: int | None = None) -> Scan:  # noqa: A002
        """A scan of this table's rows as of the session's version.

        Raises:
            TypeError: ``filter`` is not an expression, or ``columns`` not a list of str.
            ValueError: ``columns`` names an unknown column, ``limit`` is negative, or the
                filter names an unknown column.
        """
        expr = self._filter(filter)
        if columns is not None:
            if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
                raise TypeError("columns must be a list of column names")
            missing = [c for c in columns if c not in self.schema.names]
            if missing:
                raise ValueError(f"no column {missing[0]!r} in table {self.name!r} (columns: {', '.join(self.schema.names)})")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        return Scan(self, expr, list(columns) if columns is not None else None, limit)


class Scan:
    """A planned scan: ``files()`` is the plan, ``to_batches()``/``to_arrow()`` read it."""

    def __init__(self, table: Table, expr: pc.Expression | None, columns: list[str] | None, limit: int | None) -> None:
        self.table = table
        self.filter = expr
        self.columns = columns
        self.limit = limit
        self._files: list[DataFile] | None = None

    @checked
    def files(self) -> list[DataFile]:
        """The data files the scan reads: its plan, made on the first call and kept."""
        if self._files is None:
            self._files = self.table.files(self.filter)
        return self._files

    @checked
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The matching rows as record batches, file by file, holding only the selected columns and at most ``limit`` rows."""
        schema = self.table.schema
        out_schema = pa.schema([schema.field(c) for c in self.columns]) if self.columns is not None else schema
        if self.table.format == ICEBERG:
            yield from iceberg_tables.scan_batches(self.table._iceberg()[0], self.filter, self.columns, self.limit, out_schema)
            return
        remaining = self.limit
        objects = self.table._host.objects
        for entry in self.files():
            if remaining == 0:
                return
            data = read_file(objects, entry, schema, table=self.table.name)
            if self.filter is not None:
                data = data.filter(self.filter)
            if self.columns is not None:
                data = data.select(self.columns)
            if remaining is not None:
                data = data.slice(0, remaining)
                remaining -= data.num_rows
            for batch in data.to_batches():
                if batch.num_rows:
                    yield batch.cast(out_schema) if batch.schema != out_schema else batch

    @checked
    def to_arrow(self) -> pa.Table:
        """The matching rows as one Arrow table (see :meth:`to_batches`)."""
        schema = self.table.schema
        out_schema = pa.schema([schema.field(c) for c in self.columns]) if self.columns is not None else schema
        return pa.Table.from_batches(list(self.to_batches()), schema=out_schema)

    @checked
    def count(self) -> int:
        """The number of matching rows (it reads them)."""
        return sum(b.num_rows for b in self.to_batches())


class UpdateSchemaBuilder:
    """Collects schema changes; :meth:`commit` applies them in one commit."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._change = SchemaChange()

    @checked
    def add_column(self, name: str, type: pa.DataType, nullable: bool = True) -> UpdateSchemaBuilder:  # noqa: A002
        """Add a column ``name`` of ``type`` at the end of the schema; returns the builder.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad column name. (A column that exists or is not nullable
                fails at :meth:`commit`.)
        """
        check_column_name(name, "add_column")
        if not isinstance(type, pa.DataType):
            raise TypeError(f"add_column: type must be a pyarrow.DataType, not {type!r}")
        self._change.steps.append(("add", (name, type, bool(nullable))))
        return self

    @checked
    def rename_column(self, old: str, new: str) -> UpdateSchemaBuilder:
        """Rename column ``old`` to ``new``; returns the builder.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad new name. (A missing ``old`` or an existing ``new``
                fails at :meth:`commit`.)
        """
        check_column_name(new, "rename_column")
        self._change.steps.append(("rename", (old, new)))
        return self

    @checked
    def drop_column(self, name: str) -> UpdateSchemaBuilder:
        """Drop column ``name``; returns the builder (a missing, partition or last column fails at :meth:`commit`).

        Raises:
            TypeError: an argument of the wrong type.
        """
        self._change.steps.append(("drop", (name,)))
        return self

    @checked
    def widen(self, name: str, type: pa.DataType) -> UpdateSchemaBuilder:  # noqa: A002
        """Change column ``name`` to the wider ``type``; returns the builder (a lossy change fails at :meth:`commit`).

        Raises:
            TypeError: an argument of the wrong type.
        """
        if not isinstance(type, pa.DataType):
            raise TypeError(f"widen: type must be a pyarrow.DataType, not {type!r}")
        self._change.steps.append(("widen", (name, type)))
        return self

    @checked
    def set_comment(self, name: str, comment: str | None) -> UpdateSchemaBuilder:
        """Set column ``name``'s comment (``None`` removes it); Spark shows it in ``DESCRIBE``.

        Raises:
            TypeError: an argument of the wrong type.
        """
        self._change.steps.append(("comment", (name, comment)))
        return self

    @checked
    def commit(self) -> int | None:
        """Apply the collected changes in one commit; returns the new lakehouse version (None inside a transaction).

        Raises:
            ValueError: a change that cannot apply to the current schema (see
                :meth:`catalog.schema.SchemaChange.apply`).
            ReadOnlyError: the table was loaded from a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        t = self._table
        # Fail early, with the caller's stack, on a change that cannot apply.
        self._change.apply(t.schema, t._def.last_field_id, t._def.partition_ids)
        return t._host.submit(
            UpdateSchema(table=t.name, table_id=t.id, change=self._change, base_version=t._def.schema_version)
        )

