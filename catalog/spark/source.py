"""The ``lakehouse`` PySpark data source: reads and writes native catalog tables.

Where each piece runs (PySpark 4.x): ``DataSource.schema()`` and ``reader()``/
``writer()`` run in short-lived Python workers on the driver; ``read()`` and
``write()`` in executor workers; ``commit()``/``abort()`` in yet another
driver-side worker. Nothing but pickled state crosses between them, so every
piece opens the lakehouse (or just its object store) by URL, with a cheap
handle that starts no background threads, and closes it before returning.

Reads plan once per query: the planning worker loads the table at the
requested version (the latest unless ``versionAsOf``/``timestampAsOf``),
prunes its files with the pushed filters and packs them into partitions; each
partition carries its file entries, so the tasks of one query all read the
same version whatever commits meanwhile.

Writes: each task writes Parquet files through ``Table.write_files`` and
returns their entries; ``commit()`` commits them as ONE catalog operation
(``append`` or ``overwrite``), or stages it in the durable transaction named
by option ``transaction``; ``abort()`` deletes the files of the tasks that
finished. Files of a failed task are deleted by that task when it can, and
are otherwise orphans that ``lake.gc()`` removes after the grace period.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

import catalog
from catalog import iceberg_tables
from catalog.datafiles import DEFAULT_TARGET_FILE_BYTES, DataFile, discard_files, read_file_batches, write_files
from catalog.errors import NoSuchTableError
from catalog.spark.commits import files_read_at, reads_checked, replaced_rows
from catalog.spark.conditions import exact_condition
from catalog.spark.errors import annotated_conflicts
from catalog.spark.filters import pruning_expression
from catalog.spark.options import SourceOptions, parse_options
from catalog.spark.readahead import read_ahead
from catalog.schema import conform
from catalog.spark.types import check_writable, spark_arrow_schema, spark_schema, to_spark_batches, to_table_batches
from kvstore.objstore import ForwardingStore, open_store
from kvstore.objstore.base import ObjectStore

__all__ = ["LakehouseDataSource", "FilesPartition", "WrittenFiles", "open_lakehouse", "plan_partitions"]

FORMAT_NAME = "lakehouse"
# The catalog plugin's own registration of the source (see CatalogScanSource).
CATALOG_SCAN_NAME = "lakehouse_catalog_scan"
# Spark's spark.sql.files.openCostInBytes: below this, splitting a scan
# further costs more in task start-up than it gains in parallelism.
MIN_SPLIT_BYTES: Final = 4 << 20


def open_lakehouse(url: str, storage: dict[str, Any] | None = None) -> catalog.Lakehouse:
    """A short-lived lakehouse handle for a Spark worker: no follower, no maintenance threads.

    ``storage``: store options (option ``storage.<name>``), e.g. S3 endpoint and keys.
    """
    # Equivalent to catalog.open(url, background=False): spelled out because
    # that shortcut does not yet reach the store options on every backend.
    return catalog.open(url, create=False, poll_interval_s=0, background_maintenance=False, **(storage or {}))


@contextmanager
def reading_session(options: SourceOptions) -> Iterator[Any]:
    """The lakehouse, the past version the options ask for, or the durable transaction's view, open for one planning step."""
    with open_lakehouse(options.lakehouse, options.storage_options) as lake:
        if options.transaction is not None:
            yield lake.attach(options.transaction)
        elif options.version_as_of is not None:
            with lake.at(version=options.version_as_of) as past:
                yield past
        elif options.timestamp_as_of is not None:
            with lake.at(timestamp=options.timestamp_as_of) as past:
                yield past
        else:
            yield lake


def writing_session(lake: catalog.Lakehouse, options: SourceOptions) -> Any:
    """Where a write goes: the lakehouse, or the durable transaction named by option transaction.

    Inside a transaction, tables (even ones it created) are loaded through
    it, and ``commit_files`` stages the operation instead of committing.
    """
    if options.transaction is None:
        return lake
    return lake.attach(options.transaction)


def _native_table(session: Any, name: str) -> catalog.Table:
    """Table ``name``: native, or iceberg (read and appended through pyiceberg, see catalog.iceberg_tables)."""
    table: catalog.Table = session.load_table(name)
    return table


# -- reading ---------------------------------------------------------------------


class IcebergPartition(InputPartition):
    """One Spark input partition of an iceberg table: the data files (full URIs) of pyiceberg's plan
    at ``metadata_location`` that this task reads, each with its delete files."""

    def __init__(self, metadata_location: str, paths: list[str], table_schema: pa.Schema, io_properties: dict[str, str]) -> None:
        self.metadata_location = metadata_location
        self.paths = paths
        self.table_schema = table_schema
        self.io_properties = io_properties  # pyiceberg's FileIO reaches S3 as the lakehouse's store does


def _iceberg_partitions(table: catalog.Table, expression: Any, target_bytes: int) -> list[InputPartition]:
    """pyiceberg's plan of ``table`` packed into partitions of about ``target_bytes``."""
    iceberg = table.iceberg_table()
    tasks = iceberg_tables.plan(iceberg, expression)
    groups: list[list[str]] = [[]]
    size = 0
    for task in tasks:
        if groups[-1] and size + task.file.file_size_in_bytes > target_bytes:
            groups.append([])
            size = 0
        groups[-1].append(task.file.file_path)
        size += task.file.file_size_in_bytes
    metadata_location = str(table.metadata_location)
    properties = dict(iceberg.io.properties)
    return [IcebergPartition(metadata_location, paths, table.schema, properties) for paths in groups if paths]


def _read_iceberg(partition: IcebergPartition) -> Iterator[pa.RecordBatch]:
    """The rows of the partition's files, delete files applied, as batches of its table schema."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    wanted = set(partition.paths)
    table = iceberg_tables.read_only(partition.metadata_location, partition.io_properties)
    tasks = [t for t in iceberg_tables.plan(table, None) if t.file.file_path in wanted]
    scan = ArrowScan(table.metadata, table.io, table.metadata.schema(), AlwaysTrue())
    for batch in scan.to_record_batches(tasks):
        if batch.num_rows:
            yield batch.cast(partition.table_schema)


class FilesPartition(InputPartition):
    """One Spark input partition: data file entries (``DataFile.to_json()``) to read in order.

    It carries the table schema the files are read as (``read_file`` matches
    columns by field id): the reader object is pickled for the tasks
    *before* ``partitions()`` runs, so only the partitions can carry what
    planning learned.
    """

    def __init__(self, files: list[dict[str, Any]], table_schema: pa.Schema) -> None:
        super().__init__(None)
        self.files = files
        self.table_schema = table_schema


def plan_partitions(
    files: Sequence[DataFile], target_bytes: int, table_schema: pa.Schema, cores: int = 1
) -> list[FilesPartition]:
    """Split ``files``, in order, into balanced partitions: about one per core, at most ``target_bytes`` each.

    The size of a partition is Spark's own rule for file scans
    (``FilePartition.maxSplitBytes``): ``min(target_bytes, max(MIN_SPLIT_BYTES,
    total / cores))``, so a small table still gets one task per core instead of
    one task in all, and a big one is cut at ``target_bytes``. Files go to the
    partition their byte midpoint falls in, which keeps the partitions
    contiguous and about equal (a greedy packer leaves a small remainder task
    that runs alone). Files are never split: ``read()`` reads whole files.

    >>> sizes = [DataFile(id=str(i), path=f"p{i}", size=s, rows=1) for i, s in enumerate([5, 5, 20, 1, 1])]
    >>> [[f["id"] for f in p.files] for p in plan_partitions(sizes, 10, pa.schema([]))]
    [['0', '1'], ['2'], ['3', '4']]
    >>> equal = [DataFile(id=str(i), path=f"p{i}", size=MIN_SPLIT_BYTES, rows=1) for i in range(6)]
    >>> [[f["id"] for f in p.files] for p in plan_partitions(equal, 1 << 40, pa.schema([]), cores=2)]
    [['0', '1', '2'], ['3', '4', '5']]
    """
    total = sum(entry.size for entry in files)
    if not files:
        return []
    split = min(target_bytes, max(MIN_SPLIT_BYTES, -(-total // max(1, cores))))
    count = max(1, -(-total // split))
    groups: dict[int, list[dict[str, Any]]] = {}
    before = 0
    for entry in files:
        midpoint = before + entry.size / 2
        index = min(count - 1, int(midpoint * count / total)) if total else 0
        groups.setdefault(index, []).append(entry.to_json())
        before += entry.size
    return [FilesPartition(groups[i], table_schema) for i in sorted(groups)]


def planning_cores() -> int:
    """Cores of the machine planning the read (the driver): the number of partitions a small table gets."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LakehouseReader(DataSourceReader):
    """Plans (driver worker) and reads (executor workers) one query over one table.

    Must stay picklable: PySpark pickles it after ``pushFilters()`` but
    before ``partitions()`` and ships that copy to every read task, so it
    holds options and schemas, never a handle, and what ``partitions()``
    learns travels in the partitions.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        self._spark_schema = schema
        self._filters: list[Filter] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 - PySpark's name
        """Keep the filters for pruning files (CatalogScanSource only), and give every one back to Spark.

        Pruning only drops files; Spark still filters the rows it gets, so
        returning all filters keeps results exact (see catalog.spark.filters).
        """
        self._filters = list(filters)
        yield from filters

    def partitions(self) -> list[InputPartition]:
        """Plan the read: the table's live files at the version the options name, in input partitions.

        Loads the table (at ``versionAsOf``/``timestampAsOf`` or the version
        the DataFrame pinned, in option ``transaction``, or the latest),
        checks its columns are still the DataFrame's, lists its live files
        (pruned by the pushed filters for :class:`CatalogScanSource` only) and
        packs them with :func:`plan_partitions`.

        Raises:
            ValueError: the table's columns changed since the DataFrame was
                defined, or it is not a native (parquet) table.
            NoSuchTableError: no such table at that version.
            SnapshotTooOldError: the version or time is past retention.
            TransactionStateError, DurableTransactionExpiredError: option
                ``transaction`` names no active durable transaction.
            TypeError: a column's type has no lossless Spark type.
            FileNotFoundError, StoreError: no lakehouse at the URL, or it cannot be read.
        """
        options = self._options
        with reading_session(options) as session:
            table = _native_table(session, options.table)
            expected = spark_schema(table.schema)
            if [(f.name, f.dataType) for f in expected.fields] != [
                (f.name, f.dataType) for f in self._spark_schema.fields
            ]:
                raise ValueError(
                    f"table {options.table!r} now has columns {expected.simpleString()}, but the "
                    f"DataFrame was defined over {self._spark_schema.simpleString()}: load it again"
                )
            # Only for the catalog plugin's one-scan sources: see
            # CatalogScanSource for the PySpark 4.3 plan reuse that makes
            # filter-dependent plans unsafe anywhere else.
            expression = pruning_expression(self._filters, table.schema) if options.prune_files else None
            if table.format == iceberg_tables.ICEBERG:
                return _iceberg_partitions(table, expression, options.partition_bytes)
            files = table.files(filter=expression)
            return list(plan_partitions(files, options.partition_bytes, table.schema, planning_cores()))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Stream one partition's data files, in order, as Arrow batches of the DataFrame's schema.

        Each file is checked against its catalog entry (size, CRC32C) and read
        as the table schema the partition carries; the next batch is decoded
        while Spark takes the current one. Spark's stand-in partition of a
        plan without files yields nothing.

        Raises:
            CorruptDataFileError: a file is not the file its entry describes, or
                does not decode as Parquet.
            FileNotFoundError: a data file is missing.
            ObjectStoreError: a read from storage failed.
            ValueError: a bad lakehouse URL or storage option.
        """
        target = spark_arrow_schema(self._spark_schema)
        if isinstance(partition, IcebergPartition):
            yield from read_ahead(to_spark_batches(_read_iceberg(partition), target), thread_name="lakehouse-read")
            return
        if not isinstance(partition, FilesPartition):
            return  # Spark's stand-in partition for a plan with no files
        objects = open_store(self._options.lakehouse, **self._options.storage_options)
        try:
            # Each file is streamed in batches decoded on one thread: Spark
            # already runs a task per core, and the JVM converts the batches
            # it receives, so Arrow's own thread pool only added hand-off CPU
            # (measured: 0.17 vs 0.12 CPU-s per 300k lineitem rows). The next
            # batch is decoded while Spark takes the current one (readahead).
            batches = (
                batch
                for entry in partition.files
                for batch in to_spark_batches(
                    read_file_batches(
                        objects, DataFile.from_json(entry), partition.table_schema, table=self._options.table
                    ),
                    target,
                )
            )
            yield from read_ahead(batches, thread_name="lakehouse-read")
        finally:
            objects.close()


# -- writing ---------------------------------------------------------------------


class _RecordingStore(ForwardingStore):
    """A write task's object store, remembering every path it puts: what the task deletes if it fails.

    ``write_files`` puts several files per call and returns their entries
    only at the end: a failure half-way would otherwise leave the earlier
    ones for ``lake.gc()``. Not thread-safe (one per task).
    """

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.put_paths: list[str] = []

    def put(self, path: str, data: bytes) -> None:
        self.put_paths.append(path)  # before: a put that fails may still have landed
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self.put_paths.append(path)
        return self.inner.put_if_absent(path, data)


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one write task sends to ``commit()``: the entries of the files it wrote."""

    files: list[dict[str, Any]] = field(default_factory=list)
    iceberg: list[tuple[Any, int | None]] = field(default_factory=list)  # (pyiceberg DataFile, its spec id)


def _spec_id(data_file: Any) -> int | None:
    """A pyiceberg DataFile's partition spec id, or None when its writer left it unset (the table's default then)."""
    try:
        return int(data_file.spec_id)
    except AttributeError:
        return None


class LakehouseWriter(DataSourceArrowWriter):
    """One ``df.write`` into one table (pickled from the planning worker to tasks and commit)."""

    def __init__(self, options: SourceOptions, table: catalog.Table, overwrite: bool) -> None:
        self._options = options
        self._table_name = table.name
        self._table_id = table.id
        self._table_schema = table.schema
        # What a task needs to write the table's files without opening the lakehouse.
        self._location = table.location
        self._partition_by = list(table.partition_by)
        self._overwrite = overwrite
        # An iceberg table's rows are written by pyiceberg's writer as of this metadata (see catalog.iceberg_tables).
        self._iceberg_metadata = table.metadata_location if table.format == iceberg_tables.ICEBERG else None
        self._iceberg_io: dict[str, str] = {}  # its FileIO's storage options (catalog.iceberg_tables.io_properties)
        if self._iceberg_metadata is not None:
            iceberg = table.iceberg_table()
            iceberg_tables.check_format_writable(table.name, iceberg.metadata)  # before any task writes
            self._iceberg_io = dict(iceberg.io.properties)
            iceberg_tables.check_writable(table.name, table.properties)
            if overwrite:
                raise ValueError(
                    f"table {table.name!r} is an iceberg table: INSERT OVERWRITE (an overwrite from Spark) is not "
                    "supported on it; nothing was written (INSERT INTO appends; overwrite with the Python API or pyiceberg)"
                )
        if options.overwrite_condition is not None:  # refused at planning, before any task writes
            exact_condition(json.loads(options.overwrite_condition), table.schema)
        if options.read_set is not None and not isinstance(_json_or_none(options.read_set), list):
            raise ValueError("option readSet must be a JSON list of the query's scans (the catalog plugin sets it)")

    def _load(self, session: Any) -> catalog.Table:
        table = _native_table(session, self._table_name)
        if table.id != self._table_id:
            raise NoSuchTableError(
                f"table {self._table_name!r} was dropped or replaced while the write ran; nothing was committed"
            )
        return table

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        """Write one task's rows as Parquet files under the table's location, committing nothing.

        Writes about ``targetFileBytes`` of rows at a time (so a task's memory
        stays bounded whatever its input size) straight to the object store:
        a task opens no lakehouse handle, only the store the files go to. The
        table is checked at planning and again at :meth:`commit` (dropped or
        replaced meanwhile: nothing is committed and :meth:`abort` deletes the
        files). On
        any failure the files this task wrote are deleted before the
        exception propagates.

        Raises:
            SchemaMismatchError: the rows do not fit the table's schema.
            ValueError: a bad lakehouse URL or storage option.
            ObjectStoreError: storage failed writing a file.
            Any exception raised by ``iterator``.
        """
        if self._iceberg_metadata is not None:
            return self._write_iceberg(iterator)
        written: list[DataFile] = []
        pending: list[pa.RecordBatch] = []
        pending_bytes = 0
        objects = _RecordingStore(open_store(self._options.lakehouse, **self._options.storage_options))
        try:
            for batch in to_table_batches(iterator, self._table_schema):
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                pending_bytes += batch.nbytes
                if pending_bytes >= self._options.target_file_bytes:
                    written.extend(self._write(objects, pending))
                    pending, pending_bytes = [], 0
            if pending:
                written.extend(self._write(objects, pending))
        except BaseException:
            # This task's files can never be committed: remove every one it
            # put, also those of a write_files call that failed half-way.
            discard_files(objects, objects.put_paths, "its Spark task failed")
            raise
        finally:
            objects.close()
        return WrittenFiles([entry.to_json() for entry in written])

    def _write_iceberg(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        """One task's rows as Iceberg data files (pyiceberg's writer: field ids, column statistics)."""
        assert self._iceberg_metadata is not None
        batches = [b for b in to_table_batches(iterator, self._table_schema) if b.num_rows]
        if not batches:
            return WrittenFiles()
        data = pa.Table.from_batches(batches)
        files = iceberg_tables.write_data_files(self._iceberg_metadata, data, self._iceberg_io)
        # A pyiceberg DataFile pickles without its spec id (when it has one): it travels beside it.
        return WrittenFiles(iceberg=[(f, _spec_id(f)) for f in files])

    def _write(self, objects: _RecordingStore, batches: list[pa.RecordBatch]) -> list[DataFile]:
        """As ``Table.write_files`` does for a handle on the table: the rows conformed
        to the table's schema, cut into files of the lakehouse's default target size."""
        data = conform(pa.Table.from_batches(batches), self._table_schema)
        return write_files(objects, self._location, data, self._table_schema, self._partition_by, DEFAULT_TARGET_FILE_BYTES)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's files as ONE catalog operation on the table.

        An append, or an overwrite replacing the rows of option
        ``overwriteCondition``, the partitions written (``dynamicOverwrite``)
        or the whole table. It commits in the session of
        :func:`catalog.spark.commits.reads_checked`: the lakehouse, one
        lakehouse transaction that first checks the query's reads (option
        ``readSet``), or staged in the durable transaction of option
        ``transaction``. An append, or a dynamic overwrite, without files
        commits nothing. A catalog conflict carries the note
        :func:`catalog.spark.errors.catalog_errors` rebuilds it from.

        Raises:
            RetryableConflictError: a table the query read changed where it read
                since, the table got files since option ``readVersion``, or the
                commit lost to a concurrent commit it could not rebase over.
            IncompatibleConflictError: the commit no longer makes sense (e.g. the
                table's schema changed incompatibly meanwhile).
            NoSuchTableError: the table was dropped or replaced while the write ran.
            ValueError: option ``readVersion`` is a version the table did not exist
                at (as this table), a read of ``readSet`` is malformed, or
                ``overwriteCondition`` no longer translates (a column it names is gone).
            SnapshotTooOldError: a version read is past retention.
            StaleDataFileError: the files got too old to publish before the commit.
            TransactionStateError, DurableTransactionExpiredError: option
                ``transaction`` names no active durable transaction.
            LockConflictError: a durable transaction's lock forbids the commit.
            FileNotFoundError, StoreError: no lakehouse at the URL, or storage failed.
        """
        if self._iceberg_metadata is not None:
            self._commit_iceberg(messages)
            return
        files = [DataFile.from_json(entry) for message in messages if isinstance(message, WrittenFiles) for entry in message.files]
        mode = "overwrite" if self._overwrite else "append"
        if not files and (mode == "append" or self._options.dynamic_overwrite):
            return  # nothing added, no partition touched: no empty version in the history
        with annotated_conflicts(), open_lakehouse(self._options.lakehouse, self._options.storage_options) as lake:
            read_files = None
            if self._options.read_version is not None:
                try:
                    read_files = files_read_at(lake, self._table_name, self._table_id, self._options.read_version)
                except ValueError as exc:
                    raise ValueError(f"option readVersion: {exc}") from None
            reads = None if self._options.read_set is None else json.loads(self._options.read_set)
            with reads_checked(lake, reads, mode, self._table_name, self._options.transaction) as session:
                table = self._load(session)
                condition = None if self._options.overwrite_condition is None else json.loads(self._options.overwrite_condition)
                replaced = replaced_rows(table, files, condition, self._options.dynamic_overwrite) if self._overwrite else None
                table.commit_files(files, mode=mode, filter=replaced, read_files=read_files)

    def _commit_iceberg(self, messages: list[WriterCommitMessage | None]) -> None:
        """Append every task's Iceberg data files as one pyiceberg fast append (one lakehouse commit)."""
        iceberg_files = []
        for message in messages:
            if isinstance(message, WrittenFiles):
                for data_file, spec_id in message.iceberg:
                    if spec_id is not None:
                        data_file.spec_id = spec_id
                    iceberg_files.append(data_file)
        if not iceberg_files:
            return
        with annotated_conflicts(), open_lakehouse(self._options.lakehouse, self._options.storage_options) as lake:
            reads = None if self._options.read_set is None else json.loads(self._options.read_set)
            with reads_checked(lake, reads, "append", self._table_name, self._options.transaction) as session:
                self._load(session).append_data_files(iceberg_files)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the files of the tasks that finished; a file that cannot be deleted is left to ``lake.gc()``.

        Raises:
            ValueError, ObjectStoreError: a bad lakehouse URL or storage option, or
                the store cannot be reached (then no delete is tried).
        """
        paths = [entry["path"] for message in messages if isinstance(message, WrittenFiles) for entry in message.files]
        stray = [f.file_path for m in messages if isinstance(m, WrittenFiles) for f, _ in m.iceberg]
        for uri in stray:  # never committed: no snapshot can reference them
            iceberg_tables.file_io(uri, self._iceberg_io).delete(uri)
        if not paths:
            return
        objects = open_store(self._options.lakehouse, **self._options.storage_options)
        try:
            discard_files(objects, paths, "the Spark write was aborted")
        finally:
            objects.close()


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _prepare_write(options: SourceOptions, schema: StructType, overwrite: bool) -> LakehouseWriter:
    """Check (and with createIfMissing, create) the target table at planning time."""
    with annotated_conflicts(), open_lakehouse(options.lakehouse, options.storage_options) as lake:
        session = writing_session(lake, options)
        try:
            table = _native_table(session, options.table)
        except NoSuchTableError:
            if not options.create_if_missing:
                raise NoSuchTableError(
                    f"table {options.table!r} does not exist; create it first or write with "
                    '.option("createIfMissing", "true")'
                ) from None
            missing = [c for c in options.partition_by if c not in schema.fieldNames()]
            if missing:
                raise ValueError(f"partitionBy column {missing[0]!r} is not a DataFrame column ({schema.fieldNames()})")
            session.create_table(options.table, spark_arrow_schema(schema), partition_by=list(options.partition_by) or None)
            table = _native_table(session, options.table)
        else:
            if options.partition_by and list(options.partition_by) != table.partition_by:
                raise ValueError(
                    f"table {options.table!r} is partitioned by {table.partition_by}, not "
                    f"{list(options.partition_by)}; partitionBy only applies when createIfMissing creates it"
                )
        check_writable(schema, table.schema, table=options.table)
        return LakehouseWriter(options, table, overwrite)


class LakehouseDataSource(DataSource):
    """``spark.read.format("lakehouse")`` / ``df.write.format("lakehouse")``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        """The format name Spark knows this source by: ``"lakehouse"``."""
        return FORMAT_NAME

    def schema(self) -> StructType:
        """The Spark schema of the table the read options name, as of the version they ask for.

        A read of the latest version also pins the version read here, so every
        query over this DataFrame reads that version (see :meth:`reader`).

        Raises:
            ValueError: a missing, malformed or unknown option, a write option, or
                the table is not a native (parquet) table.
            NoSuchTableError: no such table at that version.
            SnapshotTooOldError: ``versionAsOf``/``timestampAsOf`` is past retention.
            TransactionStateError, DurableTransactionExpiredError: option
                ``transaction`` names no active durable transaction.
            TypeError: a column's type has no lossless Spark type.
            FileNotFoundError, StoreError: no lakehouse at the URL, or it cannot be read.
        """
        options = parse_options(self.options, "read")
        with reading_session(options) as session:
            if options.version_as_of is None and options.timestamp_as_of is None and options.transaction is None:
                # The DataFrame reads the version it was defined at, as a
                # catalog DataFrame does. PySpark pickles this object after
                # schema() and makes every reader from that copy, so the pin
                # holds for queries with and without filters alike (unpinned,
                # a filtered query planned the latest version while an
                # unfiltered one reused an older plan).
                self.pinned_version: int | None = int(session.version)
            return spark_schema(_native_table(session, options.table).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A :class:`LakehouseReader` of the read options, at the version :meth:`schema` pinned unless they name one.

        Raises:
            ValueError: a missing, malformed or unknown option, or a write option.
        """
        options = parse_options(self.options, "read")
        pinned = getattr(self, "pinned_version", None)  # set by schema(); a given schema skips it
        if pinned is not None and options.version_as_of is None and options.timestamp_as_of is None:
            options = dataclasses.replace(options, version_as_of=pinned)
        return LakehouseReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> LakehouseWriter:
        """Check a write of ``schema`` rows (an append, or ``overwrite``) and return its :class:`LakehouseWriter`.

        Runs at planning, before any task writes: the options are parsed,
        the table is loaded (created from ``schema`` and option
        ``partitionBy`` when missing and ``createIfMissing`` is set, in option
        ``transaction`` if given) and the DataFrame's columns are checked
        against it.

        Raises:
            ValueError: a missing, malformed or unknown option or a read option; an
                overwrite-only option on an append; ``overwriteCondition`` with
                ``dynamicOverwrite``, or a condition with no exact translation; a
                malformed ``readSet``; a ``partitionBy`` column the DataFrame lacks
                or that differs from the table's; a table that is not native.
            NoSuchTableError: no such table and ``createIfMissing`` is not set.
            SchemaMismatchError: the DataFrame's columns do not fit the table.
            NoSuchNamespaceError, TableAlreadyExistsError: creating the table failed.
            RetryableConflictError, IncompatibleConflictError: creating it lost to a
                concurrent commit.
            TransactionStateError, DurableTransactionExpiredError: option
                ``transaction`` names no active durable transaction.
            LockConflictError: a durable transaction's lock forbids creating the table.
            FileNotFoundError, StoreError: no lakehouse at the URL, or it cannot be read.
        """
        options = parse_options(self.options, "write")  # refuses read options and unknown ones
        for given, name in ((options.read_version is not None, "readVersion"),
                            (options.overwrite_condition is not None, "overwriteCondition"),
                            (options.dynamic_overwrite, "dynamicOverwrite")):
            if given and not overwrite:
                raise ValueError(f'option {name} only applies to .mode("overwrite"): an append replaces nothing')
        if options.overwrite_condition is not None and options.dynamic_overwrite:
            raise ValueError("options overwriteCondition and dynamicOverwrite exclude each other")
        return _prepare_write(options, schema, overwrite)


class CatalogScanSource(LakehouseDataSource):
    """The source as the catalog plugin uses it: a new instance per scan, so reads prune.

    PySpark 4.3 keeps one read plan per source object and reuses a plan
    pruned for one query's filters for a later query without filters (see
    catalog.spark.options), so the public ``lakehouse`` source never prunes.
    The plugin (``PythonSource.java``) builds a new object for every scan it
    plans, with the table's schema and version, so each object serves one
    query and pruning by its filters is exact.
    """

    @classmethod
    def name(cls) -> str:
        """The short name the catalog plugin registers this source under: ``"lakehouse_catalog_scan"``."""
        return CATALOG_SCAN_NAME

    def schema(self) -> StructType:
        """Refuse to infer a schema: the plugin always passes the table's, so a call is a user's ``load()``.

        Raises:
            ValueError: always, naming the ``lakehouse`` format to read with instead.
        """
        # The plugin always passes the schema; a user's format(...).load()
        # would make a long-lived DataFrame, the case pruning is unsafe for.
        raise ValueError(
            f"{CATALOG_SCAN_NAME} is the Spark catalog plugin's internal source; "
            f'read with format("{FORMAT_NAME}") or through the catalog (lake.ns.table)'
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        """A :class:`LakehouseReader` of the options the plugin passed that prunes files by the scan's filters.

        Raises:
            ValueError: a missing, malformed or unknown option.
        """
        options = parse_options(self.options, "read")
        return LakehouseReader(dataclasses.replace(options, prune_files=True), schema)
