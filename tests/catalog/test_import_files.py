"""lake.add_files: Parquet files inside the lakehouse imported in place, checked, with statistics and checksums."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog import Lakehouse
from catalog.errors import CorruptDataFileError

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64())])


def _lake_root(lake: Lakehouse) -> Path:
    return Path(lake.url.removeprefix("file://"))


def _table(lake: Lakehouse, partitioned: bool = True) -> None:
    lake.create_namespace("ns")
    lake.create_table("ns.t", SCHEMA, partition_by=["day"] if partitioned else [])


def _write(root: Path, rel: str, table: pa.Table) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_a_hive_directory_is_imported_in_place_and_reads_with_its_partition_values(local_lake: Lakehouse) -> None:
    _table(local_lake)
    root = _lake_root(local_lake)
    _write(root, "landing/day=mon/part-0.parquet", pa.table({"id": pa.array([1, 2], pa.int32()), "v": [0.5, None]}))
    _write(root, "landing/day=tue/part-0.parquet", pa.table({"v": [2.5], "id": [3]}))
    (root / "landing/_SUCCESS").write_bytes(b"")

    report = local_lake.add_files("ns.t", "landing")

    assert (report.added_files_count, report.added_rows_count) == (2, 3)
    table = local_lake.load_table("ns.t")
    assert sorted(f.path for f in table.files()) == ["landing/day=mon/part-0.parquet", "landing/day=tue/part-0.parquet"]
    data = table.scan().to_arrow().sort_by("id")
    assert data.to_pylist() == [
        {"id": 1, "day": "mon", "v": 0.5}, {"id": 2, "day": "mon", "v": None}, {"id": 3, "day": "tue", "v": 2.5}
    ]
    # Statistics prune: a filter on the partition or a column bound skips the other file.
    assert len(table.files(filter=pc.field("day") == "tue")) == 1
    assert len(table.files(filter=pc.field("id") > 2)) == 1
    # A rename later still reads them (columns matched by the ids recorded at import).
    table.update_schema().rename_column("v", "value").commit()
    renamed = local_lake.load_table("ns.t").scan().to_arrow().sort_by("id")
    assert renamed.column("value").to_pylist() == [0.5, None, 2.5]
    assert local_lake.verify().ok


def test_the_checksum_computed_at_import_catches_a_later_corruption(local_lake: Lakehouse) -> None:
    _table(local_lake, partitioned=False)
    root = _lake_root(local_lake)
    _write(root, "in/one.parquet", pa.table({"id": [1], "day": ["x"], "v": [1.0]}))
    local_lake.add_files("ns.t", str(root / "in" / "one.parquet"))  # an absolute path under the root works too
    body = bytearray((root / "in/one.parquet").read_bytes())
    body[10] ^= 0xFF
    (root / "in/one.parquet").write_bytes(bytes(body))
    with pytest.raises(CorruptDataFileError, match="in/one.parquet"):
        local_lake.load_table("ns.t").scan().to_arrow()
    assert not local_lake.verify().ok
    scoped = local_lake.verify("ns.t")
    assert scoped.files_checked == 1 and [p.path for p in scoped.problems] == ["in/one.parquet"]
    local_lake.create_table("ns.other", SCHEMA).append(pa.table({"id": [1], "day": ["x"], "v": [1.0]}))
    assert local_lake.verify("ns.other").ok and local_lake.verify("ns.other").files_checked == 1


@pytest.mark.parametrize(
    ("files", "source", "match"),
    [
        ({"in/a.parquet": pa.table({"id": [1], "zz": [1]})}, "in", "in/a.parquet: column 'zz' is not in the table"),
        ({"in/a.parquet": pa.table({"id": ["1"]})}, "in", "in/a.parquet: column 'id' is string, the table's is int64"),
        ({"in/day=x/a.parquet": pa.table({"id": [1]}), "in/day=y/b.parquet": pa.table({"id": [1.5]})}, "in",
         "in/day=y/b.parquet: column 'id' is double"),
        ({"in/month=x/a.parquet": pa.table({"id": [1]})}, "in", "partition directories name month"),
        ({"in/a.parquet": pa.table({"id": [1]})}, "in", "lacks a partition column"),
        ({"in/a.parquet": pa.table({"id": [1, 2], "day": ["x", "y"]})}, "in", "more than one value of partition column 'day'"),
        ({}, "nothing", "holds no .parquet file"),
        ({}, "/elsewhere/x", "not inside the lakehouse's storage"),
        ({}, "s3://bucket/x", "not another store's URL"),
        ({}, "data/x", "under the lakehouse's data/"),
    ],
)
def test_a_file_that_does_not_fit_is_named_with_its_column_and_nothing_is_committed(
    local_lake: Lakehouse, files: dict[str, pa.Table], source: str, match: str
) -> None:
    _table(local_lake)
    root = _lake_root(local_lake)
    for rel, data in files.items():
        _write(root, rel, data)
    head = local_lake.version
    with pytest.raises(ValueError, match=match):
        local_lake.add_files("ns.t", source)
    assert local_lake.refresh() == head and local_lake.load_table("ns.t").files() == []


def test_imported_files_are_old_and_still_commit_and_survive_gc(local_lake: Lakehouse) -> None:
    """Files far older than half the GC grace commit (GC never collects outside data/) and are kept by gc."""
    _table(local_lake, partitioned=False)
    root = _lake_root(local_lake)
    _write(root, "old/a.parquet", pa.table({"id": [1], "day": ["x"], "v": [1.0]}))
    week_ago = os.path.getmtime(root / "old/a.parquet") - 7 * 86400
    os.utime(root / "old/a.parquet", (week_ago, week_ago))
    local_lake.add_files("ns.t", "old")
    local_lake.gc(grace_s=0)
    assert local_lake.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [1]
    # A rewrite turns it into a native file; the import's file then goes with the removal, past retention.
    local_lake.rewrite_data_files("ns.t", target_file_bytes=1 << 20, strategy="sort", sort_order="id")
    assert [f.column_ids for f in local_lake.load_table("ns.t").files()] == [None]
    assert local_lake.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [1]
