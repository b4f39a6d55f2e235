"""Rename, drop and purge over the Iceberg REST API do what the Python API does for that table.

pyiceberg is the client for drops: ``purge_table`` sends ``DELETE
...?purgeRequested=true``, ``drop_table`` the same without purge. Renames are
sent raw (``POST /v1/tables/rename``): pyiceberg's ``rename_table`` loads the
table afterwards, which tests the load, not the rename.
The tables are native (made by the Python API); an embedded handle on the same
lakehouse checks what changed, and the data files are looked for on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from http_client import call_json

import catalog
from catalog import errors
from service.testing import ServerProcess

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


@pytest.fixture
def lake(lake_server: ServerProcess) -> Iterator[catalog.Lakehouse]:
    with catalog.open(lake_server.store_url, poll_interval_s=0, background_maintenance=False) as handle:
        yield handle


def native_table(lake: catalog.Lakehouse, name: str) -> list[Path]:
    """A native table of two appends; the paths of its data files (which exist)."""
    namespace = name.rsplit(".", 1)[0]
    if not lake.namespace_exists(namespace):
        lake.create_namespace(namespace)
    table = lake.create_table(name, ROWS.schema)
    table.append(ROWS.slice(0, 2))
    table.append(ROWS.slice(2))
    root = Path(lake.store.url.removeprefix("file://"))
    paths = [root / f.path for f in lake.load_table(name).files()]
    assert len(paths) == 2 and all(p.is_file() for p in paths)
    return paths


def test_rest_purge_of_a_native_table_deletes_its_files(lake: catalog.Lakehouse, rest: RestCatalog) -> None:
    paths = native_table(lake, "purge.t")
    rest.purge_table("purge.t")
    lake.refresh()
    assert not lake.table_exists("purge.t")
    assert [p for p in paths if p.exists()] == []


def test_rest_drop_without_purge_keeps_the_files_for_time_travel(lake: catalog.Lakehouse, rest: RestCatalog) -> None:
    paths = native_table(lake, "keep.t")
    before = lake.refresh()
    rest.drop_table("keep.t")
    lake.refresh()
    assert not lake.table_exists("keep.t")
    assert all(p.is_file() for p in paths)
    with lake.at(version=before) as past:
        assert past.load_table("keep.t").scan().to_arrow().sort_by("id").equals(ROWS)


def _operations(lake: catalog.Lakehouse, renamed: str) -> list[dict[str, object]]:
    """The newest version's operations, the renamed table's own name and id taken out."""
    entry = lake.history(limit=1)[0]
    return [{k: (v.replace(renamed, "T") if isinstance(v, str) else v) for k, v in op.items() if k != "table_id"}
            for op in entry.operations]


def rename(server: ServerProcess, source: str, destination: str) -> tuple[int, dict[str, object]]:
    def identifier(name: str) -> dict[str, object]:
        namespace, short = name.rsplit(".", 1)
        return {"namespace": namespace.split("."), "name": short}

    return call_json(server, "POST", "/v1/tables/rename", {
        "source": identifier(source), "destination": identifier(destination),
    })


def test_rest_rename_of_a_native_table_is_the_python_apis(lake: catalog.Lakehouse, lake_server: ServerProcess) -> None:
    native_table(lake, "ren.by_rest")
    native_table(lake, "ren.by_python")
    ids = {name: lake.load_table(f"ren.{name}").id for name in ("by_rest", "by_python")}

    assert rename(lake_server, "ren.by_rest", "ren.by_rest_renamed") == (204, {})
    lake.refresh()
    by_rest = _operations(lake, "by_rest")
    lake.rename_table("ren.by_python", "ren.by_python_renamed")
    by_python = _operations(lake, "by_python")

    # One version with one rename, recorded alike.
    assert by_rest == by_python == [{"kind": "rename_table", "object": "ren.T", "new_name": "ren.T_renamed"}]
    for name in ("by_rest", "by_python"):
        assert not lake.table_exists(f"ren.{name}")
        table = lake.load_table(f"ren.{name}_renamed")
        assert table.id == ids[name] and table.format == "parquet"
        assert table.scan().to_arrow().sort_by("id").equals(ROWS)

    # The refusals match too: an existing destination, a missing namespace, a missing source.
    native_table(lake, "ren.taken")
    refusals = [
        ("ren.taken", errors.TableAlreadyExistsError, 409, "AlreadyExistsException"),
        ("nowhere.t", errors.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    ]
    for destination, python_error, status, error_type in refusals:
        code, body = rename(lake_server, "ren.by_rest_renamed", destination)
        assert (code, body["error"]["type"]) == (status, error_type)
        with pytest.raises(python_error):
            lake.rename_table("ren.by_python_renamed", destination)
    code, body = rename(lake_server, "ren.absent", "ren.absent2")
    assert (code, body["error"]["type"]) == (404, "NoSuchTableException")
    with pytest.raises(errors.NoSuchTableError):
        lake.rename_table("ren.absent", "ren.absent2")
    lake.refresh()
    assert lake.table_exists("ren.by_rest_renamed") and lake.table_exists("ren.by_python_renamed")
