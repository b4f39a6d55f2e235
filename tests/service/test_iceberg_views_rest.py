"""Views made by the Python API over the Iceberg REST API (pyiceberg the client): derived
Iceberg view metadata, the same on two servers, its file a cache written again when lost,
and a REST commit on such a view.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from http_client import call_json
from pyiceberg.catalog.rest import RestCatalog

import catalog
from service.testing import ServerProcess

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("tags", pa.list_(pa.string()))])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    root = tmp_path_factory.mktemp("views-rest")
    first = ServerProcess(str(root / "lake"), root / "first.log").start()
    try:
        second = ServerProcess(str(root / "lake"), root / "second.log").start()
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.fixture
def lake(servers: tuple[ServerProcess, ServerProcess]) -> Iterator[catalog.Lakehouse]:
    with catalog.open(servers[0].store_url, poll_interval_s=0, background_maintenance=False) as handle:
        yield handle


def load(server: ServerProcess, name: str) -> dict[str, object]:
    namespace, view = name.rsplit(".", 1)
    status, body = call_json(server, "GET", f"/v1/namespaces/{namespace}/views/{view}")
    assert status == 200, body
    return body


def test_a_python_view_loads_alike_from_two_servers(servers: tuple[ServerProcess, ServerProcess], lake: catalog.Lakehouse) -> None:
    lake.create_namespace("two")
    lake.create_view("two.v", "SELECT id, tags FROM two.t", schema=SCHEMA, properties={"owner": "py"})
    first, second = (load(server, "two.v") for server in servers)
    assert first == second
    metadata = RestCatalog("lakekv", uri=servers[1].url).load_view("two.v").metadata
    assert [f.name for f in metadata.schemas[0].fields] == ["id", "tags"]
    assert metadata.properties == {"owner": "py"}
    version = metadata.versions[0]
    assert (version.representations[0].root.sql, version.default_namespace) == ("SELECT id, tags FROM two.t", ("two",))

    # The file is a cache: lost, it is written again, the same, at the next load.
    path = Path(str(first["metadata-location"]).removeprefix("file://"))
    assert json.loads(path.read_text()) == first["metadata"]
    path.unlink()
    assert load(servers[1], "two.v") == first and json.loads(path.read_text()) == first["metadata"]


def test_rest_commit_on_a_python_view_and_python_replace_of_a_rest_view(
    servers: tuple[ServerProcess, ServerProcess], lake: catalog.Lakehouse
) -> None:
    server = servers[0]
    lake.create_namespace("mix")
    lake.create_view("mix.py", "SELECT 1 AS x", schema=pa.schema([pa.field("x", pa.int32())]))
    before = load(server, "mix.py")
    status, body = call_json(server, "POST", "/v1/namespaces/mix/views/py", {
        "requirements": [{"type": "assert-view-uuid", "uuid": before["metadata"]["view-uuid"]}],  # type: ignore[index]
        "updates": [
            {"action": "add-view-version", "view-version": {
                "version-id": 0, "schema-id": 0, "timestamp-ms": 1_700_000_000_000, "summary": {},
                "representations": [{"type": "sql", "sql": "SELECT 2 AS x", "dialect": "spark"}],
                "default-namespace": ["mix"],
            }},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    })
    assert status == 200, body
    assert body["metadata-location"] != before["metadata-location"]
    lake.refresh()
    view = lake.load_view("mix.py")
    assert (view.sql, view.schema.names) == ("SELECT 2 AS x", ["x"])

    # The Python API changes the SQL of a view made over REST: REST then serves the new SQL.
    lake.replace_view("mix.py", sql="SELECT 3 AS x")
    after = RestCatalog("lakekv", uri=server.url).load_view("mix.py").metadata
    current = next(v for v in after.versions if v.version_id == after.current_version_id)
    assert current.representations[0].root.sql == "SELECT 3 AS x"
    assert after.view_uuid == before["metadata"]["view-uuid"]  # type: ignore[index]


def _view_body(name: str, properties: dict[str, str]) -> dict[str, object]:
    return {
        "name": name, "properties": properties,
        "schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "type": "int", "required": False}]},
        "view-version": {
            "version-id": 1, "schema-id": 0, "timestamp-ms": 1_700_000_000_000, "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}], "default-namespace": ["paths"],
        },
    }


def test_a_views_metadata_path_property_is_honoured_inside_the_warehouse_only(
    servers: tuple[ServerProcess, ServerProcess], lake: catalog.Lakehouse, tmp_path: Path
) -> None:
    server = servers[0]
    lake.create_namespace("paths")
    warehouse = Path(server.store_url).resolve() / "iceberg"
    inside = (warehouse / "custom" / "view-metadata").as_uri()
    status, body = call_json(server, "POST", "/v1/namespaces/paths/views", _view_body("inside", {"write.metadata.path": inside}))
    assert status == 200, body
    assert str(body["metadata-location"]).startswith(inside + "/")
    assert Path(str(body["metadata-location"]).removeprefix("file://")).is_file()

    outside = (tmp_path / "elsewhere").as_uri()
    status, body = call_json(server, "POST", "/v1/namespaces/paths/views", _view_body("outside", {"write.metadata.path": outside}))
    assert status == 400 and "write.metadata.path" in body["error"]["message"]
    lake.refresh()
    assert not lake.view_exists("paths.outside") and not (tmp_path / "elsewhere").exists()


def test_register_a_view_from_its_metadata_file_and_the_reference_wording(
    servers: tuple[ServerProcess, ServerProcess], lake: catalog.Lakehouse
) -> None:
    server = servers[0]
    lake.create_namespace("reg")
    status, created = call_json(server, "POST", "/v1/namespaces/reg/views", _view_body("v", {"owner": "x"}))
    assert status == 200, created
    # Taken: a view, and a table, by the same name.
    status, body = call_json(server, "POST", "/v1/namespaces/reg/views", _view_body("v", {}))
    assert (status, body["error"]["message"]) == (409, "View already exists: reg.v")
    lake.create_table("reg.t", pa.schema([pa.field("x", pa.int32())]))
    status, body = call_json(server, "POST", "/v1/namespaces/reg/views", _view_body("t", {}))
    assert (status, body["error"]["message"]) == (409, "Table with same name already exists: reg.t")

    rest = RestCatalog("lakekv", uri=server.url)
    rest.drop_view("reg.v")
    status, body = call_json(server, "GET", "/v1/namespaces/reg/views/v")
    assert (status, body["error"]["message"]) == (404, "View does not exist: reg.v")
    registered = rest.register_view("reg.again", str(created["metadata-location"]))
    assert registered.metadata.view_uuid == created["metadata"]["view-uuid"]  # type: ignore[index]
    lake.refresh()
    view = lake.load_view("reg.again")
    assert (view.sql, view.properties) == ("SELECT 1 AS x", {"owner": "x"})
    status, body = call_json(server, "POST", "/v1/namespaces/reg/register-view", {
        "name": "nowhere", "metadata-location": str(created["metadata-location"]) + ".missing",
    })
    assert status == 404 and not lake.view_exists("reg.nowhere")
