"""One view kind: a view made by Spark SQL, by the Python API or over the Iceberg REST API
(pyiceberg, and a plain JSON body) is read by Spark by its three-part name and loaded over
REST by pyiceberg with Iceberg view metadata and a ``metadata-location`` whose file holds
that metadata.

Spark's catalog ``lake`` and a ``lakekv serve`` process share one lakehouse directory.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion
from pyspark.sql import SparkSession

import catalog
from service.testing import ServerProcess


def get(server: ServerProcess, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(server.url + path, timeout=60) as response:
        return dict(json.load(response))


def post(server: ServerProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(json.load(response))


def spark_rows(spark: SparkSession, sql: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


def test_views_made_four_ways_are_read_by_spark_and_loaded_over_rest(
    spark: SparkSession, ns: str, lake_catalog: str, tmp_path: Path
) -> None:
    short = ns.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, name STRING)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"CREATE VIEW {ns}.by_spark AS SELECT id FROM {ns}.t WHERE id > 1")
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        # No schema, and a single name: Spark analyses it in the view's own namespace.
        lake.create_view(f"{short}.by_python", "SELECT name FROM t WHERE id < 3")

    server = ServerProcess(lake_catalog, tmp_path / "server.log").start()
    try:
        rest = RestCatalog("lakekv", uri=server.url)
        rest.create_view(
            f"{short}.by_pyiceberg",
            schema=pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]),
            view_version=ViewVersion(
                schema_id=0,
                representations=[SQLViewRepresentation(type="sql", sql="SELECT id, name FROM t WHERE id = 3", dialect="spark")],
                default_namespace=[short],
            ),
        )
        post(server, f"/v1/namespaces/{short}/views", {
            "name": "by_json",
            "schema": {"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "n", "type": "long", "required": False},
            ]},
            "view-version": {
                "version-id": 1, "schema-id": 0, "timestamp-ms": 1_700_000_000_000, "summary": {},
                "representations": [{"type": "sql", "sql": f"SELECT count(*) AS n FROM lake.{short}.t", "dialect": "spark"}],
                "default-namespace": [short],
            },
        })

        expected = {
            "by_spark": ([(2,), (3,)], ["id"]),
            "by_python": ([("a",), ("b",)], []),  # its creator gave no schema: none over REST either
            "by_pyiceberg": ([(3, "c")], ["id", "name"]),
            "by_json": ([(3,)], ["n"]),
        }
        for view, (rows, _) in expected.items():
            assert spark_rows(spark, f"SELECT * FROM {ns}.{view}") == rows, view
        for view, (_, columns) in expected.items():
            loaded = rest.load_view(f"{short}.{view}")
            raw = get(server, f"/v1/namespaces/{short}/views/{view}")
            assert loaded.metadata.model_dump(mode="json", by_alias=True, exclude_none=True) == raw["metadata"]
            # The metadata file is there and holds that metadata.
            location = raw["metadata-location"]
            assert location.startswith(loaded.metadata.location + "/metadata/") and location.endswith(".metadata.json")
            assert json.loads(Path(location.removeprefix("file://")).read_text()) == raw["metadata"]
            current = next(v for v in loaded.metadata.versions if v.version_id == loaded.metadata.current_version_id)
            schema = next(s for s in loaded.metadata.schemas if s.schema_id == current.schema_id)
            assert [f.name for f in schema.fields] == columns, view
            assert current.representations[0].root.dialect == "spark"
            # Loaded again: the same metadata, the same file.
            assert get(server, f"/v1/namespaces/{short}/views/{view}") == raw
        assert sorted(v for _, v in rest.list_views(short)) == sorted(expected)
        assert sorted(r[1] for r in spark.sql(f"SHOW VIEWS IN {ns}").collect()) == sorted(expected)
    finally:
        server.stop()


def test_a_python_view_without_schema_is_read_by_spark(spark: SparkSession, ns: str, lake_catalog: str) -> None:
    # The control plane used to send "schema": null, which Spark refused
    # ([INVALID_JSON_DATA_TYPE]); the plugin now analyses the SQL, resolving
    # single names in the view's namespace, two-part names in its catalog.
    short = ns.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, name STRING)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        lake.create_view(f"{short}.single", "SELECT id * 10 AS tens FROM t WHERE id < 3")
        lake.create_view(f"{short}.cte", f"WITH x AS (SELECT * FROM {short}.t) SELECT name FROM x WHERE id = 3")
        lake.create_view(f"{short}.other", "SELECT TOP 1 id FROM t", dialect="tsql")
        lake.create_view(f"{short}.command", f"DROP TABLE {ns}.t")  # Spark dialect, but no query
    before = (spark.catalog.currentCatalog(), spark.catalog.currentDatabase())
    assert spark_rows(spark, f"SELECT * FROM {ns}.single") == [(10,), (20,)]
    assert [(f.name, f.dataType.simpleString()) for f in spark.table(f"{ns}.single").schema] == [("tens", "bigint")]
    assert spark_rows(spark, f"SELECT * FROM {ns}.cte") == [("c",)]
    with pytest.raises(Exception, match="dialect 'tsql'"):  # never run as Spark SQL
        spark.sql(f"SELECT * FROM {ns}.other").collect()
    with pytest.raises(Exception, match="not a query"):
        spark.sql(f"SELECT * FROM {ns}.command").collect()
    assert spark_rows(spark, f"SELECT id FROM {ns}.t") == [(1,), (2,), (3,)]  # analysed, never run
    # The analysis left the session where it was.
    assert (spark.catalog.currentCatalog(), spark.catalog.currentDatabase()) == before
