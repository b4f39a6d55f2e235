"""Format version 3 tables over the Iceberg REST API, and read from the Python API.

The server writes version 3 metadata itself (pyiceberg 0.12 does not); the
Python API reads it through pyiceberg (default values filled in) and refuses
to write it, naming the format version.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.serializers import FromInputFile
from pyiceberg.io import load_file_io
from test_security import request

import catalog
from service.testing import ServerProcess

IDS = pa.schema([pa.field("id", pa.int64())])


def commit(server: ServerProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, _, answer = request(server, "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert status == 200, answer
    return dict(json.loads(answer))


def test_a_table_upgraded_to_v3_keeps_its_rows_and_fills_a_new_columns_default(
    rest: RestCatalog, lake_server: ServerProcess
) -> None:
    rest.create_namespace("v3")
    table = rest.create_table("v3.t", schema=IDS)
    table.append(pa.table({"id": [1, 2]}, schema=IDS))
    # What an Iceberg engine sends to upgrade the table and add a column with a default (a version 3 feature).
    answer = commit(lake_server, "/v1/namespaces/v3/tables/t", {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],
        "updates": [
            {"action": "upgrade-format-version", "format-version": 3},
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "required": False, "type": "long"},
                {"id": 2, "name": "flag", "required": False, "type": "int", "initial-default": 7, "write-default": 7},
            ]}},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    })
    metadata = answer["metadata"]
    assert metadata["format-version"] == 3 and metadata["next-row-id"] == 0
    stored = FromInputFile.table_metadata(load_file_io(location=answer["metadata-location"]).new_input(answer["metadata-location"]))
    assert stored.format_version == 3 and stored.schema().find_field("flag").initial_default == 7
    assert len(stored.metadata_log) == len(table.metadata.metadata_log) + 1

    # pyiceberg reads it; the files written before the column have its initial default.
    assert sorted(rest.load_table("v3.t").scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "flag": 7}, {"id": 2, "flag": 7},
    ]
    lake = catalog.open(lake_server.store_url, poll_interval_s=0, background_maintenance=False)
    try:
        handle = lake.load_table("v3.t")
        assert sorted(handle.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "flag": 7}, {"id": 2, "flag": 7},
        ]
        version = lake.version
        with pytest.raises(ValueError, match="format-version 3 table"):
            handle.append(pa.table({"id": [3], "flag": [1]}, schema=pa.schema([pa.field("id", pa.int64()), pa.field("flag", pa.int32())])))
        with pytest.raises(ValueError, match="format-version 3 table"):
            handle.delete(pc.field("id") == 1)
        lake.refresh()
        assert lake.version == version  # nothing committed
    finally:
        lake.close()


def test_a_table_created_at_v3_keeps_its_column_defaults(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("v3c")
    status, _, answer = request(lake_server, "POST", "/v1/namespaces/v3c/tables", json.dumps({
        "name": "t",
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 5, "name": "c", "required": True, "type": "int", "initial-default": 1, "write-default": 1},
        ]},
        "properties": {"format-version": "3"},
    }).encode(), {"Content-Type": "application/json"})
    assert status == 200, answer
    field = json.loads(answer)["metadata"]["schemas"][0]["fields"][0]
    assert (field["id"], field["initial-default"], field["write-default"]) == (1, 1, 1)
    loaded = rest.load_table("v3c.t")
    assert loaded.metadata.format_version == 3 and loaded.schema().find_field("c").write_default == 1


def test_an_upgrade_beyond_v3_is_refused(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("v4")
    table = rest.create_table("v4.t", schema=IDS)
    status, _, answer = request(lake_server, "POST", "/v1/namespaces/v4/tables/t", json.dumps({
        "requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 4}],
    }).encode(), {"Content-Type": "application/json"})
    assert status == 400 and b"format version: 4" in answer
    assert rest.load_table("v4.t").metadata.format_version == table.metadata.format_version
