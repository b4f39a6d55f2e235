"""Read planning and the read path of the source without a SparkSession (catalog/spark/source.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.datafiles import DataFile
from catalog.spark.source import MIN_SPLIT_BYTES, FilesPartition, LakehouseDataSource, plan_partitions
from catalog.spark.types import spark_arrow_schema


def entries(*sizes: int) -> list[DataFile]:
    return [DataFile(id=str(i), path=f"p{i}", size=size, rows=1) for i, size in enumerate(sizes)]


def ids(partitions: list[FilesPartition]) -> list[list[str]]:
    return [[f["id"] for f in p.files] for p in partitions]


def test_a_small_table_gets_about_one_partition_per_core() -> None:
    mib = 1 << 20
    six = entries(*[2 * mib] * 6)  # 12 MiB: above MIN_SPLIT_BYTES per core for 2 cores
    assert ids(plan_partitions(six, 128 * mib, pa.schema([]), cores=2)) == [["0", "1", "2"], ["3", "4", "5"]]
    assert len(plan_partitions(six, 128 * mib, pa.schema([]), cores=1)) == 1
    # Never below MIN_SPLIT_BYTES a partition, however many cores.
    assert len(plan_partitions(six, 128 * mib, pa.schema([]), cores=64)) == -(-12 * mib // MIN_SPLIT_BYTES)
    # partitionBytes stays the upper bound, and a file is never split.
    assert ids(plan_partitions(six, 1, pa.schema([]), cores=2)) == [[str(i)] for i in range(6)]
    assert ids(plan_partitions(entries(100 * mib, 1, 1), 10 * mib, pa.schema([]), cores=2)) == [["0"], ["1", "2"]]
    assert plan_partitions([], 10, pa.schema([]), cores=2) == []


@pytest.mark.parametrize("cores", [1, 2, 3, 8])
def test_partitions_keep_every_file_once_in_order(cores: int) -> None:
    files = entries(*[(i * 7919) % (9 << 20) + 1 for i in range(40)])
    planned = plan_partitions(files, 16 << 20, pa.schema([]), cores=cores)
    assert [f for p in ids(planned) for f in p] == [f.id for f in files]
    assert all(p.files for p in planned)


def test_read_yields_every_row_in_sparks_exact_schema(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    schema = pa.schema([("id", pa.int64()), ("name", pa.large_string())])
    rows = 40_005
    with catalog.open(url) as lake:
        lake.create_namespace("r")
        table = lake.create_table("r.t", schema)
        table.append(pa.table({"id": list(range(rows)), "name": [str(i) for i in range(rows)]}, schema=schema))
    source = LakehouseDataSource({"lakehouse": url, "path": "r.t"})
    spark_schema = source.schema()
    reader = source.reader(spark_schema)
    batches = [batch for partition in reader.partitions() for batch in reader.read(partition)]
    target = spark_arrow_schema(spark_schema)
    assert all(batch.schema.equals(target) for batch in batches)  # large_string arrives as string
    assert [i for batch in batches for i in batch.column("id").to_pylist()] == list(range(rows))
