"""Table properties that name where files go are confined like table locations.

``write.data.path``, ``write.metadata.path`` and the older
``write.object-storage.path`` / ``write.folder-storage.path`` decide where
clients write a table's files: pyiceberg wrote data files wherever a client had
set them. Each must lie under the table's own location, at create, through a
commit (``set-properties``, ``set-location``) and at register; a refusal is a
400 naming the property, and changes nothing. Tried with raw HTTP and with
pyiceberg as a real client writing data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError
from http_client import call_json

from service.errors import ApiError
from service.iceberg.warehouse import LOCATION_PROVIDER_PROPERTIES, WRITE_PATH_PROPERTIES, Warehouse
from service.testing import ServerProcess

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
ARROW = pa.schema([pa.field("id", pa.int64())])


# -- the rule -------------------------------------------------------------------------


@pytest.mark.parametrize("root", ["file:///srv/lake/iceberg", "s3://bucket/lake/iceberg"])
@pytest.mark.parametrize("key", WRITE_PATH_PROPERTIES)
def test_a_write_path_must_lie_under_the_table_location(root: str, key: str) -> None:
    warehouse = Warehouse(root)
    table = root + "/ns/t"
    for inside in (table, table + "/data", table + "/x/./y/", table.replace("/t", "/%74") + "/data"):
        warehouse.check_write_paths({key: inside}, table)
    outside = {
        "another directory": "file:///tmp/elsewhere" if root.startswith("file") else "s3://other/x",
        "the warehouse": root,
        "another table": root + "/ns/u/data",
        "a sibling with the table's name as prefix": table + "-evil/data",
        "dot-dot": table + "/../u/data",
        "encoded dot-dot": table + "/%2E%2E/u",
        "dot-dot with a parameter": table + "/..;/u",
        "relative": "data",
        "empty": "",
    }
    for what, value in outside.items():
        with pytest.raises(ApiError, match=f"table property {key}") as refused:
            warehouse.check_write_paths({key: value}, table)
        assert refused.value.status == 400, what


@pytest.mark.parametrize("key", LOCATION_PROVIDER_PROPERTIES)
def test_a_custom_location_provider_is_refused(key: str) -> None:
    warehouse = Warehouse("/srv/lake/iceberg")
    with pytest.raises(ApiError, match=f"table property {key} is not accepted"):
        warehouse.check_write_paths({key: "os.system"}, "/srv/lake/iceberg/ns/t")


# -- a real server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("write-paths")
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        yield process, root
    finally:
        process.stop()


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


@pytest.mark.parametrize("key", WRITE_PATH_PROPERTIES)
def test_http_create_and_commit_refuse_a_write_path_outside(server: tuple[ServerProcess, Path], key: str) -> None:
    process, root = server
    outside = root / f"outside-{key}"
    outside.mkdir()
    ns = key.replace(".", "_").replace("-", "_")
    assert call_json(process, "POST", "/v1/namespaces", {"namespace": [ns]})[0] == 200
    for staged in (False, True):
        status, body = call_json(process, "POST", f"/v1/namespaces/{ns}/tables", {
            "name": "t", "schema": SCHEMA, "properties": {key: f"file://{outside}"}, "stage-create": staged,
        })
        assert status == 400 and body["error"]["type"] == "BadRequestException", body
        assert key in body["error"]["message"]
    assert call_json(process, "HEAD", f"/v1/namespaces/{ns}/tables/t")[0] == 404

    status, body = call_json(process, "POST", f"/v1/namespaces/{ns}/tables", {"name": "t", "schema": SCHEMA})
    assert status == 200, body
    before = call_json(process, "GET", f"/v1/namespaces/{ns}/tables/t")[1]
    location = before["metadata"]["location"]
    for updates in (
        [{"action": "set-properties", "updates": {key: f"file://{outside}"}}],
        [{"action": "set-properties", "updates": {key: str(outside)}}],
        [{"action": "set-properties", "updates": {key: location + "/..;/x"}}],
        # Moving the table away from a path that was inside it leaves the path outside.
        [{"action": "set-properties", "updates": {key: location + "/data"}},
         {"action": "set-location", "location": location + "-moved"}],
    ):
        status, body = call_json(process, "POST", f"/v1/namespaces/{ns}/tables/t", {"requirements": [], "updates": updates})
        assert status == 400, (updates, body)
        assert key in body["error"]["message"]
    after = call_json(process, "GET", f"/v1/namespaces/{ns}/tables/t")[1]
    assert after["metadata-location"] == before["metadata-location"]
    assert key not in after["metadata"].get("properties", {})
    # Inside the table location it is taken.
    status, body = call_json(process, "POST", f"/v1/namespaces/{ns}/tables/t", {
        "requirements": [], "updates": [{"action": "set-properties", "updates": {key: location + "/files"}}],
    })
    assert status == 200, body
    assert body["metadata"]["properties"][key] == location + "/files"
    assert _files(outside) == []


def test_a_multi_table_commit_with_one_bad_write_path_changes_nothing(server: tuple[ServerProcess, Path]) -> None:
    process, root = server
    assert call_json(process, "POST", "/v1/namespaces", {"namespace": ["multi"]})[0] == 200
    for name in ("a", "b"):
        assert call_json(process, "POST", "/v1/namespaces/multi/tables", {"name": name, "schema": SCHEMA})[0] == 200
    before = {n: call_json(process, "GET", f"/v1/namespaces/multi/tables/{n}")[1]["metadata-location"] for n in "ab"}
    status, body = call_json(process, "POST", "/v1/transactions/commit", {"table-changes": [
        {"identifier": {"namespace": ["multi"], "name": "a"}, "requirements": [],
         "updates": [{"action": "set-properties", "updates": {"owner": "me"}}]},
        {"identifier": {"namespace": ["multi"], "name": "b"}, "requirements": [],
         "updates": [{"action": "set-properties", "updates": {"write.data.path": f"file://{root}/elsewhere"}}]},
    ]})
    assert status == 400 and "write.data.path" in body["error"]["message"], body
    after = {n: call_json(process, "GET", f"/v1/namespaces/multi/tables/{n}")[1]["metadata-location"] for n in "ab"}
    assert after == before


def test_register_refuses_metadata_with_a_write_path_outside(server: tuple[ServerProcess, Path]) -> None:
    process, root = server
    assert call_json(process, "POST", "/v1/namespaces", {"namespace": ["reg"]})[0] == 200
    status, body = call_json(process, "POST", "/v1/namespaces/reg/tables", {"name": "src", "schema": SCHEMA})
    assert status == 200, body
    # A metadata file inside the warehouse whose properties point outside (written
    # by hand, as a client that bypassed the server could).
    source = Path(body["metadata-location"].removeprefix("file://"))
    document = json.loads(source.read_text())
    document["properties"]["write.data.path"] = f"file://{root}/elsewhere"
    forged = source.with_name("00009-forged.metadata.json")
    forged.write_text(json.dumps(document))
    assert call_json(process, "DELETE", "/v1/namespaces/reg/tables/src")[0] == 204
    status, body = call_json(process, "POST", "/v1/namespaces/reg/register", {"name": "t", "metadata-location": f"file://{forged}"})
    assert status == 400 and "write.data.path" in body["error"]["message"], body
    assert call_json(process, "HEAD", "/v1/namespaces/reg/tables/t")[0] == 404


def test_pyiceberg_cannot_send_data_files_outside(server: tuple[ServerProcess, Path]) -> None:
    process, root = server
    outside = root / "pyiceberg-outside"
    outside.mkdir()
    rest = RestCatalog("lakekv", uri=process.url)
    rest.create_namespace("py")
    for key in WRITE_PATH_PROPERTIES:
        with pytest.raises(BadRequestError, match=key):
            rest.create_table("py.bad", schema=ARROW, properties={key: f"file://{outside}"})
    assert not rest.table_exists("py.bad")

    table = rest.create_table("py.t", schema=ARROW)
    for key in WRITE_PATH_PROPERTIES:
        with pytest.raises(BadRequestError, match=key):
            with table.transaction() as tx:
                tx.set_properties({key: f"file://{outside}"})
    table = rest.load_table("py.t")
    assert not set(WRITE_PATH_PROPERTIES) & set(table.properties)
    table.append(pa.table({"id": [1, 2]}, schema=ARROW))
    assert _files(outside) == []
    location = Path(table.location().removeprefix("file://"))
    assert any(location.rglob("*.parquet"))
    assert sorted(rest.load_table("py.t").scan().to_arrow().column("id").to_pylist()) == [1, 2]

    # A data path under the table's own location works end to end.
    with table.transaction() as tx:
        tx.set_properties({"write.data.path": table.location() + "/custom"})
    table = rest.load_table("py.t")
    table.append(pa.table({"id": [3]}, schema=ARROW))
    assert any((location / "custom").rglob("*.parquet"))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
