"""The JSON form of the values an operation record holds: schemas, filter expressions, data files.

An :class:`~catalog.ops.Op` is stored as JSON (a durable transaction's staged
operations, a Spark commit sent to the control plane). Plain JSON values stay
as they are; each catalog type becomes an object with one ``$tag`` key, and a
tuple becomes ``{"$tuple": [...]}`` so it comes back as a tuple. A filter
expression travels as Arrow's own serialization of it, base64-encoded.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from catalog.datafiles import DataFile
from catalog.records import TableDef, ViewRecord
from catalog.schema import SchemaChange, schema_from_json, schema_to_json


def encode_value(value: Any) -> Any:
    """``value`` as JSON-ready data; the catalog's own types become tagged objects (``{"$schema": ...}``)."""
    if isinstance(value, pa.Schema):
        return {"$schema": schema_to_json(value)}
    if isinstance(value, pc.Expression):
        return {"$expr": base64.b64encode(value.__reduce__()[1][0].to_pybytes()).decode()}
    if isinstance(value, DataFile):
        return {"$file": value.to_json()}
    if isinstance(value, TableDef):
        return {"$tabledef": json.loads(value.encode())}
    if isinstance(value, ViewRecord):
        return {"$view": value.to_json()}
    if isinstance(value, SchemaChange):
        return {"$change": [[op, [encode_value(a) for a in args]] for op, args in value.steps]}
    if isinstance(value, pa.DataType):
        return {"$type": schema_to_json(pa.schema([pa.field("t", value)]))}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {k: encode_value(v) for k, v in value.items()}
    return value


def decode_value(value: Any) -> Any:
    """The value :func:`encode_value` made ``value`` from (plain JSON data comes back as it is)."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$schema" in value:
        return schema_from_json(value["$schema"])
    if "$expr" in value:
        return pc.Expression._deserialize(pa.py_buffer(base64.b64decode(value["$expr"])))
    if "$file" in value:
        return DataFile.from_json(value["$file"])
    if "$tabledef" in value:
        return TableDef.decode(json.dumps(value["$tabledef"]).encode())
    if "$view" in value:
        return ViewRecord.from_json(value["$view"])
    if "$change" in value:
        return SchemaChange([(op, tuple(decode_value(a) for a in args)) for op, args in value["$change"]])
    if "$type" in value:
        return schema_from_json(value["$type"]).field("t").type
    if "$tuple" in value:
        return tuple(decode_value(v) for v in value["$tuple"])
    return {k: decode_value(v) for k, v in value.items()}
