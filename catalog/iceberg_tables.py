"""Format-'iceberg' tables through pyiceberg: their rows read and written by pyiceberg, their commits lakehouse pointer swaps.

An Iceberg table created over the REST API keeps the Iceberg metadata its
clients write (snapshots, branches, tags, delete files, schema history); the
lakehouse holds only its metadata location. The Python API and the Spark
plugin use it through pyiceberg's own ``Table``:

* reads plan with pyiceberg's scan (manifests, partition and column-statistics
  pruning, position and equality deletes) and read with its Arrow reader;
* writes run pyiceberg's transaction API (``fast_append``, ``overwrite``,
  ``delete``); its commit goes to :class:`HostCatalog`, which writes the new
  metadata file and swaps the table's metadata location with
  :class:`~catalog.ops.CommitMetadata` through the table's host: the same op
  and conflict class as a REST commit, one lakehouse version, all or nothing
  inside a multi-table transaction.

A write that loses the pointer race on the live lakehouse is redone from the
winner's metadata (:func:`commit_retrying`): the new state is re-read, the
pyiceberg operation runs again on it, so nothing another writer committed is
lost and nothing is committed twice.

A table adopted with REST ``registerTable`` carries :data:`REGISTERED_PROPERTY`:
another catalog owns its metadata, so it is read here, never written.

A format version 3 table (made by an Iceberg engine over REST) is read here
as any other: pyiceberg 0.12 plans and reads it with its columns' default
values and deletion vectors. It is not written here: pyiceberg 0.12 writes
no version 3 manifests, so a write is refused before anything is written
(:func:`check_format_writable`).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Callable, Final, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import expressions
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table import CommitTableResponse
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import update_table_metadata

from catalog.datafiles import DataFile
from catalog.errors import NoSuchTableError, RetryableConflictError, StaleObservationError, UnreadableMetadataError
from catalog.ops import CommitMetadata
from catalog.records import ICEBERG as ICEBERG  # re-exported: callers name it through this module
from catalog.predicates import And, Compare, Const, IsIn, IsNull, Not, NotNull, Or, Pred, StartsWith, from_expression
from catalog.schema import with_field_id
from kvstore.objstore.base import ObjectStore

# pyiceberg's expression classes take positional arguments at run time, but
# their pydantic-derived signatures hide that from mypy: built through Any.
ice: Any = expressions

# Set (to "true") on a table adopted with REST registerTable: its metadata
# belongs to another catalog, whose own commits this lakehouse never sees.
REGISTERED_PROPERTY: Final = "lakekv.registered"
# Lost pointer races redone before giving up: each redo starts from the
# winner's state, so only sustained contention on one table exhausts this.
MAX_COMMIT_ATTEMPTS: Final = 16
_LOST_RACE: Final = (RetryableConflictError, StaleObservationError, CommitFailedException)
# The newest table format version pyiceberg 0.12 writes (it reads version 3 too).
WRITABLE_FORMAT_VERSION: Final = 2
# Parsed metadata files kept in memory: a metadata file never changes once written.
_METADATA_CACHE_ENTRIES: Final = 128
_metadata_cache: OrderedDict[str, TableMetadata] = OrderedDict()
_metadata_lock = threading.Lock()


# pyiceberg's FileIO property for each S3 option a lakehouse's store is opened with
# (kvstore.objstore.factory: given, from the store URL's query, or from the AWS_* variables).
_S3_PROPERTIES: Final = {
    "endpoint_url": "s3.endpoint", "key": "s3.access-key-id", "secret": "s3.secret-access-key", "token": "s3.session-token",
}


def io_properties(objects: ObjectStore) -> dict[str, str]:
    """pyiceberg FileIO properties that reach S3 as the lakehouse's object store ``objects`` does.

    A REST-made table's files are in the warehouse, which may lie outside the
    lakehouse's root but is on the storage the server reaches with the same
    endpoint and credentials. Without these, pyiceberg's FileIO would go to
    AWS's default endpoint with whatever credentials it finds itself.
    Empty for a store that is not on S3.
    """
    store: Any = objects
    while hasattr(store, "inner"):  # ForwardingStore, LmdbCommitStore: the store they wrap
        store = store.inner
    if not str(getattr(store, "url", "")).startswith("s3://"):
        return {}
    # The s3fs filesystem's constructor arguments (fsspec's public ``storage_options``).
    options = dict(getattr(store.fs, "storage_options", {}))
    out = {prop: str(options[name]) for name, prop in _S3_PROPERTIES.items() if options.get(name)}
    region = (options.get("client_kwargs") or {}).get("region_name")
    if region:
        out["s3.region"] = str(region)
    return out


def file_io(location: str, properties: Mapping[str, str] | None = None) -> FileIO:
    """pyiceberg's FileIO for a table location or metadata file (by its scheme), with :func:`io_properties`."""
    return load_file_io(properties=dict(properties or {}), location=location)


def read_metadata(location: str, properties: Mapping[str, str] | None = None) -> TableMetadata:
    """The parsed metadata file at ``location`` (cached: metadata files are immutable).

    Raises:
        UnreadableMetadataError: no file there, or not Iceberg table metadata.
    """
    with _metadata_lock:
        cached = _metadata_cache.get(location)
        if cached is not None:
            _metadata_cache.move_to_end(location)
            return cached
    try:
        metadata = FromInputFile.table_metadata(file_io(location, properties).new_input(location))
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise UnreadableMetadataError(f"cannot read Iceberg metadata at {location!r}: {exc}") from None
    _remember(location, metadata)
    return metadata


def _remember(location: str, metadata: TableMetadata) -> None:
    with _metadata_lock:
        _metadata_cache[location] = metadata
        while len(_metadata_cache) > _METADATA_CACHE_ENTRIES:
            _metadata_cache.popitem(last=False)


def next_metadata_location(metadata: TableMetadata, previous: str) -> str:
    """``<location>/metadata/<n+1>-<uuid>.metadata.json``, numbered after ``previous`` as Iceberg names them."""
    head = previous.rsplit("/", 1)[-1].split("-", 1)[0]
    number = int(head) + 1 if head.isdigit() else 0
    directory = metadata.properties.get("write.metadata.path") or f"{metadata.location.rstrip('/')}/metadata"
    return f"{directory.rstrip('/')}/{number:05d}-{uuid.uuid4()}.metadata.json"


def arrow_schema(metadata: TableMetadata) -> pa.Schema:
    """The table's current schema as Arrow, each top-level column carrying its Iceberg field id.

    Strings, binaries and lists are the plain (32-bit offset) Arrow types, as
    native tables have them.
    """
    schema = metadata.schema()
    plain = schema_to_pyarrow(schema, include_field_ids=False)
    fields = [
        with_field_id(pa.field(f.name, _plain(f.type), f.nullable), column.field_id)
        for f, column in zip(plain, schema.fields)
    ]
    return pa.schema(fields)


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _plain(t.value_type), t.value_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), pa.field(t.item_field.name, _plain(t.item_type), t.item_field.nullable))
    return t


# -- filters: a pyarrow expression as an Iceberg expression -----------------------------

_COMPARE: Final[dict[str, Callable[[str, Any], expressions.BooleanExpression]]] = {
    "==": ice.EqualTo, "!=": ice.NotEqualTo, "<": ice.LessThan, "<=": ice.LessThanOrEqual,
    ">": ice.GreaterThan, ">=": ice.GreaterThanOrEqual,
}
_LITERAL_TYPES: Final = (bool, int, float, str, Decimal, bytes)


def _literal(value: Any) -> bool:
    """Whether pyiceberg takes ``value`` as a literal with the same meaning (a timestamp's zone may differ: not taken)."""
    return isinstance(value, _LITERAL_TYPES) or (isinstance(value, date) and not isinstance(value, datetime))


def iceberg_filter(expr: pc.Expression | None, exact: bool) -> expressions.BooleanExpression | None:
    """``expr`` as an Iceberg row filter (None: no filter).

    With ``exact``, None also when some part has no Iceberg form (the caller
    must then refuse: a delete by it would delete other rows). Without, the
    parts that have none are dropped where that only widens the filter (for
    planning; the caller applies ``expr`` to the rows read).
    """
    if expr is None:
        return expressions.AlwaysTrue()
    return cast("expressions.BooleanExpression | None", _convert(from_expression(expr), exact, negated=False))


def _convert(pred: Pred, exact: bool, negated: bool) -> Any:
    """``pred`` as a pyiceberg ``BooleanExpression``, or None (see :func:`iceberg_filter`)."""
    if isinstance(pred, Const):
        if pred.value is None:
            return None
        return ice.AlwaysTrue() if pred.value else ice.AlwaysFalse()
    if isinstance(pred, Compare):
        value = pred.value.as_py()
        if not _literal(value):
            return None
        return _COMPARE[pred.op](pred.column, value)
    if isinstance(pred, IsIn):
        values = [v for v in pred.values.to_pylist() if v is not None]
        if not all(_literal(v) for v in values) or len(values) != len(pred.values):
            return None
        return ice.In(pred.column, values) if values else ice.AlwaysFalse()
    if isinstance(pred, IsNull):
        return ice.IsNull(pred.column)
    if isinstance(pred, NotNull):
        return ice.NotNull(pred.column)
    if isinstance(pred, StartsWith):
        return ice.StartsWith(pred.column, pred.prefix)
    if isinstance(pred, (And, Or)):
        parts = [_convert(p, exact, negated) for p in pred.children]
        widening = isinstance(pred, And) != negated  # dropping an AND's part widens it, unless negated
        kept = [p for p in parts if p is not None]
        if len(kept) != len(parts) and (exact or not widening):
            return None
        if not kept:
            return None
        joined = kept[0]
        for part in kept[1:]:
            joined = ice.And(joined, part) if isinstance(pred, And) else ice.Or(joined, part)
        return joined
    if isinstance(pred, Not):
        inner = _convert(pred.child, exact, not negated)
        return None if inner is None else ice.Not(inner)
    return None


# -- the pyiceberg view of a table ------------------------------------------------------


class HostCatalog(NoopCatalog):
    """pyiceberg's catalog seam for ONE lakehouse table: a commit is a pointer swap through its host.

    Only :meth:`commit_table` and :meth:`load_table` are served (pyiceberg's
    ``Table`` calls nothing else on a commit); every other catalog method is ``NoopCatalog``'s
    ``NotImplementedError``: names, namespaces and views go through the
    lakehouse's own API.
    """

    def __init__(self, host: Any, name: str, table_id: str) -> None:
        super().__init__("lakekv")
        self._host = host
        self._name = name
        self._table_id = table_id
        self.version: int | None = None  # the lakehouse version of the last commit (None: staged)

    def load_table(self, identifier: str | tuple[str, ...]) -> IcebergTable:
        """The table's newest state as the host sees it.

        pyiceberg asks for it when a change turned out to write nothing (a
        delete that matched no row): it refreshes to check the change against
        what was committed meanwhile, instead of committing.

        Raises:
            NoSuchTableError: the table was dropped.
        """
        with self._host.reading() as reader:
            definition = reader.table_def(self._table_id)
        if definition is None or definition.metadata_location is None:
            raise NoSuchTableError(f"table {self._name!r} was dropped while it was being written")
        location = definition.metadata_location
        properties = io_properties(self._host.objects)
        return IcebergTable(tuple(self._name.split(".")), read_metadata(location, properties), location,
                            file_io(location, properties), self)

    def commit_table(self, table: IcebergTable, requirements: tuple[Any, ...], updates: tuple[Any, ...]) -> CommitTableResponse:
        """Check ``requirements`` on the metadata the change was built on, write the new metadata file, swap the pointer.

        Raises:
            CommitFailedException: a requirement does not hold.
            RetryableConflictError: the pointer moved since the table was loaded.
            IncompatibleConflictError: the table was dropped meanwhile.
        """
        base, previous = table.metadata, table.metadata_location
        for requirement in requirements:
            requirement.validate(base)
        metadata = update_table_metadata(base_metadata=base, updates=updates, metadata_location=previous)
        location = next_metadata_location(metadata, previous)
        io = table.io  # the host's storage options (see load)
        ToOutputFile.table_metadata(metadata, io.new_output(location))
        try:
            self.version = self._host.submit(
                CommitMetadata(table=self._name, table_id=self._table_id, new_location=location, expected=previous)
            )
        except BaseException:
            io.delete(location)  # never published: nobody can have read it
            raise
        _remember(location, metadata)
        return CommitTableResponse.model_construct(metadata=metadata, metadata_location=location)


def load(host: Any, name: str, table_id: str, metadata_location: str) -> tuple[IcebergTable, HostCatalog]:
    """pyiceberg's ``Table`` for lakehouse table ``name`` at ``metadata_location``, committing through ``host``.

    Its FileIO reaches storage as the host's object store does
    (:func:`io_properties`; ``table.io.properties`` carries them to Spark's tasks).
    """
    catalog = HostCatalog(host, name, table_id)
    identifier = tuple(name.split("."))
    properties = io_properties(host.objects)
    table = IcebergTable(identifier, read_metadata(metadata_location, properties), metadata_location,
                         file_io(metadata_location, properties), catalog)
    return table, catalog


def read_only(metadata_location: str, properties: Mapping[str, str] | None = None) -> IcebergTable:
    """pyiceberg's ``Table`` at ``metadata_location`` for reading only (a Spark read task's: it commits nothing).

    ``properties``: the FileIO properties of the table it was planned from (:func:`io_properties`).
    """
    return IcebergTable(("lakekv", "read"), read_metadata(metadata_location, properties), metadata_location,
                        file_io(metadata_location, properties), NoopCatalog("lakekv"))


def check_writable(name: str, properties: dict[str, str]) -> None:
    """Refuse a write to a table another catalog owns (registered over REST).

    Raises:
        ValueError: naming the table.
    """
    if properties.get(REGISTERED_PROPERTY) == "true":
        raise ValueError(
            f"table {name!r} was registered from another catalog (REST registerTable), which owns its metadata: "
            "it is read-only here; write it through that catalog"
        )


def check_format_writable(name: str, metadata: TableMetadata) -> None:
    """Refuse a write to a table of a format version pyiceberg does not write.

    Raises:
        ValueError: naming the table and its format version.
    """
    if metadata.format_version > WRITABLE_FORMAT_VERSION:
        raise ValueError(
            f"table {name!r} is an Iceberg format-version {metadata.format_version} table: the Python API and Spark read it "
            f"but write only format versions up to {WRITABLE_FORMAT_VERSION} (pyiceberg 0.12 writes no version "
            f"{metadata.format_version} manifests); write it with an Iceberg engine through the REST API"
        )


def commit_retrying(host: Any, name: str, table_id: str, metadata_location: str, change: Callable[[IcebergTable], None]) -> int | None:
    """Run ``change`` (a pyiceberg write that commits) on the table; on a lost pointer race, redo it on the winner's state.

    Only the live lakehouse redoes (a transaction's or a durable
    transaction's view does not move: its conflict surfaces at its commit).
    Returns the lakehouse version of the commit (None when staged).

    Raises:
        RetryableConflictError: lost :data:`MAX_COMMIT_ATTEMPTS` races in a row,
            or a lost race in a transaction.
        IncompatibleConflictError: the table was dropped meanwhile.
        CommitFailedException: the change's own requirements fail on the new state.
    """
    from catalog.transactions import LiveHost  # the sessions build on tables, not the reverse

    live = isinstance(host, LiveHost)
    location = metadata_location
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        if attempt:
            host.context.store.refresh()
            with host.reading() as r:
                definition = r.table_def(table_id)
            if definition is None or definition.metadata_location is None:
                raise NoSuchTableError(f"table {name!r} was dropped while it was being written")
            location = definition.metadata_location
        table, catalog = load(host, name, table_id, location)
        check_format_writable(name, table.metadata)
        try:
            change(table)
        except _LOST_RACE:
            if not live:
                raise
            continue
        return catalog.version
    raise RetryableConflictError(
        f"table {name!r}: lost the commit race {MAX_COMMIT_ATTEMPTS} times in a row; retry", ours="overwrite", object=name
    )


# -- reads ------------------------------------------------------------------------------


def plan(table: IcebergTable, expr: pc.Expression | None) -> list[Any]:
    """pyiceberg's scan tasks (a data file and its delete files each) a scan with ``expr`` reads, pruned by statistics."""
    if table.metadata.current_snapshot_id is None:
        return []
    return list(table.scan(row_filter=iceberg_filter(expr, exact=False) or ice.AlwaysTrue()).plan_files())


def as_data_file(task: Any) -> DataFile:
    """A scan task's data file as a catalog :class:`~catalog.datafiles.DataFile` (full URI, no statistics)."""
    data_file = task.file
    name = data_file.file_path.rsplit("/", 1)[-1]
    return DataFile(id=name.removesuffix(".parquet"), path=data_file.file_path, size=data_file.file_size_in_bytes, rows=data_file.record_count)


def scan_batches(
    table: IcebergTable, expr: pc.Expression | None, columns: list[str] | None, limit: int | None, out_schema: pa.Schema
) -> Any:
    """The rows matching ``expr`` (exactly: it is applied to the rows pyiceberg reads), as batches of ``out_schema``."""
    from catalog.predicates import columns_of

    if table.metadata.current_snapshot_id is None or limit == 0:
        return
    wanted = list(out_schema.names)
    needed = wanted + sorted(columns_of(from_expression(expr)) - set(wanted)) if expr is not None else wanted
    scan = table.scan(row_filter=iceberg_filter(expr, exact=False) or ice.AlwaysTrue(), selected_fields=tuple(needed))
    remaining = limit
    for batch in scan.to_arrow_batch_reader():
        if expr is not None:
            batch = pa.Table.from_batches([batch]).filter(expr).combine_chunks().to_batches()
            batch = batch[0] if batch else None
        if batch is None or batch.num_rows == 0:
            continue
        batch = pa.RecordBatch.from_arrays([batch.column(n) for n in wanted], names=wanted).cast(out_schema)
        if remaining is not None:
            batch = batch.slice(0, remaining)
            remaining -= batch.num_rows
        if batch.num_rows:
            yield batch
        if remaining == 0:
            return


# -- writes -----------------------------------------------------------------------------


def write_data_files(metadata_location: str, data: pa.Table, properties: Mapping[str, str] | None = None) -> list[Any]:
    """Write ``data`` as Iceberg data files of the table at ``metadata_location``; commit nothing.

    ``properties``: the FileIO properties of the table's host (:func:`io_properties`).

    Raises:
        ValueError: ``data`` does not fit the table's schema (pyiceberg's check, naming the columns),
            or the table's format version is not written here (:func:`check_format_writable`).
    """
    from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible, _dataframe_to_data_files

    metadata = read_metadata(metadata_location, properties)
    check_format_writable(metadata.location, metadata)
    _check_pyarrow_schema_compatible(metadata.schema(), provided_schema=data.schema, format_version=metadata.format_version)
    if not data.num_rows:
        return []
    return list(_dataframe_to_data_files(table_metadata=metadata, df=data, io=file_io(metadata_location, properties)))


def append_files(host: Any, name: str, table_id: str, metadata_location: str, files: list[Any]) -> int | None:
    """Commit Iceberg data files as one fast append (redone on the winner's state after a lost race)."""

    def add(current: IcebergTable) -> None:
        with current.transaction() as tx:
            with tx.update_snapshot().fast_append() as snapshot:
                for data_file in files:
                    snapshot.append_data_file(data_file)

    return commit_retrying(host, name, table_id, metadata_location, add)


def append(host: Any, name: str, table_id: str, metadata_location: str, data: pa.Table) -> int | None:
    """Append ``data``: its files written once, then committed by :func:`append_files`."""
    files = write_data_files(metadata_location, data, io_properties(host.objects))
    return append_files(host, name, table_id, metadata_location, files)


def overwrite(host: Any, name: str, table_id: str, metadata_location: str, data: pa.Table, expr: pc.Expression | None) -> int | None:
    """Replace the rows matching ``expr`` (all rows when None) with ``data``, in one commit (redone after a lost race).

    Raises:
        ValueError: ``expr`` has no exact Iceberg form.
    """
    condition = iceberg_filter(expr, exact=True)
    if condition is None:
        raise ValueError(f"overwrite of {name!r}: the filter {expr} has no exact Iceberg form")
    return commit_retrying(host, name, table_id, metadata_location, lambda t: t.overwrite(data, overwrite_filter=condition))


def delete(host: Any, name: str, table_id: str, metadata_location: str, expr: pc.Expression) -> int | None:
    """Delete the rows matching ``expr`` with pyiceberg's copy-on-write delete (redone after a lost race).

    Raises:
        ValueError: ``expr`` has no exact Iceberg form.
    """
    condition = iceberg_filter(expr, exact=True)
    if condition is None:
        raise ValueError(f"delete from {name!r}: the filter {expr} has no exact Iceberg form")
    return commit_retrying(host, name, table_id, metadata_location, lambda t: t.delete(delete_filter=condition))
