"""catalog/spark/conditions.py: DELETE conditions as exact Arrow filters, with DuckDB's SQL as the model.

DuckDB follows SQL's three-valued logic as Spark does, so for any condition
tree the rows the Arrow expression makes TRUE must be exactly the rows
DuckDB's ``WHERE`` keeps. No SparkSession needed.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.spark.conditions import exact_condition

SCHEMA = pa.schema([("id", pa.int64()), ("i", pa.int32()), ("s", pa.string()), ("f", pa.float64())])

_SQL_OPS = {"EqualTo": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<", "LessThanOrEqual": "<="}


def to_sql(node: dict[str, Any]) -> str:
    kind = node["type"]
    if kind in ("And", "Or"):
        return f"({to_sql(node['left'])} {kind.upper()} {to_sql(node['right'])})"
    if kind == "Not":
        return f"(NOT {to_sql(node['child'])})"
    if kind in ("AlwaysTrue", "AlwaysFalse"):
        return "TRUE" if kind == "AlwaysTrue" else "FALSE"
    column = node["attribute"][0]
    if kind == "IsNull":
        return f"({column} IS NULL)"
    if kind == "IsNotNull":
        return f"({column} IS NOT NULL)"
    if kind == "In":
        if not node["values"]:
            return "FALSE"  # SQL has no empty IN list; Spark's In([]) is false
        return f"({column} IN ({', '.join(literal_sql(v) for v in node['values'])}))"
    if kind == "StringStartsWith":
        return f"starts_with({column}, {literal_sql(node['value'])})"
    if kind == "EqualNullSafe":
        return f"({column} IS NOT DISTINCT FROM {literal_sql(node['value'])})"
    return f"({column} {_SQL_OPS[kind]} {literal_sql(node['value'])})"


def literal_sql(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def leaf(kind: str, column: str, **extra: object) -> dict[str, Any]:
    return {"type": kind, "attribute": [column], **extra}


ints = st.one_of(st.none(), st.integers(-3, 3))
strs = st.one_of(st.none(), st.text("ab", max_size=2))
leaves = st.one_of(
    st.builds(lambda k, v: leaf(k, "i", value=v), st.sampled_from([*_SQL_OPS, "EqualNullSafe"]), ints),
    st.builds(lambda k, v: leaf(k, "s", value=v), st.sampled_from([*_SQL_OPS, "EqualNullSafe"]), strs),
    st.builds(lambda vs: leaf("In", "i", values=vs), st.lists(ints, max_size=3)),
    st.builds(lambda c: leaf("IsNull", c), st.sampled_from(["i", "s"])),
    st.builds(lambda c: leaf("IsNotNull", c), st.sampled_from(["i", "s"])),
    st.builds(lambda p: leaf("StringStartsWith", "s", value=p), st.text("ab", max_size=2)),
    st.sampled_from([{"type": "AlwaysTrue"}, {"type": "AlwaysFalse"}]),
)
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.builds(lambda a, b: {"type": "And", "left": a, "right": b}, children, children),
        st.builds(lambda a, b: {"type": "Or", "left": a, "right": b}, children, children),
        st.builds(lambda a: {"type": "Not", "child": a}, children),
    ),
    max_leaves=5,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ints, strs), min_size=1, max_size=12), st.lists(trees, min_size=1, max_size=2))
def test_the_rows_a_condition_selects_are_those_sql_selects(values: list[tuple[Any, Any]], conditions: list[dict[str, Any]]) -> None:
    rows = pa.table(
        {"id": list(range(len(values))), "i": [v[0] for v in values], "s": [v[1] for v in values], "f": [0.0] * len(values)},
        schema=SCHEMA,
    )
    selected = rows.filter(exact_condition(conditions, SCHEMA)).column("id").to_pylist()
    where = " AND ".join(to_sql(c) for c in conditions)
    with duckdb.connect() as db:
        db.register("arrow_rows", rows)
        db.execute("CREATE TABLE t AS SELECT * FROM arrow_rows")  # a DuckDB table: no Arrow-scan pushdown
        expected = [row[0] for row in db.execute(f"SELECT id FROM t WHERE {where} ORDER BY id").fetchall()]
    assert sorted(selected) == expected, where


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ([leaf("GreaterThan", "f", value=1.5)], "float/double column 'f'"),
        ([leaf("EqualTo", "nope", value=1)], "'nope', which is not a column"),
        ([{"type": "EqualTo", "attribute": ["s", "x"], "value": 1}], "only top-level columns"),
        ([leaf("EqualTo", "i", value=2**40)], "does not fit column 'i'"),
        ([leaf("EqualTo", "i", value=1.5)], "does not fit column 'i'"),
        ([leaf("StringEndsWith", "s", value="a")], "StringEndsWith has no exact translation"),
        ([], "non-empty list"),
    ],
)
def test_a_condition_without_an_exact_form_is_refused_naming_it(conditions: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        exact_condition(conditions, SCHEMA)


def test_literals_at_the_edges_of_the_years_decode_exactly_or_are_refused() -> None:
    import datetime as dt

    from catalog.spark.conditions import literal

    utc = dt.timezone.utc
    assert literal({"timestamp_us": 253402300799999999}) == dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc)
    assert literal({"timestamp_us": -62135596800000000}) == dt.datetime(1, 1, 1, tzinfo=utc)
    assert literal({"date": "0001-01-01"}) == dt.date(1, 1, 1)
    assert literal({"timestamp_ntz": "9999-12-31T23:59:59.999999"}) == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert literal({"decimal": "-99999999999999999999999999999999999999"}) == -(10**38 - 1)
    for encoded in ({"timestamp_us": 253402300800000000}, {"timestamp_us": -62135596800000001},
                    {"date": "+10000-01-01"}):
        with pytest.raises(ValueError):
            literal(encoded)
