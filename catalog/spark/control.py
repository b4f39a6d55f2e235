"""The control plane of the Spark catalog plugin: the JVM asks, the Python catalog answers.

``io.lakekv.spark.LakehouseCatalog`` (the Java plugin in ``catalog/spark/jvm``)
knows nothing about keys, versions or statistics. For names, schemas, scan
plans and commits it sends one JSON request and reads one JSON answer:

    {"op": "load_table", "args": {"name": ["sales", "orders"]}}
    {"ok": true, "result": {"id": "...", "version": 12, "schema": {...}, ...}}
    {"ok": false, "error": {"type": "catalog.errors.NoSuchTableError", "kind": "no_such_table", ...}}

The same requests travel two ways:

* **No server** (the default): the plugin starts ``python -m
  catalog.spark`` (``catalog/spark/__main__.py``) once per catalog and exchanges one line of JSON per
  request over the child's stdin/stdout. The first request, ``open``, carries
  the lakehouse URL and storage options (so a secret never appears on a
  command line). The child exits when its stdin closes, i.e. with the JVM.
* **Shared server**: ``lakekv serve`` answers the same bodies on
  ``POST /lakekv/v1/spark-control`` (catalog option ``uri``, plus ``token``).

One long-lived :class:`ControlPlane` keeps one lakehouse handle open, so a
table load costs a refresh and a read, not a Python start. Every read
refreshes first: a query sees the latest committed version at its planning.

A request with ``txn`` works inside that durable transaction (a staged
CREATE TABLE AS SELECT, or the transaction a Spark session set with
``spark.sql.catalog.<name>.transaction``): reads see what it staged, writes
stage into it and become visible at its commit, and the request pings it.
A request pinned to a version (time travel) reads that version instead.
"""

from __future__ import annotations

import base64
import json
import pickle
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import IO, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructType

import catalog
from catalog import errors, iceberg_tables
from catalog.spark.types import column_metadata
from catalog.datafiles import DataFile, entry_from_footer
from catalog.maintenance import purge_dropped
from catalog.spark.control_changes import ChangesOps
from catalog.spark.commits import files_read_at, reads_checked, replaced_rows
from catalog.spark.conditions import exact_condition, literal, spark_filters
from catalog.spark.control_metadata import MetadataOps
from catalog.spark.write_order import WRITE_ORDER_PROPERTY, check_write_order
from catalog.spark.control_procedures import ProcedureOps
from catalog.spark.errors import NotAtVersionError, ProtocolError, annotated_conflicts
from catalog.spark.filters import pruning_expression
from catalog.spark.options import store_options
from catalog.spark.planned_files import planned_file as _planned_file
from catalog.spark.planned_files import planned_files
from kvstore.backoff import backoff_delay
from catalog.schema import COMMENT as COMMENT_KEY
from kvstore.format.names import IDENTITY_PATH
from catalog.spark.types import spark_arrow_schema, spark_schema

__all__ = ["ControlPlane", "ProtocolError", "serve_stdio", "PROTOCOL_VERSION"]

PROTOCOL_VERSION: Final = 1
# Spark's Parquet reader matches columns by this StructField metadata key
# (with spark.sql.parquet.fieldId.read.enabled).
SPARK_FIELD_ID_KEY: Final = "parquet.field.id"
# Table properties the plugin shows in DESCRIBE; never stored.
SHOWN_PROPERTIES: Final = ("provider", "location", "lakekv.version", "lakekv.table-id")
# Spark's reserved table properties (TableCatalog.PROP_*) and what we do with them.
_IGNORED_RESERVED: Final = frozenset({"owner", "is_managed_location"})
# Shown properties that describe one table (SHOW CREATE TABLE prints them): not stored by a CREATE.
_DESCRIBING: Final = frozenset({"lakekv.version", "lakekv.table-id"})
_REFUSED_RESERVED: Final = {
    "location": "native lakehouse tables live under the lakehouse; LOCATION is not supported",
    "external": "EXTERNAL tables are not supported: every lakehouse table is managed",
}
_PROVIDERS: Final = frozenset({"lakehouse", "parquet"})
_OPTION_PREFIX: Final = "option."


# -- errors back to the JVM -----------------------------------------------------------

# The JVM turns these kinds into Spark's own analysis exceptions; anything
# else becomes a LakehouseCatalogException carrying the Python class line.
_KINDS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (errors.NoSuchNamespaceError, "no_such_namespace"),
    (NotAtVersionError, "not_at_version"),
    (errors.NoSuchTableError, "no_such_table"),
    (errors.NoSuchViewError, "no_such_view"),
    (errors.NamespaceAlreadyExistsError, "namespace_exists"),
    (errors.TableAlreadyExistsError, "table_exists"),
    (errors.ViewAlreadyExistsError, "view_exists"),
    (errors.NamespaceNotEmptyError, "namespace_not_empty"),
    (ProtocolError, "bad_request"),
    (TypeError, "invalid_argument"),
    (ValueError, "invalid_argument"),
)


def error_answer(exc: BaseException) -> dict[str, Any]:
    """The ``{"ok": false}`` answer for ``exc``: its class, kind and the traceback line Python would print."""
    cls = type(exc)
    qualified = f"{cls.__module__}.{cls.__qualname__}"
    kind = next((k for t, k in _KINDS if isinstance(exc, t)), "catalog" if isinstance(exc, errors.CatalogError) else "internal")
    # "module.Class: message" then its notes: the text catalog.spark.errors
    # (conflict_from) parses back into the catalog's exception in PySpark.
    text = "".join(traceback.format_exception_only(exc)).rstrip("\n")
    return {"ok": False, "error": {"type": qualified, "kind": kind, "message": str(exc), "text": text}}


# -- values the JVM sends -------------------------------------------------------------


def _parts(args: Mapping[str, Any], key: str) -> list[str]:
    value = args.get(key)
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ProtocolError(f"argument {key!r} must be a list of names, got {value!r}")
    return value


def _list_arg(args: Mapping[str, Any], key: str) -> list[Any]:
    value = args.get(key)
    if not isinstance(value, list):
        raise ProtocolError(f"argument {key!r} must be a list, got {value!r}")
    return value


def _comment(change: Mapping[str, Any]) -> str | None:
    value = change.get("comment")
    if value is not None and not isinstance(value, str):
        raise ProtocolError(f"argument 'comment' must be a string or null, got {value!r}")
    return value


def _name(args: Mapping[str, Any], key: str = "name") -> str:
    parts = _parts(args, key)
    if len(parts) < 2:
        raise ValueError(f"a table or view name needs a namespace: {'.'.join(parts)!r}")
    return ".".join(parts)


def _namespace(args: Mapping[str, Any], key: str = "namespace") -> str:
    parts = _parts(args, key)
    if not parts:
        raise ValueError("the root namespace cannot be used here; name a namespace")
    return ".".join(parts)


def _dict_of_str(args: Mapping[str, Any], key: str) -> dict[str, str]:
    value = args.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ProtocolError(f"argument {key!r} must be an object of strings")
    return value


# -- schemas ---------------------------------------------------------------------------


def spark_schema_json(schema: pa.Schema) -> dict[str, Any]:
    """A table's schema as Spark's JSON ``StructType``, each top-level field carrying its field id."""
    struct = spark_schema(schema).jsonValue()
    for field, arrow_field in zip(struct["fields"], schema):
        metadata = dict(field.get("metadata") or {})
        metadata[SPARK_FIELD_ID_KEY] = catalog.schema.field_id(arrow_field)
        field["metadata"] = metadata
    return struct


def arrow_schema(spark_json: object) -> pa.Schema:
    """The Arrow schema a table created from Spark's JSON ``StructType`` gets.

    Column comments are kept in the Arrow field metadata.

    Raises:
        ProtocolError: ``spark_json`` is not an object, or a column's comment is
            not a string.
        KeyError: a struct or field without a key Spark's JSON has (``fields``,
            ``type``, ...).
        ValueError, TypeError: pyspark cannot parse a data type or give it an
            Arrow type.
    """
    if not isinstance(spark_json, dict):
        raise ProtocolError("a schema must be Spark's JSON StructType")
    struct = StructType.fromJson(spark_json)
    schema = spark_arrow_schema(struct)
    # Column comments (CREATE TABLE ... (c INT COMMENT '...')) are kept in the
    # Arrow field metadata, where spark_schema finds them again.
    fields = []
    for spark_field, field in zip(struct.fields, schema):
        comment = spark_field.metadata.get("comment")
        if comment is not None:
            if not isinstance(comment, str):
                raise ProtocolError(f"column {spark_field.name!r}: a comment must be a string")
            field = field.with_metadata({**(field.metadata or {}), COMMENT_KEY: comment.encode()})
        # CHAR/VARCHAR kept as Spark's type string; a collation is refused (catalog.spark.types).
        kept = column_metadata(spark_field)
        if kept:
            field = field.with_metadata({**(field.metadata or {}), **kept})
        fields.append(field)
    return pa.schema(fields)


def arrow_type(spark_type_json: object, what: str) -> pa.DataType:
    """One Spark JSON data type as the Arrow type a table column gets."""
    schema = arrow_schema({"type": "struct", "fields": [{"name": what, "type": spark_type_json, "nullable": True, "metadata": {}}]})
    return schema.field(0).type


def _jvm_readable(schema: pa.Schema) -> bool:
    """Whether Spark's own Parquet reader reads every column of ``schema`` as the catalog does.

    Nanosecond timestamps are the exception: Spark's reader refuses them
    (they come from tables written by Python; Spark writes microseconds).
    """

    def ok(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return bool(t.unit != "ns")
        if pa.types.is_struct(t):
            return all(ok(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return ok(t.value_type)
        if pa.types.is_map(t):
            return ok(t.key_type) and ok(t.item_type)
        return True

    return all(ok(f.type) for f in schema)


def _view_schema_json(schema: pa.Schema | None) -> dict[str, Any] | None:
    """A view's schema as Spark's JSON ``StructType``; None if unknown (none given, or no
    column: a view made over REST from a schema-less view) or with a type Spark has not."""
    if schema is None or len(schema) == 0:
        return None
    try:
        return dict(spark_schema(schema).jsonValue())
    except TypeError:
        return None  # Spark's analysis of the SQL then decides the column types


def _iceberg_view_version(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    """The current version of the Iceberg view metadata a view made over REST keeps; {} for any other view."""
    current = metadata.get("current-version-id")
    versions = metadata.get("versions")
    if current is None or not isinstance(versions, list):
        return {}
    return next((v for v in versions if isinstance(v, dict) and v.get("version-id") == current), {})


# -- the control plane -----------------------------------------------------------------


class ControlPlane(MetadataOps, ChangesOps, ProcedureOps):
    """Answers the plugin's requests against one lakehouse (see the module docstring).

    Each ``op_<name>`` method answers op ``<name>``: it takes the request's
    ``args`` and returns a JSON-able result; :meth:`handle` turns what it
    raises into an error answer. Most ops work in the session ``args``
    names: durable transaction ``txn`` (pinged with its ancestors), the
    lakehouse at ``version`` or ``timestamp_us`` (read-only, so a write
    there is a ``ReadOnlyError``), or else the latest lakehouse (refreshed).
    Choosing it raises ``ProtocolError`` (``txn``, ``version`` or
    ``timestamp_us`` of the wrong type), ``ValueError`` (``txn`` is not a
    transaction id), ``TransactionStateError`` /
    ``DurableTransactionExpiredError`` (no such transaction, or not active)
    or ``SnapshotTooOldError`` (past retention); the ops' ``Raises:``
    sections sum these up as "the session". A storage failure
    (``StoreError``) can come out of any op; only :meth:`op_hello`, which
    cannot fail otherwise, lists it.

    Args:
        lake: an open lakehouse; the control plane does not close it.
        data_root: the Hadoop URL of the store root (``file:/...``,
            ``s3a://bucket/prefix``) when the JVM may read data files itself
            (:func:`data_root`); None sends reads through the Python source.
    """

    def __init__(self, lake: catalog.Lakehouse, data_root: str | None) -> None:
        self._lake = lake
        self._data_root = data_root
        self._ops: dict[str, Callable[[Mapping[str, Any]], Any]] = {
            name[len("op_"):]: getattr(self, name) for name in dir(self) if name.startswith("op_")
        }

    def handle(self, request: object) -> dict[str, Any]:
        """One request in, one answer out; never raises for a bad request or a refused operation.

        Raises:
            KeyboardInterrupt, SystemExit: only a ``BaseException`` that is not an
                ``Exception`` propagates. Every ``Exception`` (the ``ProtocolError``
                of a malformed request or unknown op, or whatever the op raised)
                becomes the ``{"ok": false}`` answer of :func:`error_answer`.
        """
        try:
            if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                raise ProtocolError('a request is {"op": name, "args": {...}}')
            op = self._ops.get(request["op"])
            if op is None:
                raise ProtocolError(f"unknown op {request['op']!r}; known: {', '.join(sorted(self._ops))}")
            args = request.get("args") or {}
            if not isinstance(args, dict):
                raise ProtocolError("args must be an object")
            with annotated_conflicts():
                return {"ok": True, "result": op(args)}
        except Exception as exc:  # every failure is an answer: the JVM raises it as a Spark exception
            return error_answer(exc)

    # -- helpers --

    @contextmanager
    def _session(self, args: Mapping[str, Any]) -> Iterator[Any]:
        """The lakehouse at ``args["version"]`` (pinned), at ``timestamp_us``, inside durable transaction ``txn``, or latest.

        Each request naming a transaction pings it (and its ancestors): a
        Spark session's transaction lives as long as the session keeps using
        it, however long its statements take.
        """
        txn = args.get("txn")
        version, timestamp_us = args.get("version"), args.get("timestamp_us")
        if txn is not None and version is None and timestamp_us is None:
            if not isinstance(txn, str):
                raise ProtocolError("argument 'txn' must be a transaction id")
            transaction = self._lake.attach(txn)
            transaction.ping(ancestors=True)
            yield transaction
            return
        if version is not None:
            if not isinstance(version, int) or isinstance(version, bool):
                raise ProtocolError("argument 'version' must be an int")
            with self._lake.at(version=version) as past:
                yield past
        elif timestamp_us is not None:
            if not isinstance(timestamp_us, int) or isinstance(timestamp_us, bool):
                raise ProtocolError("argument 'timestamp_us' must be an int")
            # Microseconds, as Spark gives them: commit times are finer than a
            # millisecond, so a coarser time could miss a commit made just before it.
            with self._lake.at(timestamp=timestamp_us / 1_000_000) as past:
                yield past
        else:
            self._lake.refresh()
            yield self._lake

    def _describe(self, session: Any, table: catalog.Table, version: int) -> dict[str, Any]:
        if table.format == iceberg_tables.ICEBERG:
            return self._describe_iceberg(table, version)
        properties = dict(table.properties)
        properties.update(
            {
                "provider": "lakehouse",
                "location": f"{self._lake.url.split('?', 1)[0].rstrip('/')}/{table.location}",
                "lakekv.version": str(version),
                "lakekv.table-id": table.id,
                # The catalog chooses where a table lives: SHOW CREATE TABLE then prints
                # no LOCATION clause (which CREATE TABLE refuses); DESCRIBE still shows it.
                "is_managed_location": "true",
            }
        )
        return {
            "id": table.id,
            "name": table.name.split("."),
            "version": version,
            "schema": spark_schema_json(table.schema),
            "partitioning": list(table.partition_by),
            "properties": properties,
            "data_root": self._data_root if _jvm_readable(table.schema) else None,
            "data_path": table.location,  # store-relative: where Spark's writer puts new files
        }

    def _describe_iceberg(self, table: catalog.Table, version: int) -> dict[str, Any]:
        """An iceberg table as the plugin sees it: its current Iceberg schema, read by Spark's own reader
        where the JVM reaches its files (:meth:`op_plan_scan` decides per scan), written through the
        Python source (pyiceberg's writer and commit: ``data_path`` None)."""
        schema = table.schema
        properties = dict(table.properties)
        properties.update(
            {
                "provider": "iceberg",
                "location": table.location,
                "lakekv.version": str(version),
                "lakekv.table-id": table.id,
                "lakekv.metadata-location": str(table.metadata_location),
            }
        )
        readable = _jvm_readable(schema) and self._relative(table.location) is not None
        return {
            "id": table.id,
            "name": table.name.split("."),
            "version": version,
            "schema": spark_schema_json(schema),
            "partitioning": [],  # the Iceberg partition spec is pyiceberg's business: Spark only reads and appends
            "properties": properties,
            "data_root": self._data_root if readable else None,
            "data_path": None,
        }

    def _relative(self, uri: str) -> str | None:
        """``uri`` relative to the store root the JVM reads (``data_root``), or None if it lies elsewhere."""
        if self._data_root is None:
            return None
        root = _local_path(self._data_root).rstrip("/") + "/"
        path = _local_path(uri)
        return path[len(root):] if path.startswith(root) else None

    def _version_of(self, session: Any) -> int:
        return int(session.version)

    # -- ops: each takes the request's args and returns a JSON-able result --

    def op_hello(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Greet the plugin: the protocol version, the lakehouse's latest version (refreshed) and its URL.

        With a ``data_root``, also that root and the store's id (from its
        identity file): a plugin talking to a shared ``lakekv serve`` reads
        and writes data files itself only where it finds that same store id
        under that root.

        Raises:
            StoreError: the refresh failed (the store is closed or unreadable).
        """
        answer: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "version": self._lake.refresh(), "url": self._lake.url}
        if self._data_root is not None:
            identity = json.loads(self._lake.objects.get(IDENTITY_PATH))
            answer.update(data_root=self._data_root, store_id=identity["store_id"])
        return answer

    def op_list_namespaces(self, args: Mapping[str, Any]) -> list[list[str]]:
        """The namespaces directly under ``parent`` (name parts; the root if absent or empty), each as its parts.

        Raises:
            ProtocolError: ``parent`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a malformed ``parent``, or ``txn`` is not a transaction id.
            NoSuchNamespaceError: ``parent`` does not exist.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        parent = args.get("parent") or []
        with self._session(args) as lake:
            names = lake.list_namespaces(".".join(_parts({"p": parent}, "p")) or None)
        return [name.split(".") for name in names]

    def op_load_namespace(self, args: Mapping[str, Any]) -> dict[str, str]:
        """The properties of namespace ``namespace``.

        Raises:
            ProtocolError: ``namespace`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: the root or a malformed namespace, or ``txn`` is not a
                transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as lake:
            return dict(lake.namespace_properties(_namespace(args)))

    def op_create_namespace(self, args: Mapping[str, Any]) -> None:
        """Create namespace ``namespace`` with string ``properties`` (staged in ``txn`` if given).

        Raises:
            ProtocolError: ``namespace`` is not a list of names, ``properties`` not an
                object of strings, or a session argument has the wrong type.
            ValueError: the root or a malformed namespace, a malformed property, or
                ``txn`` is not a transaction id.
            NamespaceAlreadyExistsError: the namespace exists.
            NoSuchNamespaceError: its parent does not exist.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as session:
            session.create_namespace(_namespace(args), _dict_of_str(args, "properties") or None)

    def op_alter_namespace(self, args: Mapping[str, Any]) -> None:
        """Set properties ``set`` and remove properties ``remove`` of namespace ``namespace``, in one change.

        Raises:
            ProtocolError: ``remove`` is not a list of names, ``set`` not an object of
                strings, ``namespace`` not a list of names, or a session argument
                has the wrong type.
            ValueError: the root or a malformed namespace, a malformed property or
                one both set and removed, or ``txn`` is not a transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        removals = args.get("remove") or []
        if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
            raise ProtocolError("argument 'remove' must be a list of property names")
        with self._session(args) as session:
            session.update_namespace_properties(_namespace(args), _dict_of_str(args, "set") or None, removals or None)

    def op_drop_namespace(self, args: Mapping[str, Any]) -> bool:
        """Drop namespace ``namespace``; answers whether it existed.

        With ``cascade``, first its views, its tables and (recursively) its
        child namespaces, each dropped on its own: on the live lakehouse,
        one commit each, so a failure midway leaves what was dropped dropped.

        Raises:
            ProtocolError: ``namespace`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: the root or a malformed namespace, or ``txn`` is not a
                transaction id.
            NamespaceNotEmptyError: it holds objects and ``cascade`` is not set.
            NoSuchNamespaceError, NoSuchTableError, NoSuchViewError: a concurrent
                drop removed something between listing and dropping it.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: a drop lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids a drop.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        namespace = _namespace(args)
        with self._session(args) as session:
            if not session.namespace_exists(namespace):
                return False
            if args.get("cascade"):
                for view in session.list_views(namespace):
                    session.drop_view(view)
                for table in session.list_tables(namespace):
                    session.drop_table(table)
                for child in session.list_namespaces(namespace):
                    self.op_drop_namespace({**args, "namespace": child.split("."), "cascade": True})
            session.drop_namespace(namespace)
        return True

    def op_list_tables(self, args: Mapping[str, Any]) -> list[list[str]]:
        """The tables of namespace ``namespace``, each as its name parts.

        Raises:
            ProtocolError: ``namespace`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: the root or a malformed namespace, or ``txn`` is not a
                transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as lake:
            return [name.split(".") for name in lake.list_tables(_namespace(args))]

    def op_load_table(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Table ``name`` as the plugin sees it.

        Its id, name parts, the lakehouse version read (-1 inside ``txn``),
        its Spark schema with each column's field id, partition columns,
        properties (with the catalog's ``provider``, ``location``,
        ``lakekv.version``, ``lakekv.table-id``), and where its data files
        are: ``data_root`` when Spark's own reader can read them (else None:
        reads go through the Python source) and ``data_path``.

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, a table that is not
                native (an Iceberg table), or ``txn`` is not a transaction id.
            NoSuchTableError: no such table in the session.
            NotAtVersionError: pinned to a version (``version`` or
                ``timestamp_us``) the table did not exist at, although it exists
                now; the message names that version and the table's first.
            TypeError: a column's type has no lossless Spark type.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as session:
            pinned = args.get("version") is not None or args.get("timestamp_us") is not None
            try:
                # Pinned: the table named so now, at that version (it follows renames).
                table = self._load_pinned(session, _name(args)) if pinned else session.load_table(_name(args))
            except errors.NoSuchTableError:
                if not pinned:
                    raise
                self._raise_not_at_version(_name(args), self._version_of(session))
                raise
            return self._describe(session, table, self._version_of(session) if args.get("txn") is None else -1)

    def _raise_not_at_version(self, name: str, version: int) -> None:
        """Raise :class:`NotAtVersionError` if table ``name`` exists now (it did not at ``version``)."""
        self._lake.refresh()
        if not self._lake.table_exists(name):
            return  # no such table at all: Spark's own "not found" says it
        touched = self._lake.history(limit=None, table=name)  # newest first; the oldest created it
        first = f" (created at version {touched[-1].version})" if touched else ""
        raise NotAtVersionError(f"table {name!r} did not exist at lakehouse version {version}{first}")

    def op_load_relation(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """A table (``{"table": ...}``) or a view (``{"view": ...}``) by name: one request for Spark's resolver."""
        try:
            return {"table": self.op_load_table(args)}
        except errors.NoSuchTableError:
            return {"view": self.op_load_view(args)}

    def op_create_table(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Create table ``name`` from Spark's JSON ``schema``, ``partitioning`` and ``properties``; describe it.

        With ``replace``, an existing table of that name is dropped first (in
        the same session, not atomically outside ``txn``). The answer is
        :meth:`op_load_table`'s, at the version after the create.

        Raises:
            ProtocolError: ``name`` or ``partitioning`` is not a list of names,
                ``properties`` not an object of strings, ``schema`` not an object or
                with a comment that is not a string, or a session argument has
                the wrong type.
            KeyError, ValueError, TypeError: a ``schema`` pyspark cannot read (see
                :func:`arrow_schema`).
            ValueError: a name without a namespace or malformed; a property Spark
                reserves that is refused (``location``, ``external``, a provider
                other than lakehouse or parquet, an ``option.*``, or one the catalog
                sets); a bad partition column; or ``txn`` is not a transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            TableAlreadyExistsError: a table or view of that name exists (and it is
                not a table being replaced).
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        schema = arrow_schema(args.get("schema"))
        partitioning = _parts(args, "partitioning") if args.get("partitioning") else []
        properties = self._table_properties(_dict_of_str(args, "properties"))
        if WRITE_ORDER_PROPERTY in properties:
            check_write_order(properties[WRITE_ORDER_PROPERTY], schema.names)
        with self._session(args) as session:
            if args.get("replace") and session.table_exists(name):
                session.drop_table(name)
            table = session.create_table(name, schema, partition_by=partitioning or None, properties=properties or None)
            version = -1 if args.get("txn") else self._lake.refresh()
            return self._describe(session, table, version)

    @staticmethod
    def _table_properties(given: dict[str, str]) -> dict[str, str]:
        """The properties a new table stores: Spark's reserved ones checked, shown ones refused."""
        kept: dict[str, str] = {}
        for key, value in given.items():
            if key in _REFUSED_RESERVED:
                raise ValueError(_REFUSED_RESERVED[key])
            if key == "provider":
                if value.lower() not in _PROVIDERS:
                    raise ValueError(f"USING {value}: lakehouse tables are stored as Parquet (USING lakehouse or parquet)")
                continue
            if key.startswith(_OPTION_PREFIX):
                raise ValueError(f"table option {key[len(_OPTION_PREFIX):]!r} (OPTIONS) is not supported by the lakehouse catalog")
            if key in _IGNORED_RESERVED or key in _DESCRIBING:
                # _DESCRIBING: what SHOW CREATE TABLE prints of the table it ran on; its
                # output runs as written, and the new table gets its own id and version.
                continue
            if key in SHOWN_PROPERTIES:
                raise ValueError(f"table property {key!r} is set by the catalog and cannot be given")
            kept[key] = value
        return kept

    def op_alter_table(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one ALTER TABLE's ``changes`` to table ``name``; answers :meth:`op_load_table`'s description.

        Supported: setting and removing properties (one commit), and adding,
        renaming, dropping, widening and commenting top-level columns (one
        schema commit).

        Raises:
            ProtocolError: ``changes`` is not a non-empty list, a name or column is
                not a list of names, a comment not a string, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, an unsupported
                change (a nested column, any other ALTER), a property the catalog
                sets, a schema change that cannot apply (e.g. a type that is not a
                widening), or ``txn`` is not a transaction id.
            KeyError, TypeError: a column's data type pyspark cannot read (see
                :func:`arrow_schema`), or a property key, value or new column name
                of the wrong type.
            NoSuchTableError: no such table.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        changes = args.get("changes")
        if not isinstance(changes, list) or not changes:
            raise ProtocolError("argument 'changes' must be a non-empty list")
        with self._session(args) as session:
            return self._alter_table(session, name, changes)

    def _alter_table(self, session: Any, name: str, changes: list[Any]) -> dict[str, Any]:
        table = session.load_table(name)
        schema_change = table.update_schema()
        schema_steps = 0
        updates: dict[str, str] = {}
        removals: list[str] = []
        for change in changes:
            kind = change.get("type") if isinstance(change, dict) else None
            if kind == "set_property":
                key, value = change.get("key"), change.get("value")
                if key in SHOWN_PROPERTIES or key in _REFUSED_RESERVED or key == "provider":
                    raise ValueError(f"table property {key!r} is set by the catalog and cannot be changed")
                updates[key] = value
            elif kind == "remove_property":
                removals.append(change.get("key"))
            elif kind == "add_column":
                column = _parts(change, "column")
                if len(column) != 1:
                    raise ValueError(f"ALTER TABLE ADD COLUMN {'.'.join(column)}: only top-level columns can be added")
                schema_change.add_column(column[0], arrow_type(change.get("data_type"), column[0]))
                if change.get("comment") is not None:
                    schema_change.set_comment(column[0], _comment(change))
                schema_steps += 1
            elif kind == "rename_column":
                column = _parts(change, "column")
                if len(column) != 1:
                    raise ValueError(f"ALTER TABLE RENAME COLUMN {'.'.join(column)}: only top-level columns can be renamed")
                schema_change.rename_column(column[0], change.get("new_name"))
                schema_steps += 1
            elif kind == "drop_column":
                column = _parts(change, "column")
                if len(column) != 1:
                    raise ValueError(f"ALTER TABLE DROP COLUMN {'.'.join(column)}: only top-level columns can be dropped")
                if change.get("if_exists") and column[0] not in table.schema.names:
                    continue
                schema_change.drop_column(column[0])
                schema_steps += 1
            elif kind == "update_column_type":
                column = _parts(change, "column")
                if len(column) != 1:
                    raise ValueError(f"ALTER COLUMN {'.'.join(column)} TYPE: only top-level columns can change type")
                schema_change.widen(column[0], arrow_type(change.get("data_type"), column[0]))
                schema_steps += 1
            elif kind == "update_column_comment":
                column = _parts(change, "column")
                if len(column) != 1:
                    raise ValueError(f"ALTER COLUMN {'.'.join(column)} COMMENT: only top-level columns have comments")
                schema_change.set_comment(column[0], _comment(change))
                schema_steps += 1
            else:
                raise ValueError(f"ALTER TABLE: {change.get('sql', kind) if isinstance(change, dict) else change!r} is not supported by the lakehouse catalog")
        if WRITE_ORDER_PROPERTY in updates:
            check_write_order(updates[WRITE_ORDER_PROPERTY], table.schema.names)
        # Schema then properties: Spark sends one kind per ALTER statement.
        if schema_steps:
            schema_change.commit()
        if updates or removals:
            session.load_table(name).update_properties(updates or None, removals or None)
        table = session.load_table(name)
        return self._describe(session, table, -1 if session is not self._lake else self._lake.refresh())

    def op_can_delete_where(self, args: Mapping[str, Any]) -> bool:
        """Whether ``delete_where`` takes this condition (an exact form); if not, Spark rewrites the files itself."""
        name = _name(args)
        with self._session(args) as session:
            table = session.load_table(name)
        try:
            condition = exact_condition(args.get("filters"), table.schema)
        except ValueError:
            return False
        # An iceberg table's delete is pyiceberg's: the condition must have an exact Iceberg form too.
        return table.format != iceberg_tables.ICEBERG or iceberg_tables.iceberg_filter(condition, exact=True) is not None

    def op_delete_where(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``DELETE FROM t WHERE ...``: one catalog commit; files the condition covers go unread.

        Answers the new lakehouse version (None inside ``txn``, where it is staged).

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, a condition
                (``filters``) with no exact translation (see
                :meth:`op_can_delete_where`), a table that is not native, or ``txn``
                is not a transaction id.
            NoSuchTableError: no such table, or it is not table ``id`` the statement
                loaded (dropped or replaced since).
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        with self._session(args) as session:
            table = session.load_table(name)
            if table.id != args.get("id"):
                raise errors.NoSuchTableError(f"table {name!r} was dropped or replaced since the statement loaded it")
            condition = exact_condition(args.get("filters"), table.schema)
            version = table.delete(condition)
        return {"version": version}

    def op_commit_written(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the files Spark's writer wrote (see :meth:`_commit_written`); a stream's batch again on a conflict.

        Answers ``{"version": ...}`` (None when nothing was committed or it was
        staged in ``txn``), with ``"duplicate": true`` for a stream batch
        committed before.

        Raises:
            ProtocolError: a malformed argument: ``name`` or ``files`` (each
                ``{"path", "crc32c"}``, a new Parquet file directly under the
                table's location), ``txn``, ``stream``, ``overwrite`` or
                ``replace`` (or a path in ``removed`` that was not a data file
                at the version read).
            ValueError: a name without a namespace or malformed, a stream batch with
                ``txn``, malformed ``reads`` or filters, a condition with no exact
                translation, a file holding more than one value of a partition
                column, a ``read_version`` the table did not exist at (as this
                table), or ``txn`` is not a transaction id.
            NoSuchTableError: no such table, or it is not table ``id`` the statement
                loaded (dropped or replaced since).
            RetryableConflictError: a table the query read changed where it read
                since; a file committed or removed since the version read may hold
                rows the overwrite or rewrite did not see; a file the rewrite read
                is no longer live (inside ``txn``: the transaction removed it); or
                the commit lost to a concurrent commit (for a stream batch, 20
                times in a row).
            IncompatibleConflictError: the commit no longer makes sense.
            CorruptDataFileError: a written file is not Parquet, or its footer is
                unreadable.
            FileNotFoundError, ObjectStoreError: a written file is missing, or
                reading its footer failed.
            StaleDataFileError: the files got too old to publish before the commit.
            SnapshotTooOldError: a version read is past retention.
            TransactionStateError, DurableTransactionExpiredError: ``txn`` does not
                exist or is not active.
            LockConflictError: a durable transaction's lock forbids the commit.
        """
        stream = _stream_arg(args)
        if stream is None:
            return self._commit_written(args)
        if args.get("txn") is not None:
            raise ValueError("a streaming write cannot be staged in a durable transaction: each micro-batch commits on its own")
        # Another stream's batch or a property change on the same table conflicts with the
        # batch-id bookkeeping (properties x properties): commit again, the duplicate check included.
        for attempt in range(_STREAM_ATTEMPTS):
            try:
                return self._commit_written(args)
            except errors.RetryableConflictError:
                if attempt == _STREAM_ATTEMPTS - 1:
                    raise
                time.sleep(backoff_delay(attempt, 0.01, 0.5))
        raise AssertionError("unreachable")

    def _commit_written(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Commit Parquet files Spark's own writer put under the table's location, in one commit.

        ``files``: ``[{"path", "crc32c"}]``, store-relative; each entry is
        built from the file's footer. Without more it is an append (staged in
        durable transaction ``txn`` if given). Then one of:

        * ``overwrite``: ``{"read_version", "condition", "dynamic"}``, what
          INSERT OVERWRITE and ``writeTo`` replace, as for the Python writer
          (see catalog.spark.commits);
        * ``replace`` (a copy-on-write UPDATE or MERGE):
          ``{"version", "removed", "filters"}``, the version the rewrite read,
          the paths of the files it read (all of whose rows the new files
          hold) and the filters that chose them (``"read": false``: Spark
          planned no scan, so it is an append). A commit since ``version``
          that may add such rows, or a removed file no longer live, is a
          ``RetryableConflictError`` and nothing changes.

        ``stream``: ``{"query_id", "batch"}`` for a micro-batch of a streaming
        query. The commit also sets table property
        ``lakekv.stream.<query_id>.batch`` to the batch id; a batch id not
        above the one recorded was committed before (the query restarted
        between this commit and its own commit log): nothing is committed
        and the answer says ``"duplicate": true``.
        """
        name, txn = _name(args), args.get("txn")
        overwrite, replace = args.get("overwrite"), args.get("replace")
        if isinstance(replace, Mapping) and replace.get("read") is False:
            replace = None  # Spark planned no scan of the table: the rewrite read and replaces nothing
        ours = "append" if overwrite is None and replace is None else "overwrite"
        stream = _stream_arg(args)
        # A write inside a durable transaction (a staged CREATE TABLE AS SELECT, or the session's
        # transaction) is staged and commits with it; either way what its query read is checked
        # at the commit (catalog.spark.commits.reads_checked).
        if txn is not None:
            if not isinstance(txn, str):
                raise ProtocolError("argument 'txn' must be a transaction id")
            session_of = reads_checked(self._lake, args.get("reads"), ours, name, transaction=txn)
        elif stream is not None:
            self._lake.refresh()
            session_of = self._lake.transaction()  # the files and the batch id commit together
        else:
            session_of = reads_checked(self._lake, args.get("reads"), ours, name)
        with session_of as session:
            table = session.load_table(name)
            if table.id != args.get("id"):
                raise errors.NoSuchTableError(f"table {name!r} was dropped or replaced since the statement loaded it")
            if table.format == iceberg_tables.ICEBERG:
                what = "UPDATE or MERGE" if replace is not None else "a write of Spark's own Parquet files"
                raise ValueError(
                    f"table {name!r} is an iceberg table: {what} is not supported on it from Spark; nothing was "
                    "written (INSERT INTO and DELETE FROM are; or change it with pyiceberg)"
                )
            if stream is not None:
                batch_key = f"{_STREAM_PREFIX}{stream[0]}.batch"
                done = table.properties.get(batch_key)
                if done is not None and int(done) >= stream[1]:
                    return {"version": None, "duplicate": True}
                table.update_properties({batch_key: str(stream[1])})
                table = session.load_table(name)
            added = [self._written_entry(table, entry) for entry in _list_arg(args, "files")]
            if overwrite is not None:
                version = self._overwrite_with(table, added, overwrite)
            elif replace is not None:
                version = self._replace_with(table, added, replace, staged=txn is not None)
            else:
                version = table.commit_files(added, mode="append") if added else None
        if version is None and txn is None and session is not self._lake:
            version = session.version  # committed by the read-checking transaction (None if it changed nothing)
        return {"version": version}

    def _overwrite_with(self, table: catalog.Table, added: list[DataFile], overwrite: object) -> int | None:
        if not isinstance(overwrite, Mapping):
            raise ProtocolError("argument 'overwrite' must be {'read_version': int?, 'condition': [...]?, 'dynamic': bool}")
        dynamic = overwrite.get("dynamic") is True
        if dynamic and not added:
            return None  # no row written: no partition replaced, no empty version
        read_version = overwrite.get("read_version")
        read_files = None
        if read_version is not None:
            if not isinstance(read_version, int) or isinstance(read_version, bool):
                raise ProtocolError("argument 'read_version' must be an int")
            read_files = files_read_at(self._lake, table.name, table.id, read_version)
        replaced = replaced_rows(table, added, overwrite.get("condition"), dynamic)
        return table.commit_files(added, mode="overwrite", filter=replaced, read_files=read_files)

    def _replace_with(self, table: catalog.Table, added: list[DataFile], replace: object, staged: bool) -> int | None:
        if not isinstance(replace, Mapping) or not isinstance(replace.get("version"), int):
            raise ProtocolError("argument 'replace' must be {'version': int, 'removed': [...], 'filters': [...]}")
        removed_paths = set(_list_arg(replace, "removed"))
        if staged:
            # Read inside a durable transaction: its view has no lakehouse version. The files
            # read must still be live in it; the staged op's conflict rules apply at its commit.
            read_files = table.files()
            removed = [f for f in read_files if f.path in removed_paths]
            if len(removed) != len(removed_paths):
                raise errors.RetryableConflictError(
                    f"the rewrite of {table.name!r} read a data file that its transaction has removed since; "
                    "nothing was staged: run the statement again",
                    ours="overwrite",
                    object=table.name,
                )
        else:
            read_files = files_read_at(self._lake, table.name, table.id, replace["version"])
            removed = [f for f in read_files if f.path in removed_paths]
            if len(removed) != len(removed_paths):
                raise ProtocolError(f"table {table.name!r}: a removed path was not a data file at version {replace['version']}")
        if not removed and not added:
            return None  # the rewrite read no file and wrote no row: nothing changed
        scope = pruning_expression(spark_filters(replace.get("filters") or []), table.schema)
        return table.commit_files(added, mode="replace", replaced=removed, read_files=read_files, filter=scope)

    def _written_entry(self, table: catalog.Table, entry: object) -> DataFile:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str) or not isinstance(entry.get("crc32c"), int):
            raise ProtocolError("each written file must be {'path': str, 'crc32c': int}")
        path = entry["path"]
        parent, _, file_name = path.rpartition("/")
        if parent != table.location or not file_name.endswith(".parquet") or not file_name[: -len(".parquet")].isalnum():
            raise ProtocolError(f"written file {path!r} is not a new file directly under the table's location {table.location!r}")
        return entry_from_footer(self._lake.objects, path, entry["crc32c"], table.schema, list(table.partition_by))

    def op_drop_table(self, args: Mapping[str, Any]) -> bool:
        """Drop table ``name``; answers whether it existed.

        Without ``purge`` its files stay for time travel until gc; with it
        (Spark's ``purgeTable``) they are deleted before the answer.

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, ``purge`` inside
                ``txn``, or ``txn`` is not a transaction id.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            ObjectStoreError: with ``purge``, deleting a file failed (the drop is
                committed; gc deletes what is left).
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        purge = bool(args.get("purge"))
        if purge and args.get("txn") is not None:
            raise ValueError(
                f"DROP TABLE {name} PURGE inside durable transaction {args['txn']}: a purge deletes the data at "
                "once, which the transaction could not undo; drop the table without PURGE (its files go at gc "
                "after the transaction commits)"
            )
        with self._session(args) as session:
            if not session.table_exists(name):
                return False
            table_id = session.load_table(name).id
            session.drop_table(name, purge=purge)
        if purge:
            # Spark's purgeTable: the data is gone when the statement returns
            # (without PURGE the files stay for time travel until gc).
            purge_dropped(self._lake.context, table_id)
        return True

    def op_rename_table(self, args: Mapping[str, Any]) -> None:
        """Rename table ``old`` to ``new`` (both name parts; staged in ``txn`` if given).

        Raises:
            ProtocolError: ``old`` or ``new`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: a name without a namespace or malformed, or ``txn`` is not a
                transaction id.
            NoSuchTableError: no table ``old``.
            NoSuchNamespaceError: the namespace of ``new`` does not exist.
            TableAlreadyExistsError: a table or view named ``new`` exists.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as session:
            session.rename_table(_name(args, "old"), _name(args, "new"))

    def op_plan_scan(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The data files a scan at ``version`` reads, pruned by the pushed ``filters``.

        Answers each file's path, size and rows, what its reader checks
        before it trusts the file's footer (see :func:`_planned_file`), and
        whether every file records Parquet field ids (else Spark reads them
        through the Python source).

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, a malformed filter,
                a table that is not native, or ``txn`` is not a transaction id.
            NoSuchTableError: no such table in the session, or it is not table
                ``id`` the query was planned on.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        with self._session(args) as session:
            table = session.load_table(name)
            if table.id != args.get("id"):
                raise errors.NoSuchTableError(f"table {name!r} at version {args.get('version')} is not the table the query was planned on")
            expression = pruning_expression(spark_filters(args.get("filters") or []), table.schema)
            if table.format == iceberg_tables.ICEBERG:
                return self._plan_iceberg(table, expression)
            if expression is None:  # every file: the columnar plan, in file-key order as files() lists them
                plan = table.files_table()
                plan = plan.take(pc.sort_indices(plan.column("id")))
                return {
                    "files": planned_files(plan),
                    "parquet_field_ids": bool(pc.all(plan.column("parquet_field_ids")).as_py() is not False),
                }
            files = table.files(filter=expression)
        return {
            "files": [_planned_file(f) for f in files],
            # Spark's Parquet reader matches columns by the files' own field
            # ids; files written before they were recorded go through the
            # Python source, which matches by the ids in the stored Arrow schema.
            "parquet_field_ids": all(f.parquet_field_ids for f in files),
        }

    def _plan_iceberg(self, table: catalog.Table, expression: Any) -> dict[str, Any]:
        """pyiceberg's plan of an iceberg table's scan. Spark's own reader takes it (``parquet_field_ids``)
        only when no file has delete files, every file lies under the store root, the table has no
        name mapping (files added without field ids, which Spark's reader matches columns by), and its format
        version is below 3 (column default values)."""
        iceberg = table.iceberg_table()
        tasks = iceberg_tables.plan(iceberg, expression)
        files = []
        # A version 3 table's columns may have default values that older files
        # lack: Spark's reader would read them as NULL, pyiceberg's fills them in.
        jvm = "schema.name-mapping.default" not in iceberg.metadata.properties and iceberg.metadata.format_version < 3
        for task in tasks:
            relative = self._relative(task.file.file_path)
            jvm = jvm and relative is not None and not task.delete_files
            files.append({"path": relative or task.file.file_path, "size": task.file.file_size_in_bytes,
                          "rows": task.file.record_count})
        return {"files": files, "parquet_field_ids": jvm}

    # -- durable transactions: staged CREATE TABLE AS SELECT / REPLACE --

    def op_begin(self, args: Mapping[str, Any]) -> str:
        """A new durable transaction (a child of ``parent``, if given: a staged CTAS inside a session's transaction).

        Answers its id; ``timeout_s`` and ``title`` (default ``"spark"``) are
        passed on.

        Raises:
            ProtocolError: ``parent`` is not a string, or ``timeout_s`` not a number.
            ValueError: a bad ``timeout_s``, or ``parent`` is not a transaction id.
            TransactionStateError, DurableTransactionExpiredError: ``parent`` does
                not exist or is not active.
        """
        parent = args.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise ProtocolError("argument 'parent' must be a transaction id")
        timeout = args.get("timeout_s")
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)):
            raise ProtocolError("argument 'timeout_s' must be a number of seconds")
        txn = self._lake.begin_durable(timeout=timeout, parent=parent, title=str(args.get("title") or "spark"))
        return str(txn.id)

    def op_commit(self, args: Mapping[str, Any]) -> int:
        """Commit durable transaction ``txn``: answers the lakehouse version it made, or -1 if it went into its parent.

        Raises:
            ProtocolError: ``txn`` is not a string.
            ValueError: ``txn`` is not a transaction id.
            TransactionStateError: no such transaction, it is already committed or
                aborted, or a child of it is still open.
            DurableTransactionExpiredError: it or an ancestor expired.
            RetryableConflictError: a read check or staged operation no longer holds
                against what others committed; nothing is applied.
            IncompatibleConflictError, NoSuchTableError: a staged operation no
                longer applies to the catalog (e.g. its table was dropped).
        """
        txid = args.get("txn")
        if not isinstance(txid, str):
            raise ProtocolError("argument 'txn' must be a transaction id")
        version = self._lake.attach(txid).commit()
        return -1 if version is None else int(version)  # -1: committed into its parent transaction

    def op_abort(self, args: Mapping[str, Any]) -> None:
        """Abort durable transaction ``txn`` and its descendants; a no-op if it already aborted or expired.

        Raises:
            ProtocolError: ``txn`` is not a string.
            ValueError: ``txn`` is not a transaction id.
            TransactionStateError: no such transaction, or it is already committed.
        """
        txid = args.get("txn")
        if not isinstance(txid, str):
            raise ProtocolError("argument 'txn' must be a transaction id")
        self._lake.attach(txid).abort()

    # -- views --

    def op_list_views(self, args: Mapping[str, Any]) -> list[list[str]]:
        """The views of namespace ``namespace``, each as its name parts.

        Raises:
            ProtocolError: ``namespace`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: the root or a malformed namespace, or ``txn`` is not a
                transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        with self._session(args) as lake:
            return [name.split(".") for name in lake.list_views(_namespace(args))]

    def op_load_view(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """View ``name`` as Spark needs it: its SQL, properties, schema and resolution context.

        Whoever made the view: Spark's own view metadata (schema, catalog and
        namespace, query column names, SQL configs, schema mode) is what
        :meth:`op_create_view` kept. A view made by the Python API or over the
        Iceberg REST API answers the schema its creator gave (``None`` when
        it gave none: the plugin then analyses the SQL, see
        ``LakehouseCatalog.loadView``), the Iceberg version's default
        namespace (else the view's own namespace, where single names then
        resolve) and catalog (else ``None``: the plugin's own catalog).

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, ``txn`` is not
                a transaction id, or the view's SQL is in a dialect other than
                Spark's.
            NoSuchViewError: no such view.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        with self._session(args) as lake:
            view = lake.load_view(name)
        if view.dialect.lower() != "spark":
            raise ValueError(
                f"view {name} is written in SQL dialect {view.dialect!r}: Spark reads views whose SQL is in "
                "dialect 'spark' (over the Iceberg REST API, give the view version a 'spark' representation)"
            )
        metadata = view.metadata if isinstance(view.metadata, dict) else {}
        spark = metadata.get("spark") if isinstance(metadata.get("spark"), dict) else {}
        if spark:
            return {
                "sql": view.sql,
                "properties": dict(view.properties),
                "schema": spark.get("schema"),
                "catalog": spark.get("catalog"),
                "namespace": spark.get("namespace") or [],
                "query_column_names": spark.get("query_column_names") or [],
                "sql_configs": spark.get("sql_configs") or {},
                "schema_mode": spark.get("schema_mode"),
            }
        version = _iceberg_view_version(metadata)
        return {
            "sql": view.sql,
            "properties": dict(view.properties),
            "schema": _view_schema_json(view.schema),
            "catalog": version.get("default-catalog"),
            "namespace": version.get("default-namespace") or name.split(".")[:-1],
            "query_column_names": [],
            "sql_configs": {},
            "schema_mode": None,
        }

    def op_create_view(self, args: Mapping[str, Any]) -> None:
        """Create view ``name`` of Spark SQL ``sql``, keeping Spark's view metadata with it (see :meth:`op_load_view`).

        With ``replace``, an existing view of that name is replaced instead.

        Raises:
            ProtocolError: ``sql`` is empty or not a string, ``name`` not a list of
                names, ``sql_configs`` or ``properties`` not an object of strings,
                ``schema`` not an object or with a comment that is not a string, or
                a session argument has the wrong type.
            KeyError, ValueError, TypeError: a ``schema`` pyspark cannot read (see
                :func:`arrow_schema`).
            ValueError: a name without a namespace or malformed, a malformed
                property, or ``txn`` is not a transaction id.
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or table of that name exists (a view only
                without ``replace``).
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        sql = args.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise ProtocolError("argument 'sql' must be the view's query text")
        spark = {
            "schema": args.get("schema"),
            "catalog": args.get("catalog"),
            "namespace": args.get("namespace") or [],
            "query_column_names": args.get("query_column_names") or [],
            "sql_configs": _dict_of_str(args, "sql_configs"),
            "schema_mode": args.get("schema_mode"),
        }
        schema = arrow_schema(args.get("schema")) if args.get("schema") else None
        properties = _dict_of_str(args, "properties") or None
        with self._session(args) as session:
            if args.get("replace") and session.view_exists(name):
                session.replace_view(name, sql, properties=properties, schema=schema, metadata={"spark": spark})
                return
            session.create_view(name, sql, properties=properties, schema=schema, metadata={"spark": spark})

    def op_drop_view(self, args: Mapping[str, Any]) -> bool:
        """Drop view ``name``; answers whether it existed.

        Raises:
            ProtocolError: ``name`` is not a list of names, or a session argument
                has the wrong type.
            ValueError: a name without a namespace or malformed, or ``txn`` is not
                a transaction id.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        name = _name(args)
        with self._session(args) as session:
            if not session.view_exists(name):
                return False
            session.drop_view(name)
        return True

    def op_rename_view(self, args: Mapping[str, Any]) -> None:
        """Rename view ``old`` to ``new``: create ``new`` with ``old``'s definition and drop ``old``, together.

        Both steps commit as one: in one lakehouse transaction, or staged in ``txn``.

        Raises:
            ProtocolError: ``old`` or ``new`` is not a list of names, or a session
                argument has the wrong type.
            ValueError: a name without a namespace or malformed, or ``txn`` is not
                a transaction id.
            NoSuchViewError: no view ``old``.
            NoSuchNamespaceError: the namespace of ``new`` does not exist.
            ViewAlreadyExistsError: a view or table named ``new`` exists.
            ReadOnlyError: the request is pinned to a past version.
            RetryableConflictError, IncompatibleConflictError: it lost to a
                concurrent commit.
            LockConflictError: a durable transaction's lock forbids it.
            SnapshotTooOldError, TransactionStateError, DurableTransactionExpiredError:
                the session (see :class:`ControlPlane`).
        """
        old, new = _name(args, "old"), _name(args, "new")
        with self._session(args) as session:
            view = session.load_view(old)
            # Both steps commit together: in one lakehouse transaction, or with the durable one.
            with session.transaction() if session is self._lake else nullcontext(session) as tx:
                tx.create_view(new, view.sql, dialect=view.dialect, properties=dict(view.properties) or None, schema=view.schema, metadata=view.metadata)
                tx.drop_view(old)

    # -- the Python data source, for the JVM to register in its session --

    def op_data_source(self, args: Mapping[str, Any]) -> dict[str, str]:
        """The pickled ``CatalogScanSource`` class (by reference) and its short name."""
        from catalog.spark.source import CatalogScanSource

        return {"name": CatalogScanSource.name(), "pickle": base64.b64encode(pickle.dumps(CatalogScanSource)).decode()}


_STREAM_PREFIX: Final = "lakekv.stream."
_STREAM_ATTEMPTS: Final = 20


def _stream_arg(args: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(query_id, batch)`` of a streaming micro-batch commit, or None."""
    stream = args.get("stream")
    if stream is None:
        return None
    query_id = stream.get("query_id") if isinstance(stream, Mapping) else None
    batch = stream.get("batch") if isinstance(stream, Mapping) else None
    if (
        not isinstance(query_id, str) or not query_id or "." in query_id
        or not isinstance(batch, int) or isinstance(batch, bool) or batch < 0
    ):
        raise ProtocolError("argument 'stream' must be {'query_id': str without '.', 'batch': int >= 0}")
    return query_id, batch


def _local_path(uri: str) -> str:
    """A URI as the plugin compares it with ``data_root``: a ``file:`` URI
    (``file:/p``, ``file:///p``) as its path, ``s3://`` as ``s3a://`` (Hadoop's
    scheme for the same object); anything else unchanged."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("file:"):
        return uri[len("file:"):]
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://"):]
    return uri


def data_root(lake: catalog.Lakehouse) -> str | None:
    """The Hadoop URL of the store root, where the JVM may read and write data files itself.

    A local directory is ``file://<path>``; ``s3://bucket/prefix`` is
    ``s3a://bucket/prefix`` (the plugin takes it only where Spark has
    ``hadoop-aws``, and gives S3A the catalog's endpoint and keys); any other
    store (``memory://``) is None: the Python source reads and writes.
    """
    url = lake.url.split("?", 1)[0]
    if "://" not in url:
        import os

        return "file://" + os.path.abspath(url)
    if url.startswith("file://"):
        return "file://" + url[len("file://"):]
    if url.startswith("s3://"):
        return "s3a://" + url[len("s3://"):].rstrip("/")
    return None


# -- the no-server transport ------------------------------------------------------------


def serve_stdio(inp: IO[str], out: IO[str]) -> None:
    """Answer line-delimited JSON requests until ``inp`` closes; the first must be ``open``.

    ``open`` args: ``url`` and ``options`` (storage options such as
    ``endpoint_url``/``key``/``secret``).
    """
    plane: ControlPlane | None = None
    lake: catalog.Lakehouse | None = None
    try:
        for line in inp:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except ValueError as exc:
                answer = error_answer(ProtocolError(f"a request must be one line of JSON: {exc}"))
            else:
                if plane is None:
                    try:
                        lake, plane = _open(request)
                        answer = {"ok": True, "result": plane.op_hello({})}
                    except Exception as exc:  # the JVM shows why the catalog could not start
                        answer = error_answer(exc)
                else:
                    answer = plane.handle(request)
            out.write(json.dumps(answer, separators=(",", ":")) + "\n")
            out.flush()
    finally:
        if lake is not None:
            lake.close()


def _open(request: object) -> tuple[catalog.Lakehouse, ControlPlane]:
    if not isinstance(request, dict) or request.get("op") != "open":
        raise ProtocolError("the first request must be open")
    args = request.get("args") or {}
    url = args.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("catalog option url (the lakehouse URL) is required")
    options = store_options(_dict_of_str(args, "options"), "catalog option ")
    lake = catalog.open(url, create=True, **options)
    return lake, ControlPlane(lake, data_root(lake))


def main() -> None:
    """``python -m catalog.spark``: the control plane on stdin/stdout, for one JVM catalog."""
    # stdout carries answers only: anything a library prints goes to stderr.
    answers = sys.stdout
    sys.stdout = sys.stderr
    serve_stdio(sys.stdin, answers)
