"""Iceberg views on the catalog.

A view is a catalog view whose ``metadata`` holds the whole Iceberg view
metadata (a small JSON document: versions, schemas, SQL representations), and
whose ``sql``/``dialect`` mirror the current version's first SQL
representation, so lakehouse tools that only know plain views still read it.
Views need no files, so none are written.

Replacing a view applies the Iceberg view updates this server understands
(``assign-uuid``, ``upgrade-format-version`` to 1, ``add-schema``,
``set-location``, ``set-properties``, ``remove-properties``,
``add-view-version``, ``set-current-view-version``); any other action is 400.
The one view requirement, ``assert-view-uuid``, is checked: 409 if it fails.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Final

from pydantic import ValidationError
from pyiceberg.schema import Schema
from pyiceberg.view.metadata import ViewMetadata, ViewVersion

from service.errors import ApiError
from service.iceberg.warehouse import Warehouse

_LAST_ADDED: Final = -1  # set-current-view-version: "the version added in this request"


def _sql_of(metadata: ViewMetadata) -> tuple[str, str]:
    version = next(v for v in metadata.versions if v.version_id == metadata.current_version_id)
    sql = version.representations[0].root
    return sql.sql, sql.dialect


def to_catalog(lake: Any, name: str, metadata: ViewMetadata, replace: bool) -> None:
    sql, dialect = _sql_of(metadata)
    document = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
    if replace:
        lake.replace_view(name, sql=sql, dialect=dialect, properties=dict(metadata.properties), metadata=document)
    else:
        lake.create_view(name, sql, dialect=dialect, properties=dict(metadata.properties), metadata=document)


def load(lake: Any, name: str) -> ViewMetadata:
    view = lake.load_view(name)
    if not view.metadata or "view-uuid" not in view.metadata:
        raise ApiError(
            400, "BadRequestException", f"view {name} was not created through the Iceberg API (no Iceberg view metadata)"
        )
    return ViewMetadata.model_validate(view.metadata)


def create(lake: Any, warehouse: Warehouse, namespace: str, name: str, body: dict[str, Any]) -> ViewMetadata:
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
    version = request.view_version.model_copy(update={"schema_id": request.view_schema.schema_id})
    metadata = ViewMetadata.model_validate({
        "view-uuid": str(uuid.uuid4()),
        "format-version": 1,
        "location": location,
        "schemas": [request.view_schema.model_dump(by_alias=True)],
        "current-version-id": version.version_id,
        "versions": [version.model_dump(by_alias=True)],
        "version-log": [{"version-id": version.version_id, "timestamp-ms": version.timestamp_ms}],
        "properties": dict(request.properties),
    })
    to_catalog(lake, f"{namespace}.{name}", metadata, replace=False)
    return metadata


def replace(lake: Any, warehouse: Warehouse, name: str, body: dict[str, Any]) -> ViewMetadata:
    """Apply a view commit (``requirements`` + ``updates``) to view ``name``."""
    metadata = load(lake, name)
    for requirement in body.get("requirements") or []:
        if requirement.get("type") != "assert-view-uuid":
            raise ApiError(400, "BadRequestException", f"unknown view requirement {requirement.get('type')!r}")
        if requirement.get("uuid") != metadata.view_uuid:
            raise ApiError(409, "CommitFailedException", f"view {name}: UUID changed")
    try:
        updated = _apply_updates(metadata, warehouse, body.get("updates") or [])
    except (ValidationError, KeyError, TypeError) as exc:
        raise ApiError(400, "BadRequestException", f"invalid view update: {exc!r}") from None
    to_catalog(lake, name, updated, replace=True)
    return updated


def _apply_updates(metadata: ViewMetadata, warehouse: Warehouse, updates: list[Any]) -> ViewMetadata:
    data = metadata.model_dump(mode="json", by_alias=True)
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
            data["schemas"] = [s for s in data["schemas"] if s["schema-id"] != schema.schema_id]
            data["schemas"].append(schema.model_dump(mode="json", by_alias=True))
        elif action == "set-location":
            data["location"] = warehouse.check(update["location"], "set-location")
        elif action == "set-properties":
            data["properties"] = {**data.get("properties", {}), **update["updates"]}
        elif action == "remove-properties":
            data["properties"] = {k: v for k, v in data.get("properties", {}).items() if k not in update["removals"]}
        elif action == "add-view-version":
            version = ViewVersion.model_validate(update["view-version"])
            next_id = max(v["version-id"] for v in data["versions"]) + 1
            version = version.model_copy(update={"version_id": next_id})
            data["versions"].append(version.model_dump(mode="json", by_alias=True))
            last_added = next_id
        elif action == "set-current-view-version":
            version_id = update["view-version-id"]
            if version_id == _LAST_ADDED:
                if last_added is None:
                    raise ApiError(400, "BadRequestException", "set-current-view-version -1 without add-view-version")
                version_id = last_added
            if not any(v["version-id"] == version_id for v in data["versions"]):
                raise ApiError(400, "BadRequestException", f"no view version {version_id}")
            data["current-version-id"] = version_id
            data["version-log"].append({"version-id": version_id, "timestamp-ms": int(time.time() * 1000)})
        else:
            raise ApiError(400, "BadRequestException", f"unknown view update {action!r}")
    return ViewMetadata.model_validate(data)

