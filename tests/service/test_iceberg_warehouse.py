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
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import LongType, NestedField

from service.errors import ApiError
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


def test_a_version_pyiceberg_cannot_write_is_a_400_and_leaves_no_file(warehouse: Warehouse) -> None:
    metadata = _metadata(warehouse, 3)
    location = warehouse.next_metadata_location(metadata, None)
    with pytest.raises(ApiError) as caught:
        warehouse.write_metadata(metadata, location)
    assert (caught.value.status, caught.value.error_type) == (400, "BadRequestException")
    assert "format-version 3" in caught.value.message
    assert not _path(location).exists()
    assert list(_path(location).parent.iterdir()) == []
