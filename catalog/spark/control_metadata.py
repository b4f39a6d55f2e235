"""Metadata tables of the Spark catalog plugin: ``lake.ns.t.history`` and kin, answered by the control plane.

Spark reads ``SELECT * FROM lake.ns.t.files`` (and ``... VERSION AS OF n``)
through ``io.lakekv.spark.MetadataTables``, which asks op ``metadata_table``
here for the rows. Names follow Iceberg's Spark metadata tables, so runbooks
carry over (``history``, ``snapshots``, ``files``, ``partitions``), with the
lakehouse version added; ``lake.system.history`` is the whole lakehouse's
history, every table's operations in one list (Iceberg has no such table: its
histories are per table).

An answer is ``{"schema": <Spark JSON StructType>, "rows": [[...], ...]}``.
Values travel as JSON the JVM converts by the column's Spark type
(``MetadataTables.java``): timestamps as microseconds since the epoch, dates
as days, decimals as strings, binary as base64, maps as ``[[key, value],
...]`` pairs, structs as lists.

Also here: a pinned table load that follows the table, not the name
(:meth:`MetadataOps._load_pinned`): after a rename, ``VERSION AS OF`` by the
current name reads the table's own past.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import catalog
from catalog import errors, iceberg_tables
from catalog.datafiles import DataFile, decode_values, has_stats
from catalog.iceberg_derived import base_uri, changes_files, snapshot_id, timestamp_ms
from catalog.schema import field_id
from catalog.spark.errors import ProtocolError
from catalog.spark.types import spark_type
from catalog.timetravel import HistoryEntry
from kvstore.errors import SnapshotTooOldError

__all__ = ["MetadataOps", "TABLE_KINDS"]

# The metadata tables of a table, by the name that follows the table's in SQL.
TABLE_KINDS: Final = ("history", "snapshots", "files", "partitions")
# The whole lakehouse's history: ``lake.system.history``.
LAKEHOUSE_HISTORY: Final = "lakehouse_history"

# Operation summary counts -> Iceberg's snapshot summary keys.
_SUMMARY_KEYS: Final = {
    "files_added": "added-data-files",
    "rows_added": "added-records",
    "files_removed": "deleted-data-files",
    "rows_removed": "deleted-records",
}
_SUMMARY_MAP: Final = MapType(StringType(), StringType(), valueContainsNull=False)
_EPOCH: Final = dt.datetime(1970, 1, 1)
_EPOCH_UTC: Final = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _field(name: str, t: DataType, nullable: bool = True) -> StructField:
    return StructField(name, t, nullable)


def _micros(timestamp: float) -> int:
    """A version's commit time as Spark microseconds, on the millisecond Iceberg engines see for it."""
    return timestamp_ms(timestamp) * 1000


def _operation(ops: list[dict[str, Any]]) -> str:
    """The version's operation on the table: its kind, or the kinds in order when a transaction did several."""
    kinds: list[str] = []
    for op in ops:
        if op.get("kind") not in kinds:
            kinds.append(str(op.get("kind")))
    return ",".join(kinds)


def _summary(ops: list[dict[str, Any]]) -> list[list[str]]:
    """Iceberg's summary counts summed over ``ops``, and every other scalar the operations recorded as ``lakekv.<key>``."""
    counts: dict[str, int] = {}
    extra: dict[str, str] = {}
    for op in ops:
        for key, value in op.items():
            if key in _SUMMARY_KEYS and isinstance(value, int):
                counts[_SUMMARY_KEYS[key]] = counts.get(_SUMMARY_KEYS[key], 0) + value
            elif key not in ("kind", "table_id", "object") and isinstance(value, (str, int, float, bool)):
                extra[f"lakekv.{key}"] = str(value)
    return [[k, str(v)] for k, v in counts.items()] + sorted([k, v] for k, v in extra.items())


def _json_values(values: pa.Array) -> list[Any]:
    """``values`` as JSON the JVM converts by their Spark type (see the module docstring)."""
    t = values.type
    if pa.types.is_timestamp(t):
        micros: list[Any] = values.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64()).to_pylist()
        return micros
    if pa.types.is_date(t):
        days: list[Any] = values.cast(pa.date32()).cast(pa.int32()).to_pylist()
        return days
    out = []
    for value in values.to_pylist():
        if isinstance(value, Decimal):
            value = str(value)
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        elif isinstance(value, dt.datetime):  # not reached for Arrow timestamps (cast above); kept exact anyway
            value = (value - (_EPOCH_UTC if value.tzinfo else _EPOCH)) // dt.timedelta(microseconds=1)
        out.append(value)
    return out


def _spark_type_or_none(t: pa.DataType) -> DataType | None:
    try:
        return spark_type(t)
    except TypeError:
        return None


def _require_native(table: catalog.Table) -> None:
    if table.format == iceberg_tables.ICEBERG:
        raise ValueError(f"table {table.name!r} is an Iceberg table: read its files and partitions with an Iceberg engine")


class MetadataOps:
    """The control plane's metadata-table ops; a mixin of :class:`catalog.spark.control.ControlPlane`.

    It uses the host's ``_lake`` (the open lakehouse), ``_session`` (the
    lakehouse the request names) and ``_raise_not_at_version``.
    """

    _lake: catalog.Lakehouse

    if TYPE_CHECKING:  # the host's

        def _session(self, args: Mapping[str, Any]) -> AbstractContextManager[Any]: ...

        def _raise_not_at_version(self, name: str, version: int) -> None: ...

    # -- following a table through renames --

    def _load_pinned(self, session: Any, name: str) -> catalog.Table:
        """Table ``name`` at a pinned (past) ``session``, by its identity: the table named so now, at that version.

        As in Iceberg, the current name reads the table's own past, whatever
        it was called then. A name no table has now resolves at the version
        (a dropped table's past). The table is answered under its name at
        that version.

        Raises:
            NotAtVersionError: the table named so now did not exist at that version.
            NoSuchTableError: no table has that name, now or then.
        """
        self._lake.refresh()
        try:
            table_id = self._lake.load_table(name).id
        except errors.NoSuchTableError:
            by_name: catalog.Table = session.load_table(name)
            return by_name
        try:
            by_id: catalog.Table = session.load_table_by_id(table_id)
            return by_id
        except errors.NoSuchTableError:
            self._raise_not_at_version(name, int(session.version))
            raise

    # -- the op --

    def op_metadata_table(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Metadata table ``kind`` of table ``name`` (or of the lakehouse: ``kind`` ``lakehouse_history``).

        Read at the session's version (``version`` / ``timestamp_us`` for time
        travel, else the latest); ``txn`` is not taken: metadata tables show
        committed versions.

        Raises:
            ProtocolError: ``kind`` is not a metadata table, ``name`` not a list of names,
                or a session argument has the wrong type.
            ValueError: a malformed name.
            NoSuchTableError, NotAtVersionError: no such table (at that version).
            SnapshotTooOldError: the version is past retention.
        """
        kind = args.get("kind")
        if kind not in (*TABLE_KINDS, LAKEHOUSE_HISTORY):
            raise ProtocolError(f"unknown metadata table {kind!r}; known: {', '.join((*TABLE_KINDS, LAKEHOUSE_HISTORY))}")
        pinned = {k: args[k] for k in ("version", "timestamp_us") if args.get(k) is not None}
        with self._session(pinned) as session:
            version = int(session.version)
            if kind == LAKEHOUSE_HISTORY:
                return self._lakehouse_history(version)
            parts = args.get("name")
            if not isinstance(parts, list) or not parts or not all(isinstance(p, str) for p in parts):
                raise ProtocolError("argument 'name' must be a list of names")
            name = ".".join(parts)
            table = self._load_pinned(session, name) if pinned else session.load_table(name)
            if kind == "history":
                return self._history(table, version, snapshots=False)
            if kind == "snapshots":
                return self._history(table, version, snapshots=True)
            if kind == "files":
                return self._files(table)
            return self._partitions(table, version)

    # -- history --

    def _versions(self, upto: int) -> Iterator[HistoryEntry]:
        """The retained lakehouse versions at or below ``upto``, newest first."""
        self._lake.refresh()
        for entry in self._lake.history(limit=None):
            if entry.version <= upto:
                yield entry

    def _table_versions(self, table_id: str, upto: int) -> list[tuple[HistoryEntry, list[dict[str, Any]]]]:
        """The versions at or below ``upto`` that touched table ``table_id``, newest first, with its operations."""
        out = []
        for entry in self._versions(upto):
            ops = [op for op in entry.operations if op.get("table_id") == table_id]
            if ops:
                out.append((entry, ops))
        return out

    def _history(self, table: catalog.Table, version: int, snapshots: bool) -> dict[str, Any]:
        changes = list(reversed(self._table_versions(table.id, version)))  # oldest first
        rows = []
        parent = None
        for entry, ops in changes:
            sid = snapshot_id(table.id, entry.version)
            at = _micros(entry.timestamp)
            if snapshots:
                rows.append([at, sid, parent, _operation(ops), _summary(ops), entry.version])
            else:
                rows.append([at, sid, parent, True, entry.version, _operation(ops), _summary(ops)])
            parent = sid
        if snapshots:
            fields = [
                _field("committed_at", TimestampType(), False),
                _field("snapshot_id", LongType(), False),
                _field("parent_id", LongType()),
                _field("operation", StringType(), False),
                _field("summary", _SUMMARY_MAP, False),
                _field("version", LongType(), False),
            ]
        else:
            fields = [
                _field("made_current_at", TimestampType(), False),
                _field("snapshot_id", LongType(), False),
                _field("parent_id", LongType()),
                _field("is_current_ancestor", BooleanType(), False),
                _field("version", LongType(), False),
                _field("operation", StringType(), False),
                _field("summary", _SUMMARY_MAP, False),
            ]
        return {"schema": StructType(fields).jsonValue(), "rows": rows}

    def _lakehouse_history(self, version: int) -> dict[str, Any]:
        rows = []
        for entry in self._versions(version):
            for op in entry.operations:
                table_id = op.get("table_id")
                rows.append([
                    entry.version,
                    _micros(entry.timestamp),
                    str(op.get("kind")),
                    None if op.get("object") is None else str(op["object"]),
                    table_id,
                    None if table_id is None else snapshot_id(str(table_id), entry.version),
                    _summary([op]),
                ])
        fields = [
            _field("version", LongType(), False),
            _field("committed_at", TimestampType(), False),
            _field("operation", StringType(), False),
            _field("object", StringType()),
            _field("table_id", StringType()),
            _field("snapshot_id", LongType()),
            _field("summary", _SUMMARY_MAP, False),
        ]
        return {"schema": StructType(fields).jsonValue(), "rows": rows}

    # -- files and partitions --

    def _partition_fields(self, table: catalog.Table) -> list[pa.Field]:
        by_name = {f.name: f for f in table.schema}
        return [by_name[c] for c in table.partition_by]

    def _partition_type(self, table: catalog.Table) -> StructType:
        return StructType([_field(f.name, spark_type(f.type, f.name)) for f in self._partition_fields(table)])

    def _partition_values(self, table: catalog.Table, files: list[DataFile]) -> list[list[Any]]:
        """Each file's partition as a row of JSON values, in partition column order."""
        columns = []
        for f in self._partition_fields(table):
            fid = str(field_id(f))
            columns.append(_json_values(decode_values([d.partition.get(fid) for d in files], f.type)))
        return [list(values) for values in zip(*columns)] if columns else [[] for _ in files]

    def _files(self, table: catalog.Table) -> dict[str, Any]:
        _require_native(table)
        files = table.files()
        partitioned = bool(table.partition_by)
        partitions = self._partition_values(table, files)
        stat_fields = [f for f in table.schema if has_stats(f.type) and _spark_type_or_none(f.type) is not None]
        bounds = {}
        for f in stat_fields:
            fid = str(field_id(f))
            stats = [d.stats.get(fid) for d in files]
            lower = _json_values(decode_values([None if s is None else s[0] for s in stats], f.type))
            upper = _json_values(decode_values([None if s is None else s[1] for s in stats], f.type))
            bounds[f.name] = (stats, lower, upper)
        root = base_uri(self._lake.objects)
        rows = []
        for i, d in enumerate(files):
            metrics = []
            for f in stat_fields:
                stats, lower, upper = bounds[f.name]
                s = stats[i]
                metrics.append(None if s is None else [d.rows, s[2], lower[i], upper[i]])
            null_counts = []
            for f in stat_fields:
                s = bounds[f.name][0][i]
                if s is not None:
                    null_counts.append([int(field_id(f)), s[2]])
            row: list[Any] = [0, f"{root}/{d.path}", "PARQUET", 0]
            if partitioned:
                row.append(partitions[i])
            row += [d.rows, d.size, null_counts, metrics]
            rows.append(row)
        metric = StructType([
            _field("value_count", LongType()),
            _field("null_value_count", LongType()),
        ])
        readable = StructType([
            _field(f.name, StructType([*metric.fields, _field("lower_bound", spark_type(f.type)), _field("upper_bound", spark_type(f.type))]))
            for f in stat_fields
        ])
        fields = [
            _field("content", IntegerType(), False),
            _field("file_path", StringType(), False),
            _field("file_format", StringType(), False),
            _field("spec_id", IntegerType(), False),
        ]
        if partitioned:
            fields.append(_field("partition", self._partition_type(table), False))
        fields += [
            _field("record_count", LongType(), False),
            _field("file_size_in_bytes", LongType(), False),
            _field("null_value_counts", MapType(IntegerType(), LongType(), valueContainsNull=False), False),
            _field("readable_metrics", readable, False),
        ]
        return {"schema": StructType(fields).jsonValue(), "rows": rows}

    def _partitions(self, table: catalog.Table, version: int) -> dict[str, Any]:
        _require_native(table)
        files = table.files()
        keys = [tuple(sorted(d.partition.items())) for d in files]
        values = self._partition_values(table, files)
        groups: dict[tuple[Any, ...], list[Any]] = {}
        for key, value, d in zip(keys, values, files):
            group = groups.setdefault(key, [value, 0, 0, 0])
            group[1] += d.rows
            group[2] += 1
            group[3] += d.size
        updated = self._last_updated(table, version, set(groups))
        rows = []
        for key, (value, record_count, file_count, size) in sorted(groups.items(), key=lambda kv: str(kv[1][0])):
            at = updated.get(key)
            row: list[Any] = [value] if table.partition_by else []
            row += [0, record_count, file_count, size]
            row += [None, None] if at is None else [_micros(at[1]), snapshot_id(table.id, at[0])]
            rows.append(row)
        fields = [_field("partition", self._partition_type(table), False)] if table.partition_by else []
        fields += [
            _field("spec_id", IntegerType(), False),
            _field("record_count", LongType(), False),
            _field("file_count", IntegerType(), False),
            _field("total_data_file_size_in_bytes", LongType(), False),
            _field("last_updated_at", TimestampType()),
            _field("last_updated_snapshot_id", LongType()),
        ]
        return {"schema": StructType(fields).jsonValue(), "rows": rows}

    def _last_updated(self, table: catalog.Table, version: int, wanted: set[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[int, float]]:
        """For each partition key in ``wanted``: the (version, timestamp) of the last commit that added or removed a file in it.

        Walks the table's file-changing versions newest first, comparing
        each with the lakehouse version before it, until every partition
        is placed. A partition whose last change is at or below the data
        floor (its version before is past retention) has none.
        """
        found: dict[tuple[Any, ...], tuple[int, float]] = {}
        for entry, ops in self._table_versions(table.id, version):
            if len(found) == len(wanted):
                break
            if not changes_files(ops):
                continue
            after = self._files_at(table.id, entry.version)
            before = self._files_at(table.id, entry.version - 1) if entry.version > 0 else {}
            if after is None or before is None:
                break  # past retention: what this version changed is unknown, and so are older changes
            changed = [d for fid, d in after.items() if fid not in before]
            changed += [d for fid, d in before.items() if fid not in after]
            for d in changed:
                key = tuple(sorted(d.partition.items()))
                if key in wanted and key not in found:
                    found[key] = (entry.version, entry.timestamp)
        return found

    def _files_at(self, table_id: str, version: int) -> dict[str, DataFile] | None:
        """Table ``table_id``'s live files at ``version`` by file id ({} if it did not exist), None past retention."""
        try:
            with self._lake.at(version=version) as past:
                try:
                    table = past.load_table_by_id(table_id)
                except errors.NoSuchTableError:
                    return {}
                return {d.id: d for d in table.files()}
        except SnapshotTooOldError:
            return None
