"""Iceberg views on the catalog: every catalog view, whoever created it.

A view made over this API is a catalog view whose ``metadata`` holds the
whole Iceberg view metadata (a small JSON document: versions, schemas, SQL
representations); its ``sql``/``dialect`` mirror the current version's Spark
representation (else its first) and its ``schema`` the current version's
schema, so Spark and the Python API read it as they read any view.

A view made by Spark SQL or the Python API has no such document: its Iceberg
metadata is derived from the catalog view at each load (:func:`derived`), a
pure function of the view, so two servers derive the same one. A view without
a schema (the Python API's ``create_view`` takes none) gets a schema with no
fields here: only an engine that analyses the SQL knows its columns (Spark
does, at load).

Every load answers a ``metadata-location`` (the REST spec's
``LoadViewResult`` requires one): the metadata JSON is written under the
view's location in the warehouse, named after its catalog version and a hash
of its content, so two servers write the same file. The file is a cache for
clients that read it, never read back here: the catalog view is the source of
truth, and a lost file is written again at the next load.

A view is registered from a metadata file inside the warehouse
(``register-view``): its metadata becomes the catalog view's, as if made here.

Replacing a view applies the Iceberg view updates this server understands
(``assign-uuid``, ``upgrade-format-version`` to 1, ``add-schema``,
``set-location``, ``set-properties``, ``remove-properties``,
``add-view-version``, ``set-current-view-version``); any other action is 400.
The one view requirement, ``assert-view-uuid``, is checked: 409 if it fails.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pydantic import ValidationError
from pyiceberg.catalog import Catalog
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.view.metadata import ViewMetadata, ViewVersion

from service.errors import ApiError
from service.iceberg.warehouse import Warehouse

_LAST_ADDED: Final = -1  # set-current-view-version: "the version added in this request"
SPARK: Final = "spark"
METADATA_PATH: Final = "write.metadata.path"  # a view property: where its metadata files go
# The namespace of the derived view UUIDs (uuid5): a view's UUID is a pure
# function of its name and creation time, the same on every server.
_VIEW_UUIDS: Final = uuid.UUID("6c616b65-6b76-5669-6577-000000000001")


@dataclass(frozen=True)
class Loaded:
    """A view's Iceberg metadata and the file that holds a copy of it."""

    metadata_location: str
    metadata: ViewMetadata


def _current_version(metadata: ViewMetadata) -> ViewVersion:
    return next(v for v in metadata.versions if v.version_id == metadata.current_version_id)


def _sql_of(metadata: ViewMetadata) -> tuple[str, str]:
    """The current version's Spark SQL representation, else its first: what the catalog view mirrors."""
    representations = [r.root for r in _current_version(metadata).representations]
    chosen = next((r for r in representations if r.dialect.lower() == SPARK), representations[0])
    return chosen.sql, chosen.dialect


def _arrow_schema(metadata: ViewMetadata) -> pa.Schema:
    version = _current_version(metadata)
    schema = next(s for s in metadata.schemas if s.schema_id == version.schema_id)
    return schema_to_pyarrow(schema, include_field_ids=False)


def to_catalog(lake: Any, name: str, metadata: ViewMetadata, replace: bool) -> None:
    """Store ``metadata`` as catalog view ``name``, with the SQL and schema every engine reads."""
    sql, dialect = _sql_of(metadata)
    document = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
    schema = _arrow_schema(metadata)
    properties = dict(metadata.properties)
    if replace:
        lake.replace_view(name, sql=sql, dialect=dialect, properties=properties, schema=schema, metadata=document)
    else:
        lake.create_view(name, sql, dialect=dialect, properties=properties, schema=schema, metadata=document)


def _stored(view: Any) -> ViewMetadata | None:
    """The Iceberg metadata stored with ``view`` (made over this API), or None."""
    if not isinstance(view.metadata, dict) or "view-uuid" not in view.metadata:
        return None
    return ViewMetadata.model_validate(view.metadata)


def _iceberg_schema(schema: pa.Schema | None) -> Schema:
    if schema is None or len(schema) == 0:
        return Schema(schema_id=0)
    # pyiceberg's own conversion of an Arrow schema without field ids
    # (what its create_table/create_view do), then ids 1..n.
    plain = pa.schema([f.remove_metadata() for f in schema])
    return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(plain))


def derived(view: Any, warehouse: Warehouse, outdated: ViewMetadata | None = None) -> ViewMetadata:
    """Iceberg metadata for catalog view ``view`` that was not made over this API
    (or whose ``outdated`` Iceberg metadata no longer describes it: its UUID and location are kept).

    A pure function of the view (and the warehouse root): its UUID comes from
    its name and creation time, its location from its name and UUID, its one
    version from its SQL, schema and catalog version. A view made by Spark
    keeps Spark's catalog and namespace as the version's defaults; any other
    resolves single names in its own namespace.
    """
    namespace, short = view.name.rsplit(".", 1)
    spark = (view.metadata or {}).get(SPARK) if isinstance(view.metadata, dict) else None
    spark = spark if isinstance(spark, dict) else {}
    view_uuid = outdated.view_uuid if outdated else str(uuid.uuid5(_VIEW_UUIDS, f"{view.name}\x00{view.created_ms}"))
    location = outdated.location if outdated else f"{warehouse.root}/{namespace.replace('.', '/')}/{short}-{view_uuid}"
    default_namespace = spark.get("namespace") or namespace.split(".")
    version: dict[str, Any] = {
        "version-id": view.version,
        "schema-id": 0,
        "timestamp-ms": view.created_ms,
        "summary": {"engine-name": "lakekv"},
        "representations": [{"type": "sql", "sql": view.sql, "dialect": view.dialect}],
        "default-namespace": list(default_namespace),
    }
    if spark.get("catalog"):
        version["default-catalog"] = spark["catalog"]
    return ViewMetadata.model_validate({
        "view-uuid": view_uuid,
        "format-version": 1,
        "location": location,
        "schemas": [_iceberg_schema(view.schema).model_dump(mode="json", by_alias=True)],
        "current-version-id": view.version,
        "versions": [version],
        "version-log": [{"version-id": view.version, "timestamp-ms": view.created_ms}],
        "properties": dict(view.properties),
    })


def _metadata_of(lake: Any, warehouse: Warehouse, name: str) -> tuple[Any, ViewMetadata]:
    view = lake.load_view(name)
    stored = _stored(view)
    if stored is not None and _sql_of(stored) == (view.sql, view.dialect):
        return view, stored
    # A view made over this API whose SQL the Python API then replaced
    # (``replace_view(sql=...)`` keeps the metadata it is not given): the
    # stored document no longer describes it.
    return view, derived(view, warehouse, outdated=stored)


def write_metadata(warehouse: Warehouse, metadata: ViewMetadata, catalog_version: int) -> str:
    """Write (if absent) the metadata file of ``metadata``; return its location.

    ``<location>/metadata/<catalog version>-<content hash as a UUID>.metadata.json``
    (under the view's ``write.metadata.path`` property instead, if set): the
    same view at the same catalog version is the same file on every server.
    """
    body = metadata.model_dump_json(by_alias=True, exclude_none=True).encode()
    digest = uuid.UUID(bytes=hashlib.sha256(body).digest()[:16])
    directory = metadata.properties.get(METADATA_PATH) or f"{metadata.location.rstrip('/')}/metadata"
    spelled = f"{directory.rstrip('/')}/{catalog_version:05d}-{digest}.metadata.json"
    location = warehouse.check(spelled, "view metadata location")
    io = load_file_io(properties={}, location=location)
    if not io.new_input(location).exists():
        if location.startswith("file://"):  # local file IO creates no parent directories
            os.makedirs(os.path.dirname(location.removeprefix("file://")), exist_ok=True)
        with io.new_output(location).create(overwrite=True) as out:
            out.write(body)
    # Answered as the view's own location spells it (file:/tmp and
    # file:///tmp are one file): clients compare it with what they sent.
    return spelled


def _check_metadata_path(warehouse: Warehouse, metadata: ViewMetadata) -> None:
    """Refuse (400, before anything changes) a ``write.metadata.path`` outside the warehouse."""
    if METADATA_PATH in metadata.properties:
        warehouse.check(metadata.properties[METADATA_PATH], f"view property {METADATA_PATH}")


def load(lake: Any, warehouse: Warehouse, name: str) -> Loaded:
    """View ``name`` (however it was made) as Iceberg metadata, its file written."""
    view, metadata = _metadata_of(lake, warehouse, name)
    return Loaded(write_metadata(warehouse, metadata, view.version), metadata)


def create(lake: Any, warehouse: Warehouse, namespace: str, name: str, body: dict[str, Any]) -> Loaded:
    """A ``CreateViewRequest`` as a new view."""
    from pyiceberg.catalog.rest import CreateViewRequest

    try:
        request = CreateViewRequest.model_validate({"location": None, **body})
    except ValidationError as exc:
        raise ApiError(400, "BadRequestException", f"invalid view request: {exc.errors()[0].get('msg')}") from None
    location = (
        warehouse.check(request.location, "location") if request.location
        else warehouse.default_table_location(namespace, name)
    )
    _check_dialects(request.view_version)
    # As Iceberg's own view metadata builder does: the first schema is
    # schema 0 and the first version is version 1, whatever ids the client sent.
    schema = request.view_schema.model_copy(update={"schema_id": 0})
    version = request.view_version.model_copy(update={"schema_id": 0, "version_id": 1})
    metadata = ViewMetadata.model_validate({
        "view-uuid": str(uuid.uuid4()),
        "format-version": 1,
        "location": location,
        "schemas": [schema.model_dump(by_alias=True)],
        "current-version-id": version.version_id,
        "versions": [version.model_dump(by_alias=True)],
        "version-log": [{"version-id": version.version_id, "timestamp-ms": version.timestamp_ms}],
        "properties": dict(request.properties),
    })
    _check_metadata_path(warehouse, metadata)
    to_catalog(lake, f"{namespace}.{name}", metadata, replace=False)
    return load(lake, warehouse, f"{namespace}.{name}")


def register(lake: Any, warehouse: Warehouse, name: str, metadata_location: object) -> Loaded:
    """A ``RegisterViewRequest``: view ``name`` from the Iceberg view metadata file at
    ``metadata_location`` (inside the warehouse), which the catalog then keeps as its own."""
    location = warehouse.check(metadata_location, "metadata-location")
    io = load_file_io(properties={}, location=location)
    try:
        with io.new_input(location).open() as stream:
            raw = stream.read()
    except FileNotFoundError:
        raise ApiError(404, "NotFoundException", f"no view metadata file at {metadata_location}") from None
    try:
        metadata = ViewMetadata.model_validate_json(raw)
    except ValidationError as exc:
        raise ApiError(400, "BadRequestException", f"invalid view metadata at {metadata_location}: "
                       f"{exc.errors()[0].get('msg')}") from None
    warehouse.check(metadata.location, "the view metadata's location")
    _check_metadata_path(warehouse, metadata)
    to_catalog(lake, name, metadata, replace=False)
    return load(lake, warehouse, name)


def replace(lake: Any, warehouse: Warehouse, name: str, body: dict[str, Any]) -> Loaded:
    """Apply a view commit (``requirements`` + ``updates``) to view ``name``."""
    _, metadata = _metadata_of(lake, warehouse, name)
    for requirement in body.get("requirements") or []:
        if requirement.get("type") != "assert-view-uuid":
            raise ApiError(400, "BadRequestException", f"unknown view requirement {requirement.get('type')!r}")
        if requirement.get("uuid") != metadata.view_uuid:
            raise ApiError(409, "CommitFailedException", f"view {name}: UUID changed")
    try:
        updated = _apply_updates(metadata, warehouse, body.get("updates") or [])
    except (ValidationError, KeyError, TypeError) as exc:
        raise ApiError(400, "BadRequestException", f"invalid view update: {exc!r}") from None
    _check_metadata_path(warehouse, updated)
    to_catalog(lake, name, updated, replace=True)
    return load(lake, warehouse, name)


def _check_dialects(version: ViewVersion) -> None:
    """Refuse a version with two SQL representations for one dialect (as Iceberg's reference catalog does)."""
    seen: set[str] = set()
    for representation in version.representations:
        dialect = representation.root.dialect.lower()
        if dialect in seen:
            raise ApiError(
                400, "IllegalArgumentException",
                f"Invalid view version: Cannot add multiple queries for dialect {representation.root.dialect}",
            )
        seen.add(dialect)


def _same_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two versions define the same view (ids, timestamps and summaries aside), as Iceberg compares them."""
    keys = ("schema-id", "representations", "default-catalog", "default-namespace")
    return all(a.get(k) == b.get(k) for k in keys)


def _apply_updates(metadata: ViewMetadata, warehouse: Warehouse, updates: list[Any]) -> ViewMetadata:
    """The view metadata after ``updates``, with the id rules of Iceberg's view metadata builder.

    ``add-schema`` reuses the id of an equal schema, else takes the next
    free one; ``add-view-version`` with ``schema-id`` -1 names the schema
    added in this request, reuses the id of an equal version, else takes the
    next; ``set-current-view-version`` -1 names the version added in this request.
    """
    data = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
    last_schema: int | None = None
    last_added: int | None = None
    for update in updates:
        action = update.get("action") if isinstance(update, dict) else None
        if action == "assign-uuid":
            data["view-uuid"] = str(update["uuid"])
        elif action == "upgrade-format-version":
            if update.get("format-version") != 1:
                raise ApiError(400, "BadRequestException", "views have format version 1 only")
        elif action == "add-schema":
            schema = Schema.model_validate(update["schema"])
            same = next((s for s in data["schemas"] if Schema.model_validate(s).as_struct() == schema.as_struct()
                         and s.get("identifier-field-ids", []) == list(schema.identifier_field_ids)), None)
            if same is not None:
                last_schema = same["schema-id"]
            else:
                last_schema = max((s["schema-id"] for s in data["schemas"]), default=-1) + 1
                data["schemas"].append(schema.model_copy(update={"schema_id": last_schema})
                                       .model_dump(mode="json", by_alias=True))
        elif action == "set-location":
            data["location"] = warehouse.check(update["location"], "set-location")
        elif action == "set-properties":
            data["properties"] = {**data.get("properties", {}), **update["updates"]}
        elif action == "remove-properties":
            data["properties"] = {k: v for k, v in data.get("properties", {}).items() if k not in update["removals"]}
        elif action == "add-view-version":
            version = ViewVersion.model_validate(update["view-version"])
            _check_dialects(version)
            if version.schema_id == _LAST_ADDED:
                if last_schema is None:
                    raise ApiError(400, "BadRequestException", "add-view-version with schema-id -1 without add-schema")
                version = version.model_copy(update={"schema_id": last_schema})
            if not any(s["schema-id"] == version.schema_id for s in data["schemas"]):
                raise ApiError(400, "BadRequestException", f"add-view-version: no schema {version.schema_id}")
            added = version.model_dump(mode="json", by_alias=True, exclude_none=True)
            same = next((v for v in data["versions"] if _same_version(v, added)), None)
            if same is not None:
                last_added = same["version-id"]
            else:
                last_added = max(v["version-id"] for v in data["versions"]) + 1
                data["versions"].append({**added, "version-id": last_added})
        elif action == "set-current-view-version":
            version_id = update["view-version-id"]
            if version_id == _LAST_ADDED:
                if last_added is None:
                    raise ApiError(400, "BadRequestException", "set-current-view-version -1 without add-view-version")
                version_id = last_added
            if not any(v["version-id"] == version_id for v in data["versions"]):
                raise ApiError(400, "BadRequestException", f"no view version {version_id}")
            if version_id != data["current-version-id"]:
                data["current-version-id"] = version_id
                data["version-log"].append({"version-id": version_id, "timestamp-ms": int(time.time() * 1000)})
        else:
            raise ApiError(400, "BadRequestException", f"unknown view update {action!r}")
    return ViewMetadata.model_validate(data)
