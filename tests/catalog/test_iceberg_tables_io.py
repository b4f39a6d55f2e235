"""catalog.iceberg_tables: a REST-made table's files reached as the lakehouse's store reaches storage, and its catalog seam.

On S3, SeaweedFS checks credentials, and its endpoint is not AWS's: a FileIO that
drops the lakehouse's store options cannot read or write a byte there. No
AWS_* variable is set, so nothing but the options the lakehouse was opened
with can lead pyiceberg to the server.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import LongType, NestedField, StringType

import catalog
from catalog import iceberg_tables
from kvstore.testing.seaweed import SeaweedServer

ROWS = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
AWS_VARIABLES = (
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
)


def rest_made_table(lake: catalog.Lakehouse, location: str, options: dict[str, Any] | None = None) -> None:
    """Table ``ns.t`` as ``lakekv serve`` makes one over REST: metadata written at ``location``, the catalog pointing at it."""
    properties = {
        "s3.endpoint": options["endpoint_url"], "s3.access-key-id": options["key"],
        "s3.secret-access-key": options["secret"], "s3.region": options["region"],
    } if options else {}
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
    metadata = new_table_metadata(schema, PartitionSpec(), SortOrder(order_id=0), location)
    metadata_location = f"{location}/metadata/00000-{uuid.uuid4()}.metadata.json"
    ToOutputFile.table_metadata(metadata, load_file_io(properties, metadata_location).new_output(metadata_location))
    lake.create_namespace("ns")
    lake.create_table("ns.t", format="iceberg", location=location, metadata_location=metadata_location)


@pytest.mark.s3
def test_a_rest_made_table_on_s3_is_written_and_read_with_the_lakehouse_store_options(
    seaweedfs: SeaweedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in AWS_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    url, options = seaweedfs.new_url()
    lake = catalog.open(url, poll_interval_s=0, background_maintenance=False, **options)
    try:
        # The warehouse lies beside the lakehouse's root, not under it: reached by the same options.
        rest_made_table(lake, f"{url}-warehouse/ns/t", options)
        table = lake.load_table("ns.t")
        assert iceberg_tables.io_properties(lake.objects)["s3.endpoint"] == options["endpoint_url"]
        table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=ROWS))
        lake.load_table("ns.t").delete(pc.field("id") == 2)
        lake.refresh()
        rows = lake.load_table("ns.t").scan().to_arrow().sort_by("id").to_pylist()
        assert rows == [{"id": 1, "name": "a"}, {"id": 3, "name": "c"}]
        files = [f.path for f in lake.load_table("ns.t").files()]
        assert files and all(f.startswith(f"{url}-warehouse/ns/t/data/") for f in files)
    finally:
        lake.close()


def test_a_store_not_on_s3_adds_no_properties(tmp_path: Any) -> None:
    lake = catalog.open(str(tmp_path / "lake"), poll_interval_s=0, background_maintenance=False)
    try:
        assert iceberg_tables.io_properties(lake.objects) == {}
    finally:
        lake.close()


def test_a_delete_that_matches_no_row_commits_nothing_and_does_not_fail(tmp_path: Any) -> None:
    """pyiceberg refreshes the table through its catalog when a delete wrote nothing (NotImplementedError before)."""
    lake = catalog.open(str(tmp_path / "lake"), poll_interval_s=0, background_maintenance=False)
    try:
        rest_made_table(lake, (tmp_path / "warehouse" / "ns" / "t").as_uri())
        lake.load_table("ns.t").append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=ROWS))
        version = lake.version
        with pytest.warns(UserWarning, match="did not match any records"):
            lake.load_table("ns.t").delete(pc.field("id") == 99)
        assert lake.version == version
        assert lake.load_table("ns.t").scan().to_arrow().sort_by("id").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    finally:
        lake.close()
