"""The ``lakehouse`` data source's options, parsed once into typed values.

Spark hands a data source a case-insensitive ``str -> str`` map: what the user
passed with ``.option(...)`` and the ``path`` given to ``load()``/``save()``.
Every knob is parsed here, so a bad value
fails at planning time with a message naming the option, not deep in a task.

======================  =====  ==============================================
option                  when   meaning
======================  =====  ==============================================
``lakehouse``           both   lakehouse URL (required): dir, file://, s3://...
``path`` / ``table``    both   table name ``ns.table`` (``load``/``save`` arg)
``versionAsOf``         read   read the lakehouse version N
``timestampAsOf``       read   read the lakehouse as of a time: epoch seconds
                               or ISO-8601 (no zone means UTC)
``partitionBytes``      read   target bytes of data files per Spark partition
``createIfMissing``     write  ``true``: create the table from the DataFrame
                               schema (with ``partitionBy`` columns)
``partitionBy``         write  comma-separated partition columns for
                               ``createIfMissing`` (``.partitionBy()`` itself
                               is refused by Spark for Python sources)
``targetFileBytes``     write  target size of the Parquet files tasks write
``transaction``         both   id of a durable transaction
                               (``lake.begin_durable()``):
                               a write is staged in it and becomes visible,
                               with the transaction's other writes, at its
                               commit; a read sees what it staged
``readVersion``         write  overwrite only: the lakehouse version its data
                               was read at (a read-modify-write); the commit
                               raises RetryableConflictError if the table got
                               files after that version instead of replacing
                               rows the data never saw
``overwriteCondition``  write  overwrite only, set by the catalog plugin:
                               replace only the rows matching this condition
                               (Spark's filters as JSON, see
                               catalog.spark.conditions), e.g. for
                               ``INSERT OVERWRITE ... PARTITION (...)``
``dynamicOverwrite``    write  overwrite only, set by the catalog plugin:
                               ``true`` replaces exactly the partitions the
                               written rows fall in (``overwritePartitions()``)
``readSet``             write  set by the catalog plugin: the scans of the
                               query that writes (JSON: table, id, version,
                               filters); the commit checks them in one
                               transaction (catalog.spark.commits)
``storage.<name>``      both   a store option (``storage.endpoint_url``,
                               ``storage.key``, ``storage.secret``,
                               ``storage.token``, ``storage.region``, ...):
                               reaches the driver and every task, so S3 needs
                               no ``AWS_*`` variables; the Spark catalog plugin
                               passes its storage options this way
======================  =====  ==============================================

Any other option is an error naming it, never ignored: ``replaceWhere``,
``partitionOverwriteMode`` and the like used to be dropped silently and the
whole table replaced. A read option on a write (or the reverse) is an error too.

This source reads every file of the version: it does not prune by the
query's filters (Spark still filters the rows). PySpark 4.3 keeps ONE read
plan per relation (``PythonDataSourceV2.readInfo``: the pickled reader that
``read()`` runs on *and* its partitions). A query with pushed filters replaces
it, and a later query without filters over the same DataFrame or view reuses
it without calling any Python, so a file list pruned for ``WHERE a = 1`` would
also answer ``count(*)`` and drop rows. ``pruneFiles`` is therefore refused.
The catalog plugin prunes every query: it builds a new source object per scan
(:class:`catalog.spark.source.CatalogScanSource`), so no plan is shared.

``partitionBytes`` is an upper bound: like Spark's own file scans
(``maxSplitBytes``), a read gets about one partition per core of the planning
machine when the table is small, and files are never split.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SourceOptions", "check_known", "parse_options"]

# 128 MiB of Parquet per Spark partition is Spark's own default split size
# (spark.sql.files.maxPartitionBytes), so a read is split like a Parquet read.
DEFAULT_PARTITION_BYTES: Final = 128 << 20
# Files written by tasks: the catalog's own default target.
DEFAULT_TARGET_FILE_BYTES: Final = 128 << 20

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@dataclass(frozen=True)
class SourceOptions:
    """Every option of one read or write, validated."""

    lakehouse: str
    table: str
    version_as_of: int | None = None
    timestamp_as_of: float | None = None
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    prune_files: bool = False
    create_if_missing: bool = False
    partition_by: tuple[str, ...] = ()
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    transaction: str | None = None
    read_version: int | None = None
    overwrite_condition: str | None = None
    dynamic_overwrite: bool = False
    read_set: str | None = None
    storage: tuple[tuple[str, str], ...] = ()

    @property
    def storage_options(self) -> dict[str, Any]:
        """The ``storage.*`` options, for ``catalog.open`` / ``open_store``."""
        return dict(self.storage)


def _get(options: Mapping[str, str], key: str) -> str | None:
    # Spark's map is case-insensitive; a plain dict (tests, direct use) is not.
    for k, v in options.items():
        if k.lower() == key.lower():
            return v
    return None


def _positive_int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = _get(options, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {key}: expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"option {key}: expected a positive integer, got {raw!r}")
    return value


def _bool(options: Mapping[str, str], key: str) -> bool:
    raw = _get(options, key)
    if raw is None:
        return False
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    raise ValueError(f"option {key}: expected true or false, got {raw!r}")


def _as_number(raw: str) -> float | None:
    """``raw`` as a float, or None when it is not a number (then it may be ISO-8601)."""
    try:
        return float(raw)
    except ValueError:
        return None


def parse_timestamp(raw: str) -> float:
    """Epoch seconds from ``raw``: a number, or ISO-8601 (a naive time is UTC).

    Raises:
        ValueError: ``raw`` is neither a number nor an ISO-8601 time (the message
            names option ``timestampAsOf``).

    >>> parse_timestamp("1700000000.5")
    1700000000.5
    >>> parse_timestamp("2024-01-01T00:00:00")
    1704067200.0
    >>> parse_timestamp("2024-01-01 01:00:00+01:00")
    1704067200.0
    """
    number = _as_number(raw)
    if number is not None:
        return number
    try:
        moment = dt.datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError(
            f"option timestampAsOf: expected epoch seconds or an ISO-8601 time, got {raw!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


def _partition_by(options: Mapping[str, str]) -> tuple[str, ...]:
    # DataFrameWriter.partitionBy cannot reach a Python data source: Spark
    # compares it with the (empty) partitioning the source reports and fails
    # before any of our code runs. Partition columns come in as an option.
    explicit = _get(options, "partitionBy")
    if not explicit:
        return ()
    columns = [c.strip() for c in explicit.split(",") if c.strip()]
    return tuple(dict.fromkeys(columns))


def _version(raw: str | None, key: str) -> int | None:
    if raw is None:
        return None
    try:
        version = int(raw)
    except ValueError:
        raise ValueError(f"option {key}: expected a lakehouse version (int), got {raw!r}") from None
    if version < 0:
        raise ValueError(f"option {key}: expected a non-negative version, got {raw!r}")
    return version


_COMMON: Final = frozenset({"lakehouse", "path", "table", "transaction"})
# Arguments of catalog.open / open_store that are not store options: the
# caller sets them, so a user's option of that name would collide with it.
_NOT_STORE_OPTIONS: Final = frozenset({"url", "create", "background", "background_maintenance", "poll_interval_s"})


def store_options(options: Mapping[str, str], spelled: str) -> dict[str, Any]:
    """``options`` as keyword arguments for ``catalog.open`` / ``open_store``.

    ``spelled`` is how the user wrote the prefix (``"option storage."``), for the error.

    Raises:
        ValueError: an option names an argument the caller sets itself (``create``, ...).
    """
    for name in options:
        if name in _NOT_STORE_OPTIONS:
            raise ValueError(f"{spelled}{name} is not a store option (store options: endpoint_url, key, secret, region, ...)")
    return dict(options)

STORAGE_PREFIX: Final = "storage."
_READ: Final = frozenset({"versionasof", "timestampasof", "partitionbytes"})
_WRITE: Final = frozenset(
    {"createifmissing", "partitionby", "targetfilebytes", "readversion", "overwritecondition", "dynamicoverwrite", "readset"}
)
# Options other sources honour that would make a write here do something
# else than the user asked (replace the whole table): named with the way out.
_NOT_HONOURED: Final = {
    "replacewhere": "an overwrite here replaces the whole table; to replace only matching rows use "
    "lake.load_table(name).overwrite(data, filter=...) (or commit_files(..., filter=...))",
    "partitionoverwritemode": "an overwrite here replaces the whole table, never only the partitions the "
    "data holds; use Table.overwrite(data, filter=<the partitions>) from Python",
    "overwriteschema": "the table's schema changes only through Table.update_schema()",
    "mergeschema": "the table's schema changes only through Table.update_schema()",
    "prunefiles": "PySpark reuses a read plan pruned for one query's filters for a later query without "
    "filters over the same DataFrame, which would drop rows; query the table through the catalog plugin "
    "(spark.sql.catalog.<name>=io.lakekv.spark.LakehouseCatalog), which prunes every query safely",
}


def check_known(options: Mapping[str, str], purpose: str) -> None:
    """Refuse any option this source does not honour for ``purpose`` (``"read"`` or ``"write"``).

    An ignored option is silent data loss (``replaceWhere`` used to replace the
    whole table), so every unknown key is an error naming it.

    Raises:
        ValueError: naming the first option not honoured, and what to do instead where there is a way.
    """
    allowed = _COMMON | (_READ if purpose == "read" else _WRITE)
    for key in sorted(options, key=str.lower):
        lower = key.lower()
        if lower in allowed or (lower.startswith(STORAGE_PREFIX) and len(lower) > len(STORAGE_PREFIX)):
            continue
        if lower in _NOT_HONOURED:
            raise ValueError(f"option {key} is not supported by the lakehouse source: {_NOT_HONOURED[lower]}")
        other = "write" if purpose == "read" else "read"
        if lower in (_WRITE if purpose == "read" else _READ):
            raise ValueError(f"option {key} is a {other} option; it does nothing for a {purpose}")
        raise ValueError(
            f"option {key} is not an option of the lakehouse source (it would be ignored); "
            f"{purpose} options: {', '.join(sorted(_COMMON | (_READ if purpose == 'read' else _WRITE)))}"
        )


def parse_options(options: Mapping[str, str], purpose: str | None = None) -> SourceOptions:
    """Validate Spark's option map; with ``purpose`` (``"read"``/``"write"``), refuse every
    option that purpose does not honour (see :func:`check_known`).

    Raises:
        ValueError: a required option is missing, a value is malformed, or an
            option is not honoured (the message names the option).
    """
    if purpose is not None:
        check_known(options, purpose)
    lakehouse = _get(options, "lakehouse")
    if not lakehouse:
        raise ValueError('option lakehouse is required: .option("lakehouse", "<lakehouse URL>")')
    table = _get(options, "table") or _get(options, "path")
    if not table:
        raise ValueError('no table: pass its name to load()/save() (e.g. .load("sales.orders")) or .option("table", ...)')
    version_raw = _get(options, "versionAsOf")
    timestamp_raw = _get(options, "timestampAsOf")
    if version_raw is not None and timestamp_raw is not None:
        raise ValueError("options versionAsOf and timestampAsOf exclude each other")
    version = _version(version_raw, "versionAsOf")
    transaction = (_get(options, "transaction") or "").strip() or None
    if transaction is not None and (version_raw is not None or timestamp_raw is not None):
        raise ValueError("option transaction reads what the transaction sees now; it excludes versionAsOf and timestampAsOf")
    return SourceOptions(
        lakehouse=lakehouse,
        table=table,
        version_as_of=version,
        timestamp_as_of=parse_timestamp(timestamp_raw) if timestamp_raw is not None else None,
        partition_bytes=_positive_int(options, "partitionBytes", DEFAULT_PARTITION_BYTES),
        create_if_missing=_bool(options, "createIfMissing"),
        partition_by=_partition_by(options),
        target_file_bytes=_positive_int(options, "targetFileBytes", DEFAULT_TARGET_FILE_BYTES),
        transaction=transaction,
        read_version=_version(_get(options, "readVersion"), "readVersion"),
        overwrite_condition=_get(options, "overwriteCondition"),
        dynamic_overwrite=_bool(options, "dynamicOverwrite"),
        read_set=_get(options, "readSet"),
        # Store options are lower-case words (endpoint_url, key, ...), and
        # Spark lower-cases option keys anyway; open_store names a bad one.
        storage=tuple(
            sorted(
                store_options(
                    {k.lower()[len(STORAGE_PREFIX) :]: v for k, v in options.items() if k.lower().startswith(STORAGE_PREFIX)},
                    "option storage.",
                ).items()
            )
        ),
    )
