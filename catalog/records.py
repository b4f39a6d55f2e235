"""The catalog's records: namespace, entry pointer (table or view), table definition, view.

Each record is stored as compact JSON in one key (:mod:`catalog.keys`) and
has one ``encode``/``decode`` pair here, so the stored form has one home.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Final

import pyarrow as pa

from catalog.errors import CatalogError
from catalog.schema import by_id, schema_from_json, schema_to_json

TABLE = "table"
VIEW = "view"
PARQUET: Final = "parquet"
# A table whose Iceberg metadata its clients write (REST-made); see catalog.iceberg_tables.
ICEBERG: Final = "iceberg"
FORMATS = (PARQUET, ICEBERG)


def _dump(d: dict[str, Any]) -> bytes:
    return json.dumps(d, separators=(",", ":"), sort_keys=True).encode()


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        d = json.loads(raw)
    except ValueError as exc:
        raise CatalogError(f"corrupt {what} record: {exc}") from None
    if not isinstance(d, dict):
        raise CatalogError(f"corrupt {what} record: not a JSON object")
    return d


@dataclass
class NamespaceRecord:
    created_ms: int

    def encode(self) -> bytes:
        """The record as stored: JSON bytes."""
        return _dump({"created_ms": self.created_ms})

    @classmethod
    def decode(cls, raw: bytes) -> NamespaceRecord:
        """The record :meth:`encode` stored.

        Raises:
            CatalogError: ``raw`` is not a JSON object (a corrupt record).
        """
        return cls(created_ms=int(_load(raw, "namespace").get("created_ms", 0)))


_TABLE_POINTER_END: Final = b'"kind":"' + TABLE.encode() + b'"}'


@dataclass
class Pointer:
    """What an ``obj/`` key holds: a table's id, or a whole view definition."""

    kind: str  # TABLE or VIEW
    id: str
    view: ViewRecord | None = None

    def encode(self) -> bytes:
        """The pointer as stored: JSON bytes, the view's definition included."""
        d: dict[str, Any] = {"kind": self.kind, "id": self.id}
        if self.view is not None:
            d["view"] = self.view.to_json()
        return _dump(d)

    @classmethod
    def kind_of(cls, raw: bytes) -> str:
        """The ``kind`` of a stored pointer, without decoding a table's pointer.

        A listing of 10,000 tables spent most of its time in ``json.loads``.
        :meth:`encode` sorts keys, so a table's pointer is exactly
        ``{"id":"...","kind":"table"}`` and nothing else ends that way (a
        view's ends with its definition, ``...}}``); anything else is decoded.

        Raises:
            CatalogError, KeyError: as :meth:`decode`, for a record that needs decoding.
        """
        if raw.endswith(_TABLE_POINTER_END):
            return TABLE
        return cls.decode(raw).kind

    @classmethod
    def decode(cls, raw: bytes) -> Pointer:
        """The pointer :meth:`encode` stored.

        Raises:
            CatalogError: ``raw`` is not a JSON object (a corrupt record).
            KeyError: the record lacks ``kind`` or ``id``.
        """
        d = _load(raw, "object")
        view = ViewRecord.from_json(d["view"]) if d.get("view") is not None else None
        return cls(kind=d["kind"], id=d["id"], view=view)


@dataclass
class TableDef:
    """A table's definition (``tbl/<id>/def``); properties live in their own keys."""

    id: str
    format: str
    schema: pa.Schema | None  # None for an Iceberg table (its metadata file holds it)
    last_field_id: int
    partition_ids: list[int]
    location: str
    created_ms: int
    schema_version: int = 0
    metadata_location: str | None = None

    @property
    def partition_by(self) -> list[str]:
        """The names of the partition columns in the current schema (none for an iceberg table)."""
        if self.schema is None:
            return []
        fields = by_id(self.schema)
        return [fields[i].name for i in self.partition_ids if i in fields]

    def encode(self) -> bytes:
        """The definition as stored: JSON bytes, the schema as base64 Arrow IPC."""
        return _dump(
            {
                "id": self.id,
                "format": self.format,
                "schema": None if self.schema is None else schema_to_json(self.schema),
                "last_field_id": self.last_field_id,
                "partition_ids": self.partition_ids,
                "location": self.location,
                "created_ms": self.created_ms,
                "schema_version": self.schema_version,
                "metadata_location": self.metadata_location,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> TableDef:
        """The definition :meth:`encode` stored.

        Raises:
            CatalogError: ``raw`` is not a JSON object (a corrupt record).
            KeyError: a required field is missing.
        """
        d = _load(raw, "table definition")
        return cls(
            id=d["id"],
            format=d["format"],
            schema=None if d.get("schema") is None else schema_from_json(d["schema"]),
            last_field_id=int(d["last_field_id"]),
            partition_ids=[int(i) for i in d.get("partition_ids", [])],
            location=d["location"],
            created_ms=int(d.get("created_ms", 0)),
            schema_version=int(d.get("schema_version", 0)),
            metadata_location=d.get("metadata_location"),
        )


@dataclass
class ViewRecord:
    sql: str
    dialect: str
    properties: dict[str, str] = field(default_factory=dict)
    schema: pa.Schema | None = None
    metadata: dict[str, Any] | None = None
    created_ms: int = 0
    version: int = 1

    def to_json(self) -> dict[str, Any]:
        """The view as a JSON-serialisable dict (the schema as base64 Arrow IPC)."""
        return {
            "sql": self.sql,
            "dialect": self.dialect,
            "properties": self.properties,
            "schema": None if self.schema is None else schema_to_json(self.schema),
            "metadata": self.metadata,
            "created_ms": self.created_ms,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ViewRecord:
        """The view :meth:`to_json` produced.

        A field written as None stays None: that is how a ``replace_view``
        operation's record says "keep the current value" (a stored view has
        every field), and a durable transaction stages that record as JSON.
        """

        def kept(name: str, default: Any, convert: Callable[[Any], Any]) -> Any:
            if name not in d:
                return default
            return None if d[name] is None else convert(d[name])

        return cls(
            sql=d["sql"],
            dialect=d["dialect"],
            properties=kept("properties", {}, dict),
            schema=None if d.get("schema") is None else schema_from_json(d["schema"]),
            metadata=d.get("metadata"),
            created_ms=kept("created_ms", 0, int),
            version=kept("version", 1, int),
        )
