"""Column types the catalog plugin stores with care (issue 35): collations are refused, CHAR/VARCHAR kept.

* A ``COLLATE`` clause other than the default UTF8_BINARY is refused at CREATE
  and ALTER, naming the clause: the catalog compares strings by their bytes
  when it prunes files and deletes rows, so a collated column would find and
  delete other rows than Spark (it used to be stored as a plain string).
* ``CHAR(n)``/``VARCHAR(n)`` are stored as strings (as Iceberg does) and the
  table reports the type back to Spark, which applies its own rules: an
  over-long value is an error on write, CHAR values are padded.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, StringType, StructField

import catalog
from tests.spark.test_catalog_plugin import lake_url_of, short


def _refused(spark: SparkSession, sql: str) -> str:
    # ALTER TABLE errors reach Python as Spark's UNSUPPORTED_TABLE_CHANGE (a Py4JJavaError).
    with pytest.raises((PySparkException, Py4JJavaError)) as caught:
        spark.sql(sql).collect()
    return str(caught.value)


def test_a_collated_column_is_refused_naming_the_clause(spark: SparkSession, ns: str) -> None:
    for columns in ("s STRING COLLATE UTF8_LCASE", "id INT, tags ARRAY<STRING COLLATE UNICODE_CI>"):
        message = _refused(spark, f"CREATE TABLE {ns}.t ({columns})")
        assert "COLLATE" in message and "not supported" in message, message
    assert not spark.catalog.tableExists(f"{ns}.t")

    spark.sql(f"CREATE TABLE {ns}.t (id INT, s STRING)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'abc'), (2, 'ABC')")
    for change in ("ADD COLUMN u STRING COLLATE UTF8_LCASE", "ALTER COLUMN s TYPE STRING COLLATE UTF8_LCASE"):
        message = _refused(spark, f"ALTER TABLE {ns}.t {change}")
        assert "COLLATE" in message, message
    # Nothing changed: the column still compares by bytes, as Spark does for it.
    assert [f.name for f in spark.table(f"{ns}.t").schema.fields] == ["id", "s"]
    assert spark.sql(f"SELECT count(*) FROM {ns}.t WHERE s = 'abc'").collect()[0][0] == 1
    spark.sql(f"DELETE FROM {ns}.t WHERE s = 'abc'")
    assert spark.sql(f"SELECT id FROM {ns}.t").collect() == [(2,)]


def test_column_metadata_refuses_a_collation_and_keeps_char_varchar() -> None:
    from catalog.spark.types import CHAR_VARCHAR_KEY, column_metadata, spark_schema

    with pytest.raises(ValueError, match="COLLATE UTF8_LCASE"):
        column_metadata(StructField("s", StringType("UTF8_LCASE")))
    with pytest.raises(ValueError, match="COLLATE UNICODE"):
        column_metadata(StructField("a", ArrayType(StringType("UNICODE"))))
    assert column_metadata(StructField("s", StringType())) == {}
    kept = column_metadata(StructField("c", StringType(), metadata={CHAR_VARCHAR_KEY: "char(3)"}))
    field = pa.field("c", pa.string(), metadata=kept)
    assert spark_schema(pa.schema([field])).fields[0].metadata == {CHAR_VARCHAR_KEY: "char(3)"}


def test_char_columns_neither_prune_nor_delete_exactly() -> None:
    from pyspark.sql.datasource import EqualTo, IsNull

    from catalog.spark.conditions import exact_condition
    from catalog.spark.filters import filter_expression
    from catalog.spark.types import CHAR_VARCHAR_KEY, column_metadata

    char = column_metadata(StructField("c", StringType(), metadata={CHAR_VARCHAR_KEY: "char(3)"}))
    varchar = column_metadata(StructField("v", StringType(), metadata={CHAR_VARCHAR_KEY: "varchar(3)"}))
    schema = pa.schema([pa.field("c", pa.string(), metadata=char), pa.field("v", pa.string(), metadata=varchar)])
    assert filter_expression(EqualTo(("c",), "ab "), schema) is None  # a value stored short would be pruned
    assert filter_expression(IsNull(("c",)), schema) is not None
    assert filter_expression(EqualTo(("v",), "ab"), schema) is not None  # VARCHAR values are compared as stored
    with pytest.raises(ValueError, match="CHAR column 'c'"):
        exact_condition([{"type": "EqualTo", "attribute": ["c"], "value": "ab "}], schema)


def test_char_and_varchar_follow_spark_rules(spark: SparkSession, ns: str) -> None:
    table = f"{ns}.codes"
    spark.sql(f"CREATE TABLE {table} (id INT, c CHAR(3), v VARCHAR(4))")
    described = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE {table}").collect()}
    assert (described["c"], described["v"]) == ("char(3)", "varchar(4)")

    spark.sql(f"INSERT INTO {table} VALUES (1, 'ab', 'abcd'), (2, 'x', 'x   '), (3, NULL, 'abcd    ')")
    # VARCHAR: a longer value is an error (trailing spaces beyond the length are cut); CHAR likewise.
    for values in ("(4, 'a', 'abcde')", "(4, 'abcd', 'a')"):
        message = _refused(spark, f"INSERT INTO {table} VALUES {values}")
        assert "EXCEED_LIMIT_LENGTH" in message, message
    assert spark.sql(f"SELECT id, c, v FROM {table} ORDER BY id").collect() == [
        (1, "ab ", "abcd"), (2, "x  ", "x   "), (3, None, "abcd")
    ]
    # Stored as strings (what other engines read); a value written short is padded when Spark reads it.
    with catalog.open(lake_url_of(spark)) as lake:
        stored = lake.load_table(f"{short(ns)}.codes")
        assert stored.schema.field("c").type == pa.string()
        stored.append(pa.table({"id": pa.array([5], pa.int32()), "c": ["z"], "v": ["z"]}))
    assert spark.sql(f"SELECT c FROM {table} WHERE id = 5").collect() == [("z  ",)]
    # Comparisons pad the literal as Spark does for CHAR; filters pushed to the catalog agree.
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {table} WHERE c = 'ab'").collect()) == [1]
    assert spark.sql(f"SELECT id FROM {table} WHERE c = 'z'").collect() == [(5,)]  # stored short, not pruned
    spark.sql(f"UPDATE {table} SET v = 'upd' WHERE c = 'x'")
    spark.sql(f"DELETE FROM {table} WHERE c IN ('ab', 'z')")
    assert spark.sql(f"SELECT id, c, v FROM {table} ORDER BY id").collect() == [(2, "x  ", "upd"), (3, None, "abcd")]

    message = _refused(spark, f"ALTER TABLE {table} ADD COLUMN d CHAR(2)")
    assert "CHAR/VARCHAR" in message, message
