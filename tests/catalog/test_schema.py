import pyarrow as pa
import pytest

from catalog.errors import SchemaMismatchError
from catalog.schema import (
    SchemaChange,
    assign_field_ids,
    can_widen,
    conform,
    field_id,
    project,
    schema_from_json,
    schema_to_json,
)


def test_ids_assigned_and_round_trip() -> None:
    s, last = assign_field_ids(pa.schema([("a", pa.int32()), ("b", pa.string())]))
    assert [field_id(f) for f in s] == [1, 2] and last == 2
    assert schema_from_json(schema_to_json(s)).equals(s, check_metadata=True)


@pytest.mark.parametrize(
    "schema, message",
    [
        (pa.schema([]), "at least one column"),
        (pa.schema([("a", pa.int32()), ("a", pa.int64())]), "appears twice"),
        (pa.schema([("d", pa.dictionary(pa.int8(), pa.string()))]), "not supported"),
    ],
)
def test_bad_schemas(schema: pa.Schema, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        assign_field_ids(schema)
    with pytest.raises(TypeError):
        assign_field_ids({"a": "int"})


def test_widening_rules() -> None:
    assert can_widen(pa.int32(), pa.int64()) and not can_widen(pa.int64(), pa.int32())
    assert can_widen(pa.float32(), pa.float64()) and not can_widen(pa.float64(), pa.float32())
    assert can_widen(pa.decimal128(10, 2), pa.decimal128(12, 2)) and not can_widen(pa.decimal128(10, 2), pa.decimal128(12, 3))
    assert not can_widen(pa.string(), pa.int64())


def test_conform_names_column_and_both_types() -> None:
    s, _ = assign_field_ids(pa.schema([("a", pa.int64()), pa.field("b", pa.string(), nullable=False)]))
    with pytest.raises(SchemaMismatchError, match=r"column 'a': data type string does not match the table's int64"):
        conform(pa.table({"a": ["x"], "b": ["y"]}), s)
    with pytest.raises(SchemaMismatchError, match="column 'c'"):
        conform(pa.table({"a": [1], "b": ["y"], "c": [1]}), s)
    with pytest.raises(SchemaMismatchError, match="'b'.*missing"):
        conform(pa.table({"a": [1]}), s)
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        conform(pa.table({"a": [1], "b": pa.array([None], pa.string())}), s)
    out = conform(pa.table({"b": pa.array(["y"], pa.large_string()), "a": pa.array([1], pa.int32())}), s)
    assert out.schema.equals(s, check_metadata=True) and out.to_pylist() == [{"a": 1, "b": "y"}]
    filled = conform(pa.table({"b": ["y"]}), s)
    assert filled.column("a").to_pylist() == [None]


def test_project_by_field_id_after_evolution() -> None:
    s, last = assign_field_ids(pa.schema([("a", pa.int32()), ("b", pa.string()), ("c", pa.int64())]))
    old = conform(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [5, 6]}), s)
    change = SchemaChange(
        [("rename", ("b", "bee")), ("drop", ("c",)), ("widen", ("a", pa.int64())), ("add", ("d", pa.float64(), True))]
    )
    new, new_last = change.apply(s, last, [])
    assert new_last == 4 and new.names == ["a", "bee", "d"]
    got = project(old, new)
    assert got.to_pylist() == [{"a": 1, "bee": "x", "d": None}, {"a": 2, "bee": "y", "d": None}]
    assert got.schema.field("a").type == pa.int64()


@pytest.mark.parametrize(
    "steps, message",
    [
        ([("add", ("a", pa.int8(), True))], "already exists"),
        ([("add", ("z", pa.int8(), False))], "must be nullable"),
        ([("rename", ("nope", "x"))], "no column"),
        ([("rename", ("a", "b"))], "already exists"),
        ([("drop", ("p",))], "partition column"),
        ([("widen", ("a", pa.int8()))], "without loss"),
    ],
)
def test_impossible_changes(steps: list, message: str) -> None:
    s, last = assign_field_ids(pa.schema([("a", pa.int32()), ("b", pa.string()), ("p", pa.string())]))
    with pytest.raises(ValueError, match=message):
        SchemaChange(steps).apply(s, last, [3])


def test_top_level_map_columns_are_tables_columns_without_statistics() -> None:
    import catalog

    schema = pa.schema([("id", pa.int64()), ("tags", pa.map_(pa.string(), pa.int64()))])
    with catalog.open("memory://schema-maps", poll_interval_s=0) as lake:
        lake.create_namespace("m")
        t = lake.create_table("m.t", schema)
        t.append(pa.table({"id": [1, 2], "tags": [[("a", 1)], None]}, schema=schema))
        assert t.scan().to_arrow().column("tags").to_pylist() == [[("a", 1)], None]
        (entry,) = t.files()
        tags_id = str(field_id(t.schema.field("tags")))
        assert entry.stats[tags_id][:2] == [None, None]  # no min/max for a map
        with pytest.raises(ValueError, match="cannot be a partition column"):
            lake.create_table("m.p", schema, partition_by=["tags"])
