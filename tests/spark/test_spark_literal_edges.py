"""Filter literals at the edges of every column type, through the catalog plugin (issue 35, acceptance 5).

Every supported column type gets its minimum, maximum and special values
(NaN, +-Infinity, -0.0, the Julian/Gregorian switch of 1582, the years 1 and
9999, timestamps outside 1677-2262 that nanoseconds cannot hold, empty,
non-ASCII and longest code point strings, 38-digit decimals). The same values
are the rows and the literals: each predicate ``c <op> literal`` (and IN, IS
NULL, <=> and LIKE combinations) runs as

* SELECT over a lakekv table whose rows lie in three files of ascending
  ranges (so min/max pruning decides something), compared with the same
  predicate evaluated by Spark over an in-memory temporary view of the rows;
* UPDATE, MERGE and DELETE over a table partitioned by a block number, one
  block per statement (so statements do not see each other's changes),
  compared with the table a plain Spark model computes: each row's
  predicate values over the in-memory view, applied in Python.

A literal the pruning cannot read exactly must prune nothing; a wrong prune
or a refused literal fails here. The cases are batched (one table for all
SELECTs, one for all changes, one query for the model) to stay within a few
minutes on a busy machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    values: tuple[str, ...]  # SQL literals in ascending Spark order (NaN last)

    def literal(self, i: int) -> str:
        return self.values[i]


def _float(kind: str, suffix: str, huge: str, tiny: str) -> tuple[str, ...]:
    def cast(v: str) -> str:
        return f"CAST('{v}' AS {kind})"

    return (cast("-Infinity"), f"-{huge}{suffix}", f"-0.0{suffix}", f"0.0{suffix}", f"{tiny}{suffix}",
            f"{huge}{suffix}", cast("Infinity"), cast("NaN"))


def _dec(value: str) -> str:
    return f"CAST('{value}' AS DECIMAL(38,18))"


_LONG_STRING = "a" * 300  # longer than the catalog keeps statistics for
COLUMNS: tuple[Column, ...] = (
    Column("c_bool", "BOOLEAN", ("false", "true")),
    Column("c_byte", "TINYINT", ("-128Y", "-1Y", "0Y", "127Y")),
    Column("c_short", "SMALLINT", ("-32768S", "0S", "32767S")),
    Column("c_int", "INT", ("-2147483648", "0", "2147483647")),
    Column("c_long", "BIGINT", ("-9223372036854775808L", "0L", "9223372036854775807L")),
    Column("c_float", "FLOAT", _float("FLOAT", "F", "3.4028234663852886E38", "1.4E-45")),
    Column("c_double", "DOUBLE", _float("DOUBLE", "D", "1.7976931348623157E308", "4.9E-324")),
    Column("c_dec38", "DECIMAL(38,0)",
           ("-99999999999999999999999999999999999999BD", "0BD", "99999999999999999999999999999999999999BD")),
    Column("c_dec", "DECIMAL(38,18)",
           (_dec("-99999999999999999999.999999999999999999"), _dec("-0.000000000000000001"), _dec("0"),
            _dec("0.000000000000000001"), _dec("99999999999999999999.999999999999999999"))),
    Column("c_str", "STRING",
           ("''", "' '", "'A'", "'a'", f"'{_LONG_STRING}'", "'\u00e9'", "'\uffff'", "'\U0001f600'", "'\U0010ffff'")),
    Column("c_bin", "BINARY", ("X''", "X'00'", "X'7F'", "X'80'", "X'FF'", "X'FFFF'")),
    Column("c_date", "DATE",
           ("DATE'0001-01-01'", "DATE'1582-10-04'", "DATE'1582-10-15'", "DATE'1969-12-31'", "DATE'1970-01-01'",
            "DATE'9999-12-31'")),
    *(
        Column(name, kind, tuple(f"{kind}'{t}'" for t in (
            "0001-01-01 00:00:00", "1582-10-10 12:00:00", "1600-01-01 00:00:00", "1969-12-31 23:59:59.999999",
            "2300-01-01 00:00:00", "9999-12-31 00:00:00", "9999-12-31 23:59:59.999999")))
        for name, kind in (("c_ts", "TIMESTAMP"), ("c_ntz", "TIMESTAMP_NTZ"))
    ),
)
OPS = ("=", "<", "<=", ">", ">=", "<>", "<=>")
ROWS = 1 + max(len(c.values) for c in COLUMNS)  # every value, and NULL, in each column
BATCH = 30  # SELECT predicates per query
FILES = 3  # rows 0-2, 3-5, 6-8...: ascending ranges, so statistics can prune


def _cell(column: Column, row: int) -> str:
    values = (*column.values, "NULL")
    return f"CAST({values[row * len(values) // ROWS]} AS {column.sql_type})"


def _rows(first: int, stop: int) -> str:
    return ", ".join(f"({i}, {', '.join(_cell(c, i) for c in COLUMNS)})" for i in range(first, stop))


def _predicates(column: Column) -> list[str]:
    c, v = column.name, column.values
    # Every operator for the minimum and maximum, three (in turn) for the values between.
    out = [
        f"{c} {op} {value}"
        for j, value in enumerate(v)
        for op in (OPS if j in (0, len(v) - 1) else [OPS[(j + k) % len(OPS)] for k in range(0, len(OPS), 3)])
    ]
    mid = v[len(v) // 2]
    out += [
        f"{c} IN ({v[0]}, {v[-1]})",
        f"{c} IN ({mid}, NULL)",
        f"{c} NOT IN ({v[0]}, {v[-1]})",
        f"{c} IS NULL",
        f"{c} IS NOT NULL",
        f"{c} <=> NULL",
        f"{c} IS NULL OR {c} = {v[0]}",
        f"{c} IS NOT NULL AND {c} >= {mid}",
        f"NOT ({c} < {mid})",
    ]
    if column.sql_type == "STRING":
        out += [f"{c} LIKE '{p}%'" for p in ("", "a", "\u00e9", "\U0010ffff", _LONG_STRING[:280])]
    if column.sql_type == "BOOLEAN":
        out += [c, f"NOT {c}"]
    return out


def _base_view(spark: SparkSession, name: str) -> None:
    """The rows as an in-memory temporary view (a local relation: nothing of lakekv in it)."""
    columns = ", ".join(["id"] + [c.name for c in COLUMNS])
    spark.sql(f"SELECT * FROM VALUES {_rows(0, ROWS)} AS v({columns})").createOrReplaceTempView(name)


def _model(spark: SparkSession, view: str, predicates: list[str]) -> dict[int, list[bool]]:
    """For each row id, whether each predicate is true (not false or null), as Spark evaluates it over the view."""
    selected = ", ".join(f"coalesce({p}, false) AS p{i}" for i, p in enumerate(predicates))
    return {row[0]: list(row[1:]) for row in spark.sql(f"SELECT id, {selected} FROM {view}").collect()}


def _json_rows(spark: SparkSession, keys: str, sql_from: str) -> dict[tuple[object, ...], str]:
    """Each row's data columns as JSON (NaN, -0.0, bytes and year 1 kept exactly), by its key columns."""
    data = ", ".join(c.name for c in COLUMNS)
    return {
        tuple(r[:-1]): r[-1]
        for r in spark.sql(f"SELECT {keys}, to_json(struct({data})) {sql_from}").collect()
    }


def test_every_edge_literal_selects_what_spark_selects(spark: SparkSession, ns: str) -> None:
    table = f"{ns}.edges"
    _base_view(spark, "edge_rows")
    spark.sql(f"CREATE TABLE {table} (id INT, {', '.join(f'{c.name} {c.sql_type}' for c in COLUMNS)})")
    per_file = -(-ROWS // FILES)
    for first in range(0, ROWS, per_file):
        spark.sql(f"INSERT INTO {table} SELECT * FROM edge_rows WHERE id >= {first} AND id < {first + per_file}")
    assert _json_rows(spark, "id", f"FROM {table}") == _json_rows(spark, "id", "FROM edge_rows")

    predicates = [p for column in COLUMNS for p in _predicates(column)]
    model = _model(spark, "edge_rows", predicates)
    got: dict[int, list[int]] = {i: [] for i in range(len(predicates))}
    # Each UNION ALL branch is its own scan with its own pushed filters; 30
    # branches a query costs a third of 30 queries.
    for first in range(0, len(predicates), BATCH):
        union = " UNION ALL ".join(
            f"SELECT {i} AS q, id FROM {table} WHERE {predicates[i]}"
            for i in range(first, min(first + BATCH, len(predicates)))
        )
        for q, row_id in spark.sql(union).collect():
            got[q].append(row_id)
    wrong = []
    for i, predicate in enumerate(predicates):
        want = sorted(row_id for row_id, truth in model.items() if truth[i])
        if sorted(got[i]) != want:
            wrong.append(f"WHERE {predicate}: lakekv {sorted(got[i])}, Spark {want}")
    assert not wrong, f"{len(wrong)} of {len(predicates)} predicates differ:\n" + "\n".join(wrong[:40])


def _changes() -> list[tuple[str, str]]:
    """(statement kind, predicate): per column its minimum, middle and maximum, each in one kind, and an OR tree."""
    out = []
    for n, column in enumerate(COLUMNS):
        c, v = column.name, column.values
        out += [
            ("UPDATE", f"{c} {OPS[n % len(OPS)]} {v[0]}"),
            ("MERGE", f"{c} {OPS[(n + 2) % len(OPS)]} {v[-1]}"),
            ("DELETE", f"{c} {OPS[(n + 4) % len(OPS)]} {v[len(v) // 2]}"),
            ("DELETE", f"{c} IS NULL OR {c} IN ({v[0]}, {v[-1]})"),
        ]
    return out + [  # the special values of issue 35
        ("UPDATE", "c_ts = TIMESTAMP'9999-12-31 00:00:00'"),
        ("MERGE", "c_ts = TIMESTAMP'9999-12-31 00:00:00'"),
        ("DELETE", "c_ts = TIMESTAMP'9999-12-31 00:00:00'"),
        ("DELETE", "c_ts < TIMESTAMP'2300-01-01 00:00:00'"),
        ("UPDATE", "c_ntz > TIMESTAMP_NTZ'1600-01-01 00:00:00'"),
        ("DELETE", "c_date <= DATE'1582-10-04'"),
        ("UPDATE", "c_double = CAST('NaN' AS DOUBLE)"),
        ("MERGE", "c_float > CAST('-Infinity' AS FLOAT)"),
        ("DELETE", "c_double = -0.0D"),
        ("DELETE", "c_dec38 >= 99999999999999999999999999999999999999BD"),
        ("UPDATE", "c_str >= '\U0001f600'"),
        ("DELETE", "c_str LIKE '\u00e9%'"),
    ]


def test_every_edge_literal_changes_what_spark_changes(spark: SparkSession, ns: str) -> None:
    table = f"{ns}.changes"
    _base_view(spark, "change_rows")
    changes = _changes()
    columns = ", ".join(f"{c.name} {c.sql_type}" for c in COLUMNS)
    spark.sql(f"CREATE TABLE {table} (blk INT, id INT, tag STRING, {columns}) PARTITIONED BY (blk)")
    per_file = -(-ROWS // FILES)
    data = ", ".join(c.name for c in COLUMNS)
    for first in range(0, ROWS, per_file):
        spark.sql(
            f"INSERT INTO {table} SELECT b.id AS blk, r.id, '' AS tag, {data} FROM change_rows r "
            f"CROSS JOIN range({len(changes)}) b WHERE r.id >= {first} AND r.id < {first + per_file}"
        )
    for blk, (kind, predicate) in enumerate(changes):
        if kind == "UPDATE":
            spark.sql(f"UPDATE {table} SET tag = 'u' WHERE blk = {blk} AND ({predicate})")
        elif kind == "MERGE":
            spark.sql(
                f"MERGE INTO {table} t USING (SELECT id FROM change_rows) s "
                f"ON t.id = s.id AND t.blk = {blk} AND ({predicate}) WHEN MATCHED THEN UPDATE SET tag = 'm'"
            )
        else:
            spark.sql(f"DELETE FROM {table} WHERE blk = {blk} AND ({predicate})")

    model = _model(spark, "change_rows", [p for _, p in changes])
    base = _json_rows(spark, "id", "FROM change_rows")
    want = {}
    for blk, (kind, _) in enumerate(changes):
        for (row_id,), row in base.items():
            hit = model[row_id][blk]
            if kind == "DELETE" and hit:
                continue
            tag = {"UPDATE": "u", "MERGE": "m"}.get(kind, "") if hit else ""
            want[(blk, row_id, tag)] = row
    got = _json_rows(spark, "blk, id, tag", f"FROM {table}")
    wrong = sorted(set(got.items()) ^ set(want.items()))
    described = [
        f"{changes[key[0]][0]} WHERE {changes[key[0]][1]}: row {key[1:]} "
        + ("only in lakekv" if got.get(key) == row else "only in the model")
        for key, row in wrong
    ]
    assert not wrong, f"{len(wrong)} rows differ:\n" + "\n".join(described[:40])


@pytest.mark.parametrize(
    "condition",
    ["c IS NULL OR c IN (false, true)", "NOT (c IS NULL OR c IN (false, true))", "id = 1 OR c IN (true)",
     "NOT (id = 1 OR c IN (false))"],
)
def test_a_delete_whose_or_holds_a_boolean_in_deletes_what_spark_selects(
    spark: SparkSession, ns: str, condition: str
) -> None:
    # Spark's own V2-to-V1 conversion answered `c IS NULL` for the first condition
    # (a boolean IN has no V1 form), so the delete removed the null rows only; the
    # others are guards (Spark's optimizer rewrites them before the conversion).
    table = f"{ns}.flags"
    spark.sql(f"CREATE TABLE {table} (id INT, c BOOLEAN)")
    rows = "(0, false), (1, true), (2, NULL), (3, true)"
    spark.sql(f"INSERT INTO {table} VALUES {rows}")
    want = spark.sql(f"SELECT id FROM VALUES {rows} AS v(id, c) WHERE NOT coalesce({condition}, false)").collect()
    spark.sql(f"DELETE FROM {table} WHERE {condition}")
    assert sorted(spark.sql(f"SELECT id FROM {table}").collect()) == sorted(want)


def test_timestamps_far_from_1970_filter_every_statement(spark: SparkSession, ns: str) -> None:
    # Filters.java turned TIMESTAMP literals into microseconds through nanoseconds,
    # which overflow outside 1677-2262: every statement failed with "long overflow".
    table = f"{ns}.scd"
    spark.sql(f"CREATE TABLE {table} (id INT, valid_to TIMESTAMP)")
    spark.sql(f"INSERT INTO {table} VALUES (1, TIMESTAMP'9999-12-31 00:00:00'), (2, TIMESTAMP'2020-01-01 00:00:00')")
    spark.sql(f"INSERT INTO {table} VALUES (3, TIMESTAMP'1500-06-01 00:00:00')")
    open_row = "valid_to = TIMESTAMP'9999-12-31 00:00:00'"
    assert spark.sql(f"SELECT id FROM {table} WHERE {open_row}").collect() == [(1,)]
    assert spark.sql(f"SELECT id FROM {table} WHERE valid_to < TIMESTAMP'2300-01-01 00:00:00' ORDER BY id").collect() == [
        (2,), (3,)
    ]
    assert spark.sql(f"SELECT id FROM {table} WHERE valid_to > TIMESTAMP'1600-01-01 00:00:00' ORDER BY id").collect() == [
        (1,), (2,)
    ]
    spark.sql(f"UPDATE {table} SET id = 10 WHERE {open_row}")
    spark.sql(
        f"MERGE INTO {table} t USING (SELECT 2 AS id) s ON t.id = s.id AND t.valid_to < TIMESTAMP'2300-01-01 00:00:00' "
        "WHEN MATCHED THEN UPDATE SET id = 20"
    )
    spark.sql(f"DELETE FROM {table} WHERE valid_to < TIMESTAMP'1600-01-01 00:00:00'")
    assert sorted(spark.sql(f"SELECT id FROM {table}").collect()) == [(10,), (20,)]


def test_a_timestamp_past_9999_in_utc_is_written_and_filtered(spark: SparkSession, ns: str) -> None:
    # 9999-12-31 23:00 in Los Angeles is in the year 10000 in UTC: Spark writes it, but
    # reading the footer statistics of its file raised a raw OverflowError at commit.
    table = f"{ns}.far"
    spark.sql(f"CREATE TABLE {table} (id INT, ts TIMESTAMP)")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        spark.sql(f"INSERT INTO {table} VALUES (1, TIMESTAMP'9999-12-31 23:00:00'), (2, TIMESTAMP'2020-01-01 00:00:00')")
        for condition, want in (("ts > TIMESTAMP'9999-12-31 22:00:00'", [(1,)]),
                                ("ts = TIMESTAMP'9999-12-31 23:00:00'", [(1,)]),
                                ("ts < TIMESTAMP'9999-12-31 23:00:00'", [(2,)])):
            assert spark.sql(f"SELECT id FROM {table} WHERE {condition}").collect() == want, condition
        spark.sql(f"DELETE FROM {table} WHERE ts < TIMESTAMP'9999-12-31 23:00:00'")
        assert spark.sql(f"SELECT id FROM {table}").collect() == [(1,)]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
