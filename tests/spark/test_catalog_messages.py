"""Errors the plugin gives for writes into a view and time travel to before a table existed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import SparkSession

import catalog
from catalog.spark.control import ControlPlane, data_root
from catalog.spark.errors import NotAtVersionError

STRUCT_ARROW = pa.schema([pa.field("id", pa.int64())])


def test_the_control_plane_names_the_version_a_table_did_not_exist_at(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake")) as lake:
        plane = ControlPlane(lake, data_root(lake))
        lake.create_namespace("s")
        before = lake.version
        lake.create_table("s.other", STRUCT_ARROW)
        lake.create_table("s.t", STRUCT_ARROW)
        created = lake.version
        answer = plane.handle({"op": "load_table", "args": {"name": ["s", "t"], "version": before}})
        assert not answer["ok"]
        assert answer["error"]["kind"] == "not_at_version"
        assert answer["error"]["type"] == f"{NotAtVersionError.__module__}.NotAtVersionError"
        assert answer["error"]["message"] == f"table 's.t' did not exist at lakehouse version {before} (created at version {created})"
        # A name that does not exist now either: plain "no such table" (Spark's own message says it).
        missing = plane.handle({"op": "load_table", "args": {"name": ["s", "nope"], "version": before}})
        assert missing["error"]["kind"] == "no_such_table"
        # Not pinned to a version: no such table, as before.
        assert plane.handle({"op": "load_table", "args": {"name": ["s", "nope"]}})["error"]["kind"] == "no_such_table"



def test_version_as_of_before_the_table_existed_names_the_versions(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.first (id BIGINT)")
    before = int(dict(spark.sql(f"SHOW TBLPROPERTIES {ns}.first").collect())["lakekv.version"])
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    created = int(dict(spark.sql(f"SHOW TBLPROPERTIES {ns}.t").collect())["lakekv.version"])
    short = ns.split(".", 1)[1]
    with pytest.raises(PySparkException) as raised:
        spark.sql(f"SELECT * FROM {ns}.t VERSION AS OF {before}").collect()
    message = str(raised.value)
    assert f"table '{short}.t' did not exist at lakehouse version {before} (created at version {created})" in message
    assert "TABLE_OR_VIEW_NOT_FOUND" not in message
    # A table that never existed is still Spark's TABLE_OR_VIEW_NOT_FOUND.
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {ns}.never VERSION AS OF {before}").collect()


@pytest.mark.parametrize(
    "statement",
    ["INSERT INTO {v} VALUES (5)", "INSERT OVERWRITE {v} VALUES (5)", "DELETE FROM {v} WHERE id = 1",
     "UPDATE {v} SET id = 2 WHERE id = 1"],
)
def test_a_write_into_a_view_says_it_is_a_view(spark: SparkSession, ns: str, statement: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    spark.sql(f"CREATE VIEW {ns}.v AS SELECT * FROM {ns}.t")
    with pytest.raises(AnalysisException) as raised:
        spark.sql(statement.format(v=f"{ns}.v"))
    assert raised.value.getCondition() == "VIEW_WRITE_NOT_ALLOWED", str(raised.value)
    assert f"`{ns.split('.')[1]}`.`v`" in str(raised.value)
    assert [r.id for r in spark.sql(f"SELECT id FROM {ns}.t").collect()] == [1]
