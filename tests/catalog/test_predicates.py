"""Pruning never drops a file that holds a matching row (property), and prunes what it can."""

import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.datafiles import DataFile, column_stats
from catalog.planning import matches, prune, whole_matches
from catalog.predicates import And, Compare, IsIn, IsNull, Not, NotNull, Or, StartsWith, Unknown, from_expression
from catalog.schema import assign_field_ids

SCHEMA, _ = assign_field_ids(
    pa.schema([("i", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("f", pa.float64()), ("t", pa.timestamp("us", "UTC"))])
)


def test_structure_of_expressions() -> None:
    e = ((pc.field("i") > 3) & pc.field("s").isin(["x", "y"])) | (~pc.field("s").is_null() & pc.starts_with(pc.field("s"), "ab"))
    p = from_expression(e)
    assert isinstance(p, Or)
    left, right = p.children
    assert isinstance(left, And) and left.children[0] == Compare("i", ">", pa.scalar(3))
    assert isinstance(left.children[1], IsIn) and left.children[1].values.to_pylist() == ["x", "y"]
    assert right.children[0] == Not(IsNull("s")) and right.children[1] == StartsWith("s", "ab")
    assert from_expression(3 < pc.field("i")) == Compare("i", ">", pa.scalar(3))
    assert from_expression(pc.field("i").is_valid()) == NotNull("i")
    assert isinstance(from_expression(pc.field("i") + 1 > 3), Unknown)
    with pytest.raises(TypeError):
        from_expression("i > 3")


def _files(table: pa.Table, sizes: list[int]) -> tuple[list[DataFile], list[pa.Table]]:
    files, parts, start = [], [], 0
    for n, size in enumerate(sizes):
        part = table.slice(start, size)
        start += size
        stats = {str(k): column_stats(part.column(f.name)) for k, f in enumerate(SCHEMA, 1)}
        files.append(DataFile(id=f"f{n}-{uuid.uuid4().hex}", path=f"p{n}", size=1, rows=part.num_rows, stats=stats))  # ids are unique, as in a real table
        parts.append(part)
    return files, parts


ints = st.one_of(st.none(), st.integers(-20, 20))
strs = st.one_of(st.none(), st.text("abxy", max_size=3))
dates = st.one_of(st.none(), st.dates(dt.date(2024, 1, 1), dt.date(2024, 1, 20)))
floats = st.one_of(st.none(), st.floats(-5, 5), st.just(float("nan")))
stamps = st.one_of(st.none(), st.datetimes(dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 3), timezones=st.just(dt.timezone.utc)))
row = st.tuples(ints, strs, dates, floats, stamps)


def leaves() -> st.SearchStrategy[pc.Expression]:
    ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])

    def cmp(col: str, values: st.SearchStrategy) -> st.SearchStrategy[pc.Expression]:
        def build(op: str, v: object) -> pc.Expression:
            f = pc.field(col)
            lit = pa.scalar(v, SCHEMA.field(col).type)
            return {"==": f == lit, "!=": f != lit, "<": f < lit, "<=": f <= lit, ">": f > lit, ">=": f >= lit}[op]

        return st.builds(build, ops, values)

    return st.one_of(
        cmp("i", st.integers(-25, 25)),
        cmp("s", st.text("abxy", max_size=3)),
        cmp("d", st.dates(dt.date(2023, 12, 25), dt.date(2024, 1, 25))),
        cmp("f", st.floats(-6, 6, allow_nan=False)),
        cmp("t", st.datetimes(dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 3), timezones=st.just(dt.timezone.utc))),
        st.builds(lambda vs: pc.field("i").isin(vs), st.lists(st.integers(-25, 25), min_size=1, max_size=4)),
        st.builds(lambda c: pc.field(c).is_null(), st.sampled_from(["i", "s", "f"])),
        st.builds(lambda c: pc.field(c).is_valid(), st.sampled_from(["i", "s", "f"])),
        st.builds(lambda p: pc.starts_with(pc.field("s"), p), st.text("abxy", max_size=2)),
    )


exprs = st.recursive(
    leaves(),
    lambda children: st.one_of(
        st.builds(lambda a, b: a & b, children, children),
        st.builds(lambda a, b: a | b, children, children),
        st.builds(lambda a: ~a, children),
    ),
    max_leaves=6,
)


def _drawn_files(rows: list, data: st.DataObject) -> tuple[list[DataFile], list[pa.Table]]:
    """``rows`` as a table cut into files at drawn places."""
    table = pa.table({f.name: [r[k] for r in rows] for k, f in enumerate(SCHEMA)}, schema=SCHEMA)
    cuts = sorted(data.draw(st.lists(st.integers(1, len(rows) - 1), max_size=4, unique=True))) if len(rows) > 1 else []
    return _files(table, [b - a for a, b in zip([0, *cuts], [*cuts, len(rows)])])


@settings(max_examples=300, deadline=None)
@given(st.lists(row, min_size=1, max_size=40), st.data(), exprs)
def test_pruning_keeps_every_file_with_a_match(rows: list, data: st.DataObject, expr: pc.Expression) -> None:
    files, parts = _drawn_files(rows, data)
    kept = {f.id for f in prune(files, SCHEMA, expr)}
    for f, part in zip(files, parts):
        if pc.sum(matches(part, expr)).as_py():
            assert f.id in kept, f"{f.id} holds a row matching {expr} but was pruned"


@settings(max_examples=300, deadline=None)
@given(st.lists(row, min_size=1, max_size=40), st.data(), exprs)
def test_a_file_proven_to_match_whole_has_only_matching_rows(rows: list, data: st.DataObject, expr: pc.Expression) -> None:
    # A delete drops such a file without reading it: one row that does not
    # match (or matches as null) would be lost.
    files, parts = _drawn_files(rows, data)
    for whole, part in zip(whole_matches(files, SCHEMA, expr), parts):
        if whole:
            assert pc.all(matches(part, expr)).as_py(), f"a row of a file proven whole does not match {expr}"


def test_whole_file_matches_by_statistics() -> None:
    table = pa.table({"i": list(range(100)), "s": ["x"] * 100, "d": [dt.date(2024, 1, 1)] * 100, "f": [1.0] * 100,
                      "t": [None] * 100}, schema=SCHEMA)
    files, _ = _files(table, [10] * 10)

    def whole(expr: pc.Expression) -> list[str]:
        return [f.id.split("-")[0] for f, w in zip(files, whole_matches(files, SCHEMA, expr)) if w]

    assert whole(pc.field("i") < 30) == ["f0", "f1", "f2"]
    assert whole(pc.field("i") < 35) == ["f0", "f1", "f2"]  # f3 holds 35..39 too: it is read
    assert whole((pc.field("i") >= 90) | (pc.field("s") == "x")) == [f"f{n}" for n in range(10)]
    assert whole(~pc.field("i").isin([5, 95])) == [f"f{n}" for n in range(1, 9)]
    assert whole(pc.field("t").is_null()) == [f"f{n}" for n in range(10)]
    assert whole(pc.field("f") < 2.0) == []  # floating point: NaN rows would not match
    assert whole(pc.field("t") < pa.scalar(dt.datetime(2030, 1, 1), pa.timestamp("us", "UTC"))) == []  # nulls
    assert whole(pc.field("i") * 2 < 1000) == []  # not understood: read


def test_pruning_skips_files() -> None:
    table = pa.table({"i": list(range(100)), "s": ["x"] * 100, "d": [dt.date(2024, 1, 1)] * 100, "f": [1.0] * 100,
                      "t": [None] * 100}, schema=SCHEMA)
    files, _ = _files(table, [10] * 10)
    def kept(expr: pc.Expression) -> list[str]:
        return [f.id.split("-")[0] for f in prune(files, SCHEMA, expr)]

    assert kept(pc.field("i") == 42) == ["f4"]
    assert kept((pc.field("i") < 5) | (pc.field("i") >= 95)) == ["f0", "f9"]
    assert kept(pc.field("i").isin([3, 77])) == ["f0", "f7"]
    assert prune(files, SCHEMA, pc.field("s") == "zz") == []
    assert prune(files, SCHEMA, pc.field("t").is_valid()) == []
    assert len(prune(files, SCHEMA, ~(pc.field("i") < 50))) == 5
    # Unknown forms and unknown columns keep everything.
    assert len(prune(files, SCHEMA, pc.field("i") * 2 == 4)) == 10
    assert len(prune(files, SCHEMA, pc.field("nope") == 1)) == 10
