"""Reading and writing table metadata files in the warehouse.

A metadata file that is gone is a 404 ``NotFoundException`` (the reference
catalog's answer, which Iceberg's compatibility kit checks): before, a parsed
copy in the server's cache kept the table loading as if nothing had
happened, and without one the load was a 500. A metadata version pyiceberg
cannot write (format version 3) is a 400 that leaves no file behind, not a
500 with an empty file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import LongType, NestedField

from service.errors import ApiError
from service.iceberg import updates
from service.iceberg.warehouse import Warehouse


def _metadata(warehouse: Warehouse, version: int) -> TableMetadata:
    location = warehouse.default_table_location("ns", "t")
    warehouse.prepare_location(location)
    return new_table_metadata(
        schema=Schema(NestedField(1, "id", LongType(), required=False)), partition_spec=PartitionSpec(),
        sort_order=SortOrder(), location=location, properties={"format-version": str(version)},
    )


def _path(location: str) -> Path:
    return Path(location.removeprefix("file://"))


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    return Warehouse(str(tmp_path / "warehouse"), str(tmp_path / "store"))


def test_a_deleted_metadata_file_is_not_found_even_when_cached(warehouse: Warehouse) -> None:
    metadata = _metadata(warehouse, 2)
    location = warehouse.next_metadata_location(metadata, None)
    warehouse.write_metadata(metadata, location)
    assert warehouse.read_metadata(location) == metadata  # parsed and cached
    moved = _path(location).with_suffix(".moved")
    os.rename(_path(location), moved)
    with pytest.raises(ApiError) as caught:
        warehouse.read_metadata(location)
    assert (caught.value.status, caught.value.error_type) == (404, "NotFoundException")
    assert caught.value.message == f"Failed to open input stream for file: {location}"
    os.rename(moved, _path(location))
    assert warehouse.read_metadata(location) == metadata  # back: readable again


def test_a_metadata_file_never_written_is_not_found(warehouse: Warehouse) -> None:
    location = warehouse.next_metadata_location(_metadata(warehouse, 2), None)
    with pytest.raises(ApiError) as caught:
        warehouse.read_metadata(location)
    assert (caught.value.status, caught.value.error_type) == (404, "NotFoundException")
    assert location in caught.value.message


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_version_3_metadata_pyiceberg_does_not_write_is_written_and_reads_back(warehouse: Warehouse, codec: str) -> None:
    metadata = updates.with_row_lineage(_metadata(warehouse, 3))
    metadata = metadata.model_copy(update={"properties": {"write.metadata.compression-codec": codec}})
    location = warehouse.next_metadata_location(metadata, None)
    if codec == "gzip":  # pyiceberg picks the codec from the name, as Iceberg names gzipped metadata
        location = location.replace(".metadata.json", ".gz.metadata.json")
    warehouse.write_metadata(metadata, location)
    read = FromInputFile.table_metadata(load_file_io(location=location).new_input(location))  # not the warehouse's cache
    assert read == metadata and read.format_version == 3 and read.next_row_id == 0
