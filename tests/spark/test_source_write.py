"""The Python data source's write task (catalog/spark/source.py) cleans up after a storage failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import catalog
import catalog.spark.source
from catalog.spark.source import LakehouseDataSource
from catalog.spark.types import spark_schema
from kvstore.objstore import open_store
from kvstore.objstore.base import ObjectStore

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("p", pa.string())])


class InjectedPutError(OSError):
    """The fault this test injects."""


class FailingPut:
    """Fault injection: an object store whose ``fail_at``-th put (1-based) fails before reaching storage."""

    def __init__(self, inner: ObjectStore, fail_at: int) -> None:
        self.inner = inner
        self.url = inner.url
        self.fail_at = fail_at
        self.puts = 0

    def put(self, path: str, data: bytes) -> None:
        self.puts += 1
        if self.puts == self.fail_at:
            raise InjectedPutError(f"injected: put #{self.puts} of {path}")
        self.inner.put(path, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def table_files(url: str) -> list[str]:
    return sorted(str(p.relative_to(url)) for p in (Path(url) / "data").rglob("*.parquet"))


@pytest.mark.parametrize("fail_at", [2, 3])
def test_a_task_whose_storage_fails_half_way_deletes_every_file_it_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, create=True) as lake:
        lake.create_namespace("s")
        lake.create_table("s.t", SCHEMA, partition_by=["p"])
    writer = LakehouseDataSource({"lakehouse": url, "table": "s.t"}).writer(spark_schema(SCHEMA), False)
    # The task's store: one write_files call puts a file per partition value; put #fail_at fails.
    monkeypatch.setattr(catalog.spark.source, "open_store", lambda u, **o: FailingPut(open_store(u, **o), fail_at))
    rows = pa.record_batch({"id": [1, 2, 3], "p": ["a", "b", "c"]}, schema=SCHEMA)
    with pytest.raises(InjectedPutError):
        writer.write(iter([rows]))
    assert table_files(url) == []
    with catalog.open(url) as lake:
        assert lake.load_table("s.t").scan().to_arrow().num_rows == 0
