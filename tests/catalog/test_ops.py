"""Operation records: every op survives to_record/from_record (durable transactions store them)."""

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from catalog import conflicts, ops
from catalog.datafiles import DataFile
from catalog.records import TableDef, ViewRecord
from catalog.schema import SchemaChange, assign_field_ids

SCHEMA, LAST = assign_field_ids(pa.schema([("id", pa.int64()), ("day", pa.string())]))
FILE = DataFile(id="f1", path="data/t/f1.parquet", size=10, rows=2, stats={"1": [1, 2, 0]})
DEF = TableDef(id="t", format="parquet", schema=SCHEMA, last_field_id=LAST, partition_ids=[2], location="data/t", created_ms=1)

EXAMPLES = [
    ops.CreateNamespace(ns=("a", "b"), properties={"k": "v"}, parents=True),
    ops.DropNamespace(ns=("a",), cascade=True),
    ops.UpdateNamespaceProperties(ns=("a",), updates={"x": "1"}, removals=["y"]),
    ops.CreateTable(ns=("a",), name="t", definition=DEF, properties={"p": "q"}),
    ops.DropTable(ns=("a",), name="t", purge=True),
    ops.RenameTable(ns=("a",), name="t", new_ns=("b",), new_name="u"),
    ops.Append(table="a.t", table_id="t", files=[FILE], schema=SCHEMA),
    ops.Overwrite(table="a.t", table_id="t", filter=pc.field("day") == "mon", files=[FILE], files_schema=SCHEMA),
    ops.Delete(table="a.t", table_id="t", filter=pc.field("id") > 3, removed=[FILE], added=[], observed=["f1"], schema=SCHEMA),
    ops.Compact(table="a.t", table_id="t", removed=[FILE], added=[FILE], observed=["f1"]),
    ops.UpdateSchema(table="a.t", table_id="t", change=SchemaChange([("add", ("z", pa.int8(), True)), ("drop", ("day",))]), base_version=3),
    ops.UpdateProperties(table="a.t", table_id="t", updates={"k": "v"}, removals=[]),
    ops.CommitMetadata(table="a.t", table_id="t", new_location="m2", expected="m1"),
    ops.CreateView(ns=("a",), name="v", view=ViewRecord(sql="SELECT 1", dialect="spark", schema=SCHEMA), view_id="v1"),
    ops.DropView(ns=("a",), name="v"),
]


@pytest.mark.parametrize("op", EXAMPLES, ids=[type(o).__name__ for o in EXAMPLES])
def test_records_round_trip_through_json(op: ops.Op) -> None:
    record = json.loads(json.dumps(op.to_record()))
    back = ops.from_record(record)
    assert type(back) is type(op) and back.to_record() == op.to_record()
    for name in op.__dataclass_fields__:
        a, b = getattr(op, name), getattr(back, name)
        if isinstance(a, pc.Expression):
            assert a.equals(b)
        elif isinstance(a, pa.Schema):
            assert a.equals(b, check_metadata=True)
        elif not isinstance(a, (TableDef, ViewRecord, SchemaChange)):
            assert a == b, name


def test_bad_records() -> None:
    with pytest.raises(ValueError, match="not a catalog operation"):
        ops.from_record({"kind": "format_disk"})
    with pytest.raises(ValueError, match="malformed append"):
        ops.from_record({"kind": "append", "table": "a.t"})


def test_every_kind_has_a_matrix_row() -> None:
    for op in EXAMPLES:
        conflicts.group(op.kind)
    with pytest.raises(ValueError):
        conflicts.group("nope")
    m = conflicts.matrix()
    assert m[("append", "append")] is None and m[("overwrite", "append")] == conflicts.RETRY
    assert conflicts.classify("append", None) == conflicts.REBASE
    assert conflicts.classify("append", "drop_table") == conflicts.FAIL
