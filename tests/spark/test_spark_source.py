"""The ``lakehouse`` data source end to end on the shared local[2] SparkSession.

Spark actions are slow (a Python worker round trip each), so every test
checks several things per action.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

import catalog
from catalog.spark import register, spark_arrow_schema, spark_schema
from catalog.spark.source import CatalogScanSource
from catalog.spark.types import to_spark_batches
from tests.spark.lake_history import commits_after

UTC = dt.timezone.utc

EVERY_TYPE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(18, 4)),
        pa.field("s", pa.string()),
        pa.field("b", pa.binary()),
        pa.field("ok", pa.bool_()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ntz", pa.timestamp("us")),
        pa.field("xs", pa.list_(pa.int64())),
        pa.field("st", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])),
    ]
)


def every_type_rows() -> pa.Table:
    return pa.Table.from_pydict(
        {
            "id": [1, 2, 3],
            "i8": [-128, None, 127],
            "i16": [-32768, 5, None],
            "i32": [None, -(2**31), 2**31 - 1],
            "f32": [1.5, None, float("-inf")],
            "f64": [2.25, -0.0, None],
            "dec": [Decimal("12345678901234.5678"), None, Decimal("-0.0001")],
            "s": ["héllo", "", None],
            "b": [b"\x00\x01", None, b""],
            "ok": [True, False, None],
            "d": [dt.date(1970, 1, 1), None, dt.date(2038, 1, 19)],
            "ts": [dt.datetime(2024, 2, 29, 12, 30, 0, 123456, tzinfo=UTC), None, dt.datetime(1960, 1, 1, tzinfo=UTC)],
            "ntz": [dt.datetime(2024, 2, 29, 12, 30, 0, 1), dt.datetime(1999, 12, 31), None],
            "xs": [[1, None, 3], [], None],
            "st": [{"x": 1, "y": "a"}, {"x": None, "y": None}, None],
        },
        schema=EVERY_TYPE,
    )


def read(spark: SparkSession, url: str, table: str, **options: str) -> DataFrame:
    reader = spark.read.format("lakehouse").option("lakehouse", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(table)


def rows_by_id(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda row: row["id"])  # type: ignore[arg-type,return-value]


def test_every_type_round_trips_through_spark(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("types")
        lake.create_table("types.src", EVERY_TYPE).append(every_type_rows())

        df = read(spark, lake_url, "types.src")
        assert df.schema == spark_schema(EVERY_TYPE)
        got = df.toArrow()
        expected = pa.Table.from_batches(
            list(to_spark_batches(every_type_rows(), spark_arrow_schema(spark_schema(EVERY_TYPE))))
        )
        assert rows_by_id(got) == rows_by_id(expected)

        # Back through the writer into a table created from the DataFrame's schema.
        df.write.format("lakehouse").option("lakehouse", lake_url).option("createIfMissing", "true").mode(
            "append"
        ).save("types.copy")
        lake.refresh()
        copy = lake.load_table("types.copy")
        assert spark_schema(copy.schema) == spark_schema(EVERY_TYPE)
        original = lake.load_table("types.src").scan().to_arrow()
        # The copy's types are Spark's (list<element>, ts in UTC): compare values.
        assert rows_by_id(copy.scan().to_arrow()) == rows_by_id(original)


def test_partitioned_writes_append_overwrite_and_time_travel(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("sales")
        df = spark.createDataFrame([(i, "eu" if i % 2 else "us", float(i)) for i in range(10)], "id bigint, region string, amount double")
        writer = df.write.format("lakehouse").option("lakehouse", lake_url)
        writer.option("createIfMissing", "true").option("partitionBy", "region").mode("append").save("sales.orders")
        lake.refresh()
        table = lake.load_table("sales.orders")
        assert table.partition_by == ["region"]
        region_id = next(f.metadata[b"field_id"].decode() for f in table.schema if f.name == "region")
        assert {f.partition[region_id] for f in table.files()} == {"eu", "us"}
        first_version = lake.version
        first_commit = lake.history(limit=1)[0]  # the save's (a later version may be the store's own flush)

        writer.mode("append").save("sales.orders")
        lake.refresh()
        assert lake.load_table("sales.orders").scan().count() == 20
        # A moment between the two saves, on the storage's own clock (the one
        # timestampAsOf compares with): halfway between their commits' timestamps.
        second_commit = commits_after(lake, first_version)[0]
        assert second_commit.timestamp - first_commit.timestamp > 0.002, "storage stamps too coarse for this test"
        between = (first_commit.timestamp + second_commit.timestamp) / 2

        df.where("id < 3").write.format("lakehouse").option("lakehouse", lake_url).mode("overwrite").save("sales.orders")
        lake.refresh()
        assert sorted(r["id"] for r in lake.load_table("sales.orders").scan().to_arrow().to_pylist()) == [0, 1, 2]

        assert read(spark, lake_url, "sales.orders").count() == 3
        assert read(spark, lake_url, "sales.orders", versionAsOf=str(first_version)).count() == 10
        assert read(spark, lake_url, "sales.orders", timestampAsOf=str(between)).count() == 10
        iso = dt.datetime.fromtimestamp(between, UTC).isoformat()
        assert read(spark, lake_url, "sales.orders", timestampAsOf=iso).count() == 10


def test_the_catalog_scan_source_prunes_files_and_the_public_source_reads_them_all(
    spark: SparkSession, lake_url: str
) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("p")
        schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
        table = lake.create_table("p.events", schema, partition_by=["day"])
        for n, day in enumerate(["mon", "tue", "wed", "thu"]):
            table.append(pa.table({"id": list(range(n * 100, n * 100 + 100)), "day": [day] * 100}, schema=schema))
        assert len(table.files()) == 4
        version = lake.version

    # What the catalog plugin does for every scan on storage the JVM cannot
    # open: a new source object with the table's schema and version.
    spark.dataSource.register(CatalogScanSource)

    def plugin_scan() -> DataFrame:
        return (
            spark.read.format(CatalogScanSource.name())
            .schema(spark_schema(schema))
            .option("lakehouse", lake_url)
            .option("versionAsOf", str(version))
            .option("partitionBytes", "1")  # a Spark partition per file opened
            .load("p.events")
        )

    by_partition = plugin_scan().where("day = 'tue'")
    assert by_partition.rdd.getNumPartitions() == 1
    by_stats = plugin_scan().where("id >= 250 AND day LIKE 'w%'")
    assert by_stats.rdd.getNumPartitions() == 1
    assert sorted(r.id for r in by_stats.collect()) == list(range(250, 300))
    # The public source opens every file and answers the same.
    public = read(spark, lake_url, "p.events", partitionBytes="1").where("id >= 250 AND day LIKE 'w%'")
    assert public.rdd.getNumPartitions() == 4 and public.count() == 50
    with pytest.raises(PySparkException, match="internal source"):
        spark.read.format(CatalogScanSource.name()).option("lakehouse", lake_url).load("p.events").count()


def test_a_filtered_then_unfiltered_query_over_one_dataframe_sees_every_row(spark: SparkSession, lake_url: str) -> None:
    # PySpark 4.3 reuses the read plan of the filtered query for the
    # unfiltered one: with pruning (the old pruneFiles=true) count() was 100.
    with catalog.open(lake_url) as lake:
        lake.create_namespace("r")
        schema = pa.schema([("id", pa.int64())])
        table = lake.create_table("r.t", schema)
        for start in (0, 100):
            table.append(pa.table({"id": list(range(start, start + 100))}, schema=schema))
    frame = read(spark, lake_url, "r.t")
    assert frame.where("id < 10").count() == 10
    assert frame.count() == 200
    with pytest.raises(PySparkException, match="(?i)option prunefiles .*catalog plugin"):
        read(spark, lake_url, "r.t", pruneFiles="true").count()


def test_sql_names_views_and_inserts(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("shop.eu", parents=True)
        schema = pa.schema([("sku", pa.string()), ("qty", pa.int32())])
        lake.create_table("shop.eu.stock", schema).append(pa.table({"sku": ["a", "b"], "qty": [1, 5]}, schema=schema))
        lake.create_view("shop.eu.big", "SELECT sku FROM `shop.eu.stock` WHERE qty > 2")
        lake.create_view("shop.eu.big_count", "SELECT count(*) AS n FROM `shop.eu.big`")  # a view over a view
        lake.create_view("shop.eu.other", "SELECT 1", dialect="trino")

        registered = register(spark, lake)
        assert registered.tables == ["shop.eu.stock"]
        assert sorted(registered.views) == ["shop.eu.big", "shop.eu.big_count"]
        assert "shop.eu.other" in registered.skipped

        assert spark.sql("SELECT sum(qty) AS s FROM `shop.eu.stock`").first().s == 6
        assert [r.sku for r in spark.sql("SELECT * FROM `shop.eu.big`").collect()] == ["b"]

        spark.sql("INSERT INTO `shop.eu.stock` VALUES ('c', 7)")
        lake.refresh()
        assert lake.load_table("shop.eu.stock").scan().count() == 3
        spark.sql("INSERT OVERWRITE `shop.eu.stock` SELECT 'z', 9")
        lake.refresh()
        assert lake.load_table("shop.eu.stock").scan().to_arrow().to_pylist() == [{"sku": "z", "qty": 9}]
        assert spark.sql("SELECT n FROM `shop.eu.big_count`").first().n == 1


def test_registered_names_plan_every_query_afresh(spark: SparkSession, lake_url: str) -> None:
    """With the plugin jar in the session, register()'s views are catalog tables read at the latest version."""
    from tests.spark.test_catalog_plugin import append_in_another_process

    schema = pa.schema([("id", pa.int64())])
    with catalog.open(lake_url) as lake:
        lake.create_namespace("fresh")
        lake.create_table("fresh.t", schema).append(pa.table({"id": [1, 2]}, schema=schema))
        register(spark, lake)

    def counts() -> tuple[int, int]:
        return (spark.sql("SELECT count(*) FROM `fresh.t`").first()[0],
                spark.sql("SELECT count(*) FROM `fresh.t` WHERE id > -1").first()[0])

    assert counts() == (2, 2)
    append_in_another_process(lake_url, "fresh.t", list(range(10, 20)))
    assert counts() == (12, 12)
    spark.sql("INSERT INTO `fresh.t` VALUES (100)")
    assert counts() == (13, 13)
    spark.sql("INSERT INTO `fresh.t` SELECT * FROM `fresh.t`")
    assert counts() == (26, 26)
    with catalog.open(lake_url) as lake:
        assert lake.load_table("fresh.t").scan().count() == 26
        lake.load_table("fresh.t").update_schema().rename_column("id", "ident").commit()
    with pytest.raises(PySparkException, match="INCOMPATIBLE_COLUMN_CHANGES_AFTER_VIEW_WITH_PLAN_CREATION"):
        spark.sql("SELECT count(*) FROM `fresh.t`").collect()
    with catalog.open(lake_url) as lake:
        register(spark, lake)  # registering again takes the new columns
    assert spark.sql("SELECT sum(ident) FROM `fresh.t`").first()[0] == 2 * (1 + 2 + sum(range(10, 20)) + 100)


def test_bad_writes_fail_clearly_naming_the_problem(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("w")
        lake.create_table("w.t", pa.schema([("id", pa.int32()), ("name", pa.string())]))
        version = lake.version
        wrong_type = spark.createDataFrame([(1, "a")], "id bigint, name string")
        with pytest.raises(Exception, match="column 'id' is bigint in the DataFrame but int in the table"):
            wrong_type.write.format("lakehouse").option("lakehouse", lake_url).mode("append").save("w.t")
        extra = spark.createDataFrame([(1, "a", 2)], "id int, name string, more int")
        with pytest.raises(Exception, match="column 'more' is not in the table"):
            extra.write.format("lakehouse").option("lakehouse", lake_url).mode("append").save("w.t")
        with pytest.raises(Exception, match="createIfMissing"):
            extra.write.format("lakehouse").option("lakehouse", lake_url).mode("append").save("w.missing")
        with pytest.raises(Exception, match="option lakehouse is required"):
            spark.read.format("lakehouse").load("w.t")
        assert commits_after(lake, version) == []


def test_failed_job_leaves_table_unchanged_and_gc_removes_its_files(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("f")
        schema = pa.schema([("id", pa.int64())])
        table = lake.create_table("f.t", schema)
        table.append(pa.table({"id": [-1]}, schema=schema))
        before_version, before_files = lake.version, {f.path for f in table.files()}

        @F.udf(LongType())
        def explode_on_last(i: int) -> int:
            if i == 999:
                raise RuntimeError("injected task failure")
            return i

        # Two tasks; targetFileBytes=1 makes each write its files batch by
        # batch, so the failing task has files on storage when it fails.
        df = spark.range(0, 1000, numPartitions=2).select(explode_on_last("id").alias("id"))
        with pytest.raises(Exception, match="injected task failure"):
            df.write.format("lakehouse").option("lakehouse", lake_url).option("targetFileBytes", "1").mode(
                "append"
            ).save("f.t")

        assert commits_after(lake, before_version) == []
        assert lake.load_table("f.t").scan().to_arrow().to_pylist() == [{"id": -1}]
        lake.gc(grace_s=0)
        on_storage = {meta.path for meta in lake.objects.list(table.location + "/")}
        assert on_storage == before_files


def test_transaction_option_makes_writes_to_two_tables_visible_together(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("m")
        lake.create_table("m.a", pa.schema([("id", pa.int64())]))
        tx = lake.begin_durable(timeout=900, title="two tables")  # Spark jobs on a busy machine take minutes
        df = spark.createDataFrame([(1,), (2,)], "id bigint")
        staged = df.write.format("lakehouse").option("lakehouse", lake_url).option("transaction", tx.id).mode("append")
        staged.save("m.a")
        staged.option("createIfMissing", "true").save("m.b")  # created inside the transaction too

        lake.refresh()
        assert lake.load_table("m.a").scan().count() == 0 and not lake.table_exists("m.b")
        assert read(spark, lake_url, "m.a").count() == 0
        tx.commit()
        lake.refresh()
        assert lake.load_table("m.a").scan().count() == 2 and lake.load_table("m.b").scan().count() == 2
        newest = lake.history(limit=1)[0]
        assert {op["object"] for op in newest.operations} >= {"m.a", "m.b"}


def test_an_ignored_write_option_never_replaces_the_table(spark: SparkSession, lake_url: str) -> None:
    # Before: replaceWhere and partitionOverwriteMode were dropped on the way
    # and the overwrite replaced every region with the one written.
    with catalog.open(lake_url) as lake:
        lake.create_namespace("geo")
        rows = [(i, region) for i, region in enumerate(["us", "apac", "eu"] * 3)]
        df = spark.createDataFrame(rows, "id bigint, region string")
        df.write.format("lakehouse").option("lakehouse", lake_url).option("createIfMissing", "true").mode(
            "append"
        ).save("geo.sales")
        eu_only = spark.createDataFrame([(100, "eu")], "id bigint, region string")
        for key, value in (("replaceWhere", "region = 'eu'"), ("partitionOverwriteMode", "dynamic")):
            writer = eu_only.write.format("lakehouse").option("lakehouse", lake_url).option(key, value)
            with pytest.raises(PySparkException, match=f"(?i)option {key} is not supported"):
                writer.mode("overwrite").save("geo.sales")
        lake.refresh()
        assert lake.load_table("geo.sales").scan().count() == 9


def test_map_columns_round_trip_through_the_catalog_and_spark(spark: SparkSession, lake_url: str) -> None:
    # Top-level maps were refused by the catalog; a map inside a list already worked.
    schema = pa.schema([("id", pa.int64()), ("tags", pa.map_(pa.string(), pa.int64()))])
    rows = pa.table({"id": [1, 2, 3], "tags": [[("a", 1)], None, [("b", 2), ("c", 3)]]}, schema=schema)
    with catalog.open(lake_url) as lake:
        lake.create_namespace("maps")
        lake.create_table("maps.t", schema).append(rows)
        got = read(spark, lake_url, "maps.t").orderBy("id").collect()
        assert [(r["id"], r["tags"]) for r in got] == [(1, {"a": 1}), (2, None), (3, {"b": 2, "c": 3})]
        df = spark.createDataFrame([(4, {"d": 4})], "id bigint, tags map<string, bigint>")
        df.write.format("lakehouse").option("lakehouse", lake_url).mode("append").save("maps.t")
        df.write.format("lakehouse").option("lakehouse", lake_url).option("createIfMissing", "true").mode(
            "append"
        ).save("maps.fromspark")
        lake.refresh()
        assert lake.load_table("maps.t").scan().count() == 4
        made = lake.load_table("maps.fromspark")
        assert pa.types.is_map(made.schema.field("tags").type)
        assert made.scan().to_arrow().column("tags").to_pylist() == [[("d", 4)]]


def test_a_dataframe_reads_the_version_it_was_defined_at_with_or_without_filters(spark: SparkSession, lake_url: str) -> None:
    from tests.spark.test_catalog_plugin import append_in_another_process

    schema = pa.schema([("id", pa.int64())])
    with catalog.open(lake_url) as lake:
        lake.create_namespace("pin")
        lake.create_table("pin.t", schema).append(pa.table({"id": [1, 2]}, schema=schema))
    df = spark.read.format("lakehouse").option("lakehouse", lake_url).load("pin.t")
    assert df.count() == 2
    append_in_another_process(lake_url, "pin.t", list(range(10, 20)))
    assert (df.count(), df.where("id > -1").count(), df.where("id > 1").count()) == (2, 2, 1)
    again = spark.read.format("lakehouse").option("lakehouse", lake_url).load("pin.t")
    assert (again.count(), again.where("id > -1").count()) == (12, 12)
