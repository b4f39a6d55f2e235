"""``lake.export`` carries Iceberg tables and views: the exported lakehouse reads on its own.

The source lakehouse holds a table pyiceberg wrote through ``lakekv serve`` (two
appends and an overwrite: three snapshots), a native table, a view made over
REST and one made by the Python API. After the export the source directory
is moved away, a server runs on the export, and pyiceberg reads every
snapshot of the table through it; every location the export's metadata
names lies inside the export.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

import catalog
from service.testing import ServerProcess

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(table.column(n).to_pylist() for n in ("id", "region"))))


def open_lake(path: Path) -> catalog.Lakehouse:
    return catalog.open(str(path), poll_interval_s=0, background_maintenance=False)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A lakehouse with an Iceberg table of three snapshots, a native table and two views."""
    lake_dir = tmp_path / "source"
    server = ServerProcess(str(lake_dir), tmp_path / "source.log").start()
    try:
        rest = RestCatalog("lakekv", uri=server.url)
        rest.create_namespace("shop")
        table = rest.create_table("shop.orders", schema=SCHEMA, partition_spec=SPEC)
        table.append(pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=ARROW))
        table.append(pa.table({"id": [3], "region": ["eu"]}, schema=ARROW))
        table.overwrite(pa.table({"id": [4], "region": ["us"]}, schema=ARROW), overwrite_filter="region = 'us'")
        rest.create_view(
            "shop.eu", schema=ARROW,
            view_version=ViewVersion(
                schema_id=0, default_namespace=["shop"],
                representations=[SQLViewRepresentation(type="sql", sql="SELECT * FROM orders WHERE region = 'eu'", dialect="spark")],
            ),
        )
    finally:
        server.stop()
    with open_lake(lake_dir) as lake:
        native = lake.create_table("shop.native", ARROW)
        native.append(pa.table({"id": [7, 8], "region": ["ap", "ap"]}, schema=ARROW))
        lake.create_view("shop.big", "SELECT id FROM shop.native WHERE id > 7")
    return lake_dir


def test_an_export_reads_with_its_source_gone(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "export"
    with open_lake(source) as lake:
        report = lake.export(str(dest))
    moved = source.rename(tmp_path / "moved-away")  # the source is gone from where the export was made

    server = ServerProcess(str(dest), tmp_path / "export.log").start()
    try:
        rest = RestCatalog("lakekv", uri=server.url)
        table = rest.load_table("shop.orders")
        assert rows(table.scan().to_arrow()) == [(1, "eu"), (3, "eu"), (4, "us")]
        snapshots = table.history()
        assert len(snapshots) == 4  # two appends, and the overwrite's delete and append
        first = table.scan(snapshot_id=snapshots[0].snapshot_id).to_arrow()
        assert rows(first) == [(1, "eu"), (2, "us")]
        assert rows(table.scan(row_filter="region = 'eu'").to_arrow()) == [(1, "eu"), (3, "eu")]
        # Every location the export's metadata names is inside the export.
        root = dest.resolve().as_uri()
        assert table.metadata.location.startswith(root + "/")
        assert table.metadata_location.startswith(root + "/")
        for entry in snapshots:
            snapshot = table.snapshot_by_id(entry.snapshot_id)
            assert snapshot is not None and snapshot.manifest_list.startswith(root + "/")
            for manifest in snapshot.manifests(table.io):
                assert manifest.manifest_path.startswith(root + "/")
                for data in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                    assert data.data_file.file_path.startswith(root + "/")
        view = rest.load_view("shop.eu").metadata
        assert view.location.startswith(root + "/")
        assert rest.load_view("shop.big").metadata.location.startswith(root + "/")
        # pyiceberg appends to the copy; the source stays untouched.
        table.append(pa.table({"id": [5], "region": ["eu"]}, schema=ARROW))
        assert pc.sum(rest.load_table("shop.orders").scan().to_arrow().column("id")).as_py() == 13
    finally:
        server.stop()
    with open_lake(dest) as lake:
        assert rows(lake.load_table("shop.native").scan().to_arrow()) == [(7, "ap"), (8, "ap")]
        assert lake.load_view("shop.big").sql == "SELECT id FROM shop.native WHERE id > 7"
    assert (report.iceberg_tables, report.iceberg_views) == (1, 1)
    assert list(moved.rglob("*.parquet"))  # the source's own files were left where they were


def _duckdb(server: ServerProcess):  # type: ignore[no-untyped-def]
    import os

    import duckdb
    import duckdb_ext

    extensions = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extensions, "autoinstall_known_extensions": False})
    for name in ("httpfs", "avro", "parquet", "iceberg"):
        con.execute(f"LOAD {name}")
    con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')")
    return con


def test_position_deletes_duckdb_wrote_name_the_exported_data_files(tmp_path: Path) -> None:
    # DuckDB's DELETE writes a position delete file whose rows name the data
    # file by its absolute path: the export rewrites those rows too.
    source = tmp_path / "source"
    server = ServerProcess(str(source), tmp_path / "source.log").start()
    try:
        con = _duckdb(server)
        con.execute("CREATE SCHEMA lake.s")
        con.execute("CREATE TABLE lake.s.t (id BIGINT, v VARCHAR)")
        con.execute("INSERT INTO lake.s.t SELECT i, 'x' || i FROM range(10) t(i)")
        con.execute("DELETE FROM lake.s.t WHERE id % 3 = 0")
        con.close()
    finally:
        server.stop()
    assert any(p.name.endswith("-deletes.parquet") for p in source.rglob("*.parquet"))
    with open_lake(source) as lake:
        lake.export(str(tmp_path / "export"))
    source.rename(tmp_path / "moved-away")

    server = ServerProcess(str(tmp_path / "export"), tmp_path / "export.log").start()
    try:
        con = _duckdb(server)
        assert con.execute("SELECT count(*), sum(id) FROM lake.s.t").fetchone() == (6, 1 + 2 + 4 + 5 + 7 + 8)
        con.close()
        table = RestCatalog("lakekv", uri=server.url).load_table("s.t")
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 4, 5, 7, 8]
    finally:
        server.stop()


def test_a_missing_manifest_stops_the_export(source: Path, tmp_path: Path) -> None:
    manifest = next(p for p in source.rglob("*-m0.avro"))
    manifest.unlink()
    with open_lake(source) as lake, pytest.raises(FileNotFoundError, match=manifest.name):
        lake.export(str(tmp_path / "export"))
    # The catalog keys were never relocated: the partial export names the source, not missing copies.
    with open_lake(tmp_path / "export") as exported:
        assert exported.load_table("shop.orders").metadata_location.startswith(source.resolve().as_uri())
