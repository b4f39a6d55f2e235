"""Option parsing of the lakehouse data source (catalog/spark/options.py); pure, no SparkSession."""

from __future__ import annotations

import pytest

from catalog.spark.options import DEFAULT_PARTITION_BYTES, parse_options, parse_timestamp


def test_defaults_and_case_insensitive_keys() -> None:
    options = parse_options({"LAKEHOUSE": "/tmp/l", "path": "a.t"})
    assert (options.lakehouse, options.table) == ("/tmp/l", "a.t")
    assert options.partition_bytes == DEFAULT_PARTITION_BYTES
    assert not options.prune_files and not options.create_if_missing
    assert options.version_as_of is None and options.timestamp_as_of is None and options.transaction is None


def test_every_option_parses() -> None:
    options = parse_options(
        {
            "lakehouse": "s3://b/p",
            "table": "a.b.t",
            "path": "ignored.t",
            "versionAsOf": "7",
            "partitionBytes": "1024",
            "createIfMissing": "yes",
            "partitionBy": " day, region ,day",
            "targetFileBytes": "2048",
            "readVersion": "5",
        }
    )
    assert options.table == "a.b.t" and options.version_as_of == 7
    assert options.partition_bytes == 1024 and options.target_file_bytes == 2048
    assert options.create_if_missing
    assert options.partition_by == ("day", "region")
    assert options.read_version == 5
    assert parse_options({"lakehouse": "/l", "table": "a.t", "transaction": " abc "}).transaction == "abc"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "a.t"}, "option lakehouse is required"),
        ({"lakehouse": "/l"}, "no table"),
        ({"lakehouse": "/l", "path": "a.t", "versionAsOf": "1", "timestampAsOf": "2"}, "exclude each other"),
        ({"lakehouse": "/l", "path": "a.t", "versionAsOf": "x"}, "versionAsOf"),
        ({"lakehouse": "/l", "path": "a.t", "versionAsOf": "-1"}, "versionAsOf"),
        ({"lakehouse": "/l", "path": "a.t", "timestampAsOf": "yesterday"}, "timestampAsOf"),
        ({"lakehouse": "/l", "path": "a.t", "partitionBytes": "0"}, "partitionBytes"),
        ({"lakehouse": "/l", "path": "a.t", "readVersion": "v3"}, "readVersion"),
        ({"lakehouse": "/l", "path": "a.t", "readVersion": "-2"}, "readVersion"),
        ({"lakehouse": "/l", "path": "a.t", "storage.create": "true"}, "storage.create is not a store option"),
        ({"lakehouse": "/l", "path": "a.t", "transaction": "t", "versionAsOf": "1"}, "transaction reads what the transaction sees now"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_options(options)


def test_timestamps() -> None:
    assert parse_timestamp("0") == 0.0
    assert parse_timestamp("1970-01-01T00:00:10") == 10.0
    assert parse_timestamp("1970-01-01T01:00:10+01:00") == 10.0


@pytest.mark.parametrize(
    ("purpose", "key", "message"),
    [
        ("write", "replaceWhere", "replaces the whole table"),
        ("write", "partitionOverwriteMode", "never only the partitions"),
        ("write", "mergeSchema", "update_schema"),
        ("write", "compression", "not an option of the lakehouse source"),
        ("write", "versionAsOf", "is a read option"),
        ("read", "createIfMissing", "is a write option"),
        ("read", "pushDownFilters", "not an option of the lakehouse source"),
        # A plan pruned for one query's filters would answer a later unfiltered query.
        ("read", "pruneFiles", "would drop rows; query the table through the catalog plugin"),
    ],
)
def test_an_option_not_honoured_is_an_error_naming_it(purpose: str, key: str, message: str) -> None:
    # These used to be ignored: replaceWhere / partitionOverwriteMode replaced the whole table.
    with pytest.raises(ValueError, match=f"option {key} .*{message}"):
        parse_options({"lakehouse": "/l", "path": "a.t", key: "x"}, purpose)


def test_every_documented_option_is_accepted_for_its_purpose() -> None:
    common = {"LakeHouse": "/l", "PATH": "a.t"}
    parse_options({**common, "versionAsOf": "1", "partitionBytes": "10"}, "read")
    parse_options({**common, "createIfMissing": "true", "partitionBy": "a", "targetFileBytes": "9",
                   "transaction": "t", "readVersion": "2"}, "write")
