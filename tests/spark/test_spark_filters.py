"""Spark pushed filters → pruning expressions (catalog/spark/filters.py); pure, no SparkSession.

The property that matters: a row Spark would keep is never refused by the
expression (pruning may keep too much, never too little).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from catalog.spark.filters import filter_expression, prefix_successor, pruning_expression

SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("dec", pa.decimal128(6, 2)),
        ("f", pa.float64()),
        ("st", pa.struct([("x", pa.int32())])),
    ]
)


def test_each_supported_filter_translates() -> None:
    cases = {
        EqualTo(("i",), 3): pc.field("i") == pa.scalar(3, pa.int32()),
        GreaterThan(("i",), 3): pc.field("i") > pa.scalar(3, pa.int32()),
        GreaterThanOrEqual(("d",), dt.date(2020, 1, 1)): pc.field("d") >= pa.scalar(dt.date(2020, 1, 1), pa.date32()),
        LessThan(("dec",), Decimal("1.50")): pc.field("dec") < pa.scalar(Decimal("1.50"), pa.decimal128(6, 2)),
        LessThanOrEqual(("s",), "m"): pc.field("s") <= pa.scalar("m", pa.string()),
        IsNull(("f",)): pc.field("f").is_null(),
        IsNotNull(("s",)): pc.field("s").is_valid(),
        StringStartsWith(("s",), "ab"): (pc.field("s") >= pa.scalar("ab", pa.string()))
        & (pc.field("s") < pa.scalar("ac", pa.string())),
    }
    for spark_filter, expected in cases.items():
        got = filter_expression(spark_filter, SCHEMA)
        assert got is not None and got.equals(expected), spark_filter


def test_timestamps_need_the_matching_kind_of_literal() -> None:
    aware = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    naive = dt.datetime(2024, 1, 1)
    assert filter_expression(GreaterThan(("ts",), aware), SCHEMA) is not None
    assert filter_expression(GreaterThan(("ts",), naive), SCHEMA) is None
    assert filter_expression(GreaterThan(("ntz",), naive), SCHEMA) is not None
    assert filter_expression(GreaterThan(("ntz",), aware), SCHEMA) is None


@pytest.mark.parametrize(
    "spark_filter",
    [
        GreaterThan(("f",), 1.0),  # NaN ordering differs from min/max statistics
        EqualTo(("st", "x"), 1),  # nested path
        EqualTo(("missing",), 1),
        Not(EqualTo(("i",), 1)),
        StringContains(("s",), "a"),
        EqualTo(("i",), 2**40),  # does not fit the column type
        In(("i",), (None,)),
    ],
)
def test_filters_that_cannot_prune_are_skipped(spark_filter: Any) -> None:
    assert filter_expression(spark_filter, SCHEMA) is None


def test_pruning_expression_ands_what_it_can() -> None:
    expression = pruning_expression([GreaterThan(("f",), 1.0), EqualTo(("i",), 1), IsNotNull(("s",))], SCHEMA)
    assert expression is not None
    assert expression.equals((pc.field("i") == pa.scalar(1, pa.int32())) & pc.field("s").is_valid())
    assert pruning_expression([GreaterThan(("f",), 1.0)], SCHEMA) is None


def test_prefix_successor_edges() -> None:
    assert prefix_successor("a\ud7ff") == "a\ue000"
    assert prefix_successor("\U0010ffff\U0010ffff") is None


def spark_keeps(row_value: Any, spark_filter: Any) -> bool:
    """Spark's row semantics for the filters under test (NULL never matches a comparison)."""
    if isinstance(spark_filter, IsNull):
        return row_value is None
    if isinstance(spark_filter, IsNotNull):
        return row_value is not None
    if row_value is None:
        return False
    if isinstance(spark_filter, In):
        return row_value in spark_filter.value
    if isinstance(spark_filter, StringStartsWith):
        return bool(row_value.startswith(spark_filter.value))
    ops = {
        EqualTo: lambda a, b: a == b,
        GreaterThan: lambda a, b: a > b,
        GreaterThanOrEqual: lambda a, b: a >= b,
        LessThan: lambda a, b: a < b,
        LessThanOrEqual: lambda a, b: a <= b,
    }
    return bool(ops[type(spark_filter)](row_value, spark_filter.value))


ints = st.one_of(st.none(), st.integers(-50, 50))
texts = st.one_of(st.none(), st.text(alphabet="ab\U0010ffffé", max_size=3))
comparisons = st.sampled_from([EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual])
int_filters = st.one_of(
    st.builds(lambda op, v: op(("i",), v), comparisons, st.integers(-50, 50)),
    st.builds(lambda vs: In(("i",), tuple(vs)), st.lists(st.integers(-50, 50), min_size=1, max_size=4)),
    st.just(IsNull(("i",))),
    st.just(IsNotNull(("i",))),
)
text_filters = st.one_of(
    st.builds(lambda op, v: op(("s",), v), comparisons, st.text(alphabet="ab\U0010ffffé", max_size=3)),
    st.builds(lambda p: StringStartsWith(("s",), p), st.text(alphabet="ab\U0010ffffé", max_size=3)),
)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(ints, texts), min_size=1, max_size=20),
    filters=st.lists(st.one_of(int_filters, text_filters), min_size=1, max_size=3),
)
def test_expression_never_refuses_a_row_spark_keeps(rows: list[tuple[Any, Any]], filters: list[Any]) -> None:
    schema = pa.schema([("i", pa.int32()), ("s", pa.string())])
    table = pa.Table.from_pylist([{"i": i, "s": s} for i, s in rows], schema=schema)
    expression = pruning_expression(filters, schema)
    assert expression is not None
    kept = table.filter(expression).to_pylist()
    for i, s in rows:
        values = {"i": i, "s": s}
        if all(spark_keeps(values[f.attribute[0]], f) for f in filters):
            assert {"i": i, "s": s} in kept
