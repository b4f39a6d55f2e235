"""Iceberg table locations are confined: normalised as the file IO decodes them,
strictly inside the warehouse, apart from every other table and from the store.

Every trick below was tried on a local and an S3 warehouse (the rule is the
same code for both; the end-to-end purge test runs a real server on a local
lakehouse, whose purge used to delete whatever an encoded ``..`` reached).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from service.errors import ApiError
from service.iceberg.warehouse import Warehouse, normalize
from service.testing import ServerProcess
from test_security import request

WAREHOUSES = {
    "local": ("file:///srv/lake/iceberg", "/srv/lake"),
    "s3": ("s3://bucket/lake/iceberg", "s3://bucket/lake"),
}

# Each trick turns the warehouse root into a location that must be refused.
TRICKS: dict[str, Callable[[str], str]] = {
    "encoded dot-dot": lambda r: r + "/ns/%2E%2E/%2E%2E/victim",
    "encoded dot-dot to the store": lambda r: r + "/%2E%2E",
    "lower-case encoding": lambda r: r + "/%2e%2e/x",
    "mixed encoding": lambda r: r + "/ns/%2E./x",
    "mixed encoding 2": lambda r: r + "/ns/.%2e/x",
    "double encoding": lambda r: r + "/ns/%252E%252E/x",
    "encoded slash": lambda r: r + "/ns/..%2Fx",
    "encoded slashes around": lambda r: r + "/ns/%2F..%2F..%2Fvictim",
    "plain dot-dot": lambda r: r + "/ns/../../victim",
    "trailing dot-dot": lambda r: r + "/t/..",
    "dot-dot with a path parameter": lambda r: r + "/..;/x",
    "dot-dot with a named path parameter": lambda r: r + "/ns/..;a=b/x",
    "dot with a path parameter": lambda r: r + "/ns/.;/..;/..;/x",
    "encoded dot-dot with a path parameter": lambda r: r + "/%2e%2e%3b/x",
    "three dots": lambda r: r + "/ns/.../x",
    "dot-dot and a space": lambda r: r + "/ns/.. /x",
    "fullwidth dots": lambda r: r + "/ns/\uff0e\uff0e/x",
    "two dot leader": lambda r: r + "/ns/\u2025/x",
    "the warehouse itself": lambda r: r,
    "the warehouse with a slash": lambda r: r + "/",
    "the warehouse with slashes": lambda r: r + "//",
    "the warehouse with a dot": lambda r: r + "/./",
    "backslashes": lambda r: r + "\\..\\x",
    "encoded backslashes": lambda r: r + "/ns/%5C..%5Cx",
    "encoded NUL": lambda r: r + "/x%00y",
    "NUL": lambda r: r + "/x\x00y",
    "control character": lambda r: r + "/x\ny",
    "query": lambda r: r + "/t?versionId=1",
    "fragment": lambda r: r + "/t#x",
    "other scheme": lambda r: "hdfs://namenode/" + r.split("://", 1)[1],
    "http": lambda r: "http://127.0.0.1:9/x",
    "no scheme, relative": lambda r: "ns/t",
    "sibling with a shared prefix": lambda r: r + "-evil/t",
    "the parent": lambda r: r.rsplit("/", 1)[0] + "/other",
    "upper-case scheme outside": lambda r: "FILE:///etc/x",
    "another bucket or host": lambda r: r.replace("bucket", "other") if r.startswith("s3") else "file://host" + r[7:],
    "credentials": lambda r: r.replace("://", "://user:pw@", 1) + "/t",
    "a port": lambda r: r.replace("bucket", "bucket:9000") + "/t" if r.startswith("s3") else "file://:9" + r[7:] + "/t",
}


@pytest.mark.parametrize("kind", sorted(WAREHOUSES))
@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_an_escaping_location_is_refused(kind: str, trick: str) -> None:
    root, store = WAREHOUSES[kind]
    warehouse = Warehouse(root, store)
    location = TRICKS[trick](warehouse.root)
    with pytest.raises(ApiError) as refused:
        warehouse.check_table_location(location, {}, "location")
    assert (refused.value.status, refused.value.error_type) == (400, "BadRequestException")


@pytest.mark.parametrize("kind", sorted(WAREHOUSES))
def test_locations_are_normalised_as_the_file_io_decodes_them(kind: str) -> None:
    root, store = WAREHOUSES[kind]
    warehouse = Warehouse(root, store)
    r = warehouse.root
    assert warehouse.check_table_location(r + "/ns//t/", {}, "location") == r + "/ns/t"
    assert warehouse.check_table_location(r + "/ns/./t", {}, "location") == r + "/ns/t"
    assert warehouse.check_table_location(r + "/ns/%74", {}, "location") == r + "/ns/t"
    upper = r.replace("s3://", "S3A://").replace("file://", "FILE://localhost")
    assert warehouse.check_table_location(upper + "/ns/t", {}, "location") == r + "/ns/t"


@pytest.mark.parametrize("kind", sorted(WAREHOUSES))
def test_a_location_may_not_overlap_another_table(kind: str) -> None:
    root, store = WAREHOUSES[kind]
    warehouse = Warehouse(root, store)
    r = warehouse.root
    others = {"ns.a": r + "/ns/a"}
    for overlapping in (r + "/ns/a", r + "/ns/a/b", r + "/ns", r + "/ns/%61"):
        with pytest.raises(ApiError, match="overlaps the location of table ns.a"):
            warehouse.check_table_location(overlapping, others, "location")
    assert warehouse.check_table_location(r + "/ns/ab", others, "location") == r + "/ns/ab"


def test_a_location_may_not_contain_the_store() -> None:
    # A warehouse above the store (an explicit --warehouse): no table may hold the store.
    warehouse = Warehouse("/srv", "/srv/data/lake")
    with pytest.raises(ApiError, match="contains the lakehouse store"):
        warehouse.check_table_location("/srv/data", {}, "location")
    assert warehouse.check_table_location("/srv/tables/t", {}, "location") == "file:///srv/tables/t"


def test_normalize_refuses_non_strings() -> None:
    for bad in (None, 5, b"/x", ""):
        with pytest.raises(ApiError, match="must be a non-empty string"):
            normalize(bad)


# -- end to end: a real server, a real purge ---------------------------------------------


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("confined")
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        yield process, root
    finally:
        process.stop()


def _post(server: ServerProcess, path: str, payload: dict) -> tuple[int, dict]:
    status, _, raw = request(server, "POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    return status, (json.loads(raw) if raw else {})


SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def test_purge_deletes_only_the_tables_own_files_and_never_the_store(
    confined: tuple[ServerProcess, Path],
) -> None:
    server, root = confined
    warehouse = f"file://{root}/lake/iceberg"
    victim = root / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    assert _post(server, "/v1/namespaces", {"namespace": ["ns"]})[0] == 200
    for location in (
        warehouse + "/ns/%2E%2E/%2E%2E/%2E%2E/victim",
        warehouse + "/%2E%2E",
        warehouse,
        warehouse + "/ns/%252E%252E/x",
        warehouse + "/..;/victim",
    ):
        status, body = _post(server, "/v1/namespaces/ns/tables", {"name": "t", "schema": SCHEMA, "location": location})
        assert status == 400, (location, body)
    status, body = _post(server, "/v1/namespaces/ns/tables", {"name": "a", "schema": SCHEMA, "location": warehouse + "/ns/a"})
    assert status == 200, body
    status, body = _post(server, "/v1/namespaces/ns/tables", {"name": "b", "schema": SCHEMA})
    assert status == 200, body
    b_location = Path(body["metadata"]["location"].removeprefix("file://"))
    status, body = _post(server, "/v1/namespaces/ns/tables", {"name": "c", "schema": SCHEMA, "location": warehouse + "/ns"})
    assert status == 400 and "overlaps" in body["error"]["message"]
    # set-location with an encoded dot-dot, through a commit: refused, nothing changed.
    status, body = _post(server, "/v1/namespaces/ns/tables/a", {
        "requirements": [],
        "updates": [{"action": "set-location", "location": warehouse + "/ns/%2E%2E/%2E%2E/%2E%2E/victim"}],
    })
    assert status == 400, body
    status, _, _ = request(server, "DELETE", "/v1/namespaces/ns/tables/a?purgeRequested=true")
    assert status == 204
    assert not (root / "lake/iceberg/ns/a").exists()
    assert (victim / "precious").read_text() == "keep me"
    assert b_location.exists() and any(b_location.rglob("*.metadata.json"))  # the other table is untouched
    assert request(server, "GET", "/healthz")[0] == 200
    assert request(server, "GET", "/v1/namespaces/ns/tables/b")[0] == 200
