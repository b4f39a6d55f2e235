"""Arrow ⇄ Spark type mapping (catalog/spark/types.py); pure, no SparkSession."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from catalog.errors import SchemaMismatchError
from catalog.spark.types import (
    check_writable,
    spark_arrow_schema,
    spark_schema,
    spark_type,
    to_spark_batches,
    to_table_batches,
)

WIDE = pa.schema(
    [
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32(), nullable=False),
        pa.field("i64", pa.int64()),
        pa.field("u8", pa.uint8()),
        pa.field("u32", pa.uint32()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(12, 3)),
        pa.field("s", pa.string()),
        pa.field("ls", pa.large_string()),
        pa.field("b", pa.binary()),
        pa.field("ok", pa.bool_()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("ns", tz="Europe/Paris")),
        pa.field("ntz", pa.timestamp("ms")),
        pa.field("xs", pa.large_list(pa.int64())),
        pa.field("st", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])),
        pa.field("m", pa.map_(pa.string(), pa.int32())),
    ],
    metadata={b"k": b"v"},
)


def wide_table() -> pa.Table:
    rows = {
        "i8": [1, None],
        "i16": [-300, 2],
        "i32": [7, 8],
        "i64": [2**40, None],
        "u8": [255, 0],
        "u32": [2**32 - 1, 0],
        "f32": [1.5, None],
        "f64": [float("nan"), -0.25],
        "dec": [Decimal("123456789.123"), None],
        "s": ["é", None],
        "ls": ["long", ""],
        "b": [b"\x00\xff", None],
        "ok": [True, None],
        "d": [dt.date(2024, 2, 29), None],
        "ts": [dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc), None],
        "ntz": [dt.datetime(1999, 12, 31, 23, 59, 59, 999000), None],
        "xs": [[1, None, 3], None],
        "st": [{"x": 1, "y": "a"}, None],
        "m": [[("a", 1)], None],
    }
    return pa.Table.from_pydict(rows, schema=WIDE)


def test_spark_schema_maps_every_supported_type() -> None:
    schema = spark_schema(WIDE)
    assert [f.dataType.simpleString() for f in schema.fields] == [
        "tinyint", "smallint", "int", "bigint", "smallint", "bigint", "float", "double",
        "decimal(12,3)", "string", "string", "binary", "boolean", "date", "timestamp",
        "timestamp_ntz", "array<bigint>", "struct<x:int,y:string>", "map<string,int>",
    ]  # fmt: skip
    assert schema["i32"].nullable is False and schema["i64"].nullable is True


def test_read_batches_match_sparks_arrow_schema_exactly() -> None:
    target = spark_arrow_schema(spark_schema(WIDE))
    batches = list(to_spark_batches(wide_table(), target))
    assert len(batches) == 1
    # What PySpark's read worker checks: pa_schema.equals(first_batch.schema).
    assert batches[0].schema.equals(target)
    assert batches[0].schema.field("ls").type == pa.string()
    assert batches[0].schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert batches[0].schema.field("xs").type.value_field.name == "element"


def test_read_then_write_round_trips_values() -> None:
    table = wide_table()
    target = spark_arrow_schema(spark_schema(WIDE))
    spark_side = list(to_spark_batches(table, target))
    back = pa.Table.from_batches(list(to_table_batches(spark_side, WIDE)))
    expected = table.cast(pa.schema([f.remove_metadata() for f in WIDE]))
    assert back.schema.equals(expected.schema)
    # NaN != NaN, so compare the float64 column by its string form.
    assert back.drop_columns(["f64"]).equals(expected.drop_columns(["f64"]))
    assert str(back["f64"].to_pylist()) == str(expected["f64"].to_pylist())


def test_read_selects_columns_by_name() -> None:
    table = pa.table({"b": ["x"], "a": pa.array([1], pa.int32())})
    target = spark_arrow_schema(StructType([StructField("a", IntegerType()), StructField("b", StringType())]))
    (batch,) = to_spark_batches(table, target)
    assert batch.schema.names == ["a", "b"] and batch.to_pydict() == {"a": [1], "b": ["x"]}


@pytest.mark.parametrize(
    "arrow_type", [pa.uint64(), pa.float16(), pa.time64("us"), pa.duration("s"), pa.dictionary(pa.int8(), pa.string())]
)
def test_types_without_a_lossless_spark_type_are_refused_by_column(arrow_type: pa.DataType) -> None:
    with pytest.raises(TypeError, match="'bad'"):
        spark_schema(pa.schema([pa.field("ok", pa.int32()), pa.field("bad", arrow_type)]))


def test_nested_type_error_names_the_path() -> None:
    with pytest.raises(TypeError, match=r"'outer\.inner'"):
        spark_type(pa.struct([pa.field("inner", pa.uint64())]), "outer")


TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("price", pa.decimal128(10, 2)), pa.field("name", pa.string())])


def df_schema(**types: object) -> StructType:
    return StructType([StructField(name, t) for name, t in types.items()])  # type: ignore[arg-type]


def test_writable_accepts_exact_and_widening_types_in_any_order() -> None:
    check_writable(df_schema(name=StringType(), id=LongType(), price=DecimalType(10, 2)), TABLE)
    check_writable(df_schema(id=IntegerType(), price=DecimalType(5, 1), name=NullType()), TABLE)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (df_schema(price=DecimalType(10, 2), name=StringType()), "no column 'id'"),
        (df_schema(id=LongType(), price=DecimalType(10, 2), name=StringType(), extra=LongType()), "'extra' is not in"),
        (df_schema(id=DoubleType(), price=DecimalType(10, 2), name=StringType()), "'id' is double"),
        (df_schema(id=LongType(), price=DecimalType(12, 2), name=StringType()), "'price' is decimal"),
        (df_schema(id=LongType(), price=DecimalType(10, 3), name=StringType()), "'price' is decimal"),
        (df_schema(id=LongType(), price=DecimalType(10, 2), name=ArrayType(StringType())), "'name' is array"),
    ],
)
def test_writable_names_the_offending_column(schema: StructType, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        check_writable(schema, TABLE, table="ns.t")


def test_writable_allows_leaving_out_nullable_columns() -> None:
    check_writable(df_schema(id=LongType()), TABLE)
    (out,) = to_table_batches([pa.record_batch({"id": [1]})], TABLE)
    assert out.to_pydict() == {"id": [1], "price": [None], "name": [None]}


def test_writable_timestamps_keep_their_kind() -> None:
    table = pa.schema([pa.field("at", pa.timestamp("us", tz="UTC"))])
    check_writable(df_schema(at=TimestampType()), table)
    with pytest.raises(SchemaMismatchError, match="'at' is timestamp_ntz"):
        check_writable(df_schema(at=TimestampNTZType()), table)


def test_write_batches_widen_to_the_table_types() -> None:
    batch = pa.record_batch({"name": ["a"], "id": pa.array([5], pa.int32()), "price": pa.array([Decimal("1.5")], pa.decimal128(5, 1))})
    (out,) = to_table_batches([batch], TABLE)
    assert out.schema.equals(TABLE) and out.to_pydict() == {"id": [5], "price": [Decimal("1.50")], "name": ["a"]}
