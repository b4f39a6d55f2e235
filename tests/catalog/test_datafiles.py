"""Data file entries: statistics codec, partition splitting, Parquet round trip."""

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.datafiles import (
    DataFile,
    column_stats,
    decode_values,
    discard_files,
    encode_value,
    partition_groups,
    read_file,
    read_file_batches,
    write_files,
)
from catalog.schema import assign_field_ids, with_field_id
from kvstore.objstore import MemoryStore

TYPED_VALUES = [
    (pa.int8(), -3), (pa.uint64(), 2**64 - 1), (pa.float32(), 1.5), (pa.bool_(), True), (pa.string(), "é"),
    (pa.binary(), b"\x00\xff"), (pa.date32(), dt.date(2024, 2, 29)), (pa.timestamp("ns", "UTC"), 1_700_000_000_123_456_789),
    (pa.decimal128(20, 4), decimal.Decimal("-12345.6789")), (pa.time64("us"), 3_600_000_000),
]


@pytest.mark.parametrize("type_, value", TYPED_VALUES)
def test_stat_values_round_trip_exactly(type_: pa.DataType, value: object) -> None:
    scalar = pa.scalar(value, type_) if not pa.types.is_timestamp(type_) else pa.scalar(value, pa.int64()).cast(type_)
    encoded = encode_value(scalar)
    assert decode_values([encoded, None], type_)[0] == scalar
    assert decode_values([encoded, None], type_)[1].is_valid is False


def test_column_stats() -> None:
    assert column_stats(pa.array([3, None, 1])) == [1, 3, 1]
    assert column_stats(pa.array([None, None], pa.int64())) == [None, None, 2]
    assert column_stats(pa.array([1.0, float("nan")])) == [None, None, 0]  # NaN: no bounds
    assert column_stats(pa.array(["x" * 300])) == [None, None, 0]  # too long to bound
    assert column_stats(pa.array([[1]], pa.list_(pa.int8()))) == [None, None, 0]


def test_entry_json_round_trip_and_validation() -> None:
    f = DataFile(id="a", path="data/t/a.parquet", size=10, rows=2, partition={"2": "mon"}, stats={"1": [1, 2, 0]})
    assert DataFile.decode(f.encode()) == f and DataFile.from_json(f.to_json()) == f
    with pytest.raises(ValueError, match="malformed"):
        DataFile.from_json({"id": "a"})
    with pytest.raises(ValueError, match="negative"):
        DataFile.from_json({**f.to_json(), "rows": -1})
    with pytest.raises(TypeError):
        DataFile.from_json([1])


@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]), st.integers(-(2**63), 2**63 - 1)), max_size=40))
def test_partition_groups_split_exactly(rows: list) -> None:
    table = pa.table({"p": pa.array([r[0] for r in rows], pa.string()), "q": pa.array([r[1] for r in rows], pa.int64()), "v": [r[2] for r in rows]})
    seen = []
    keys = set()
    for values, part in partition_groups(table, ["p", "q"]):
        key = (values["p"].as_py(), values["q"].as_py()) if rows else None
        assert key not in keys
        keys.add(key)
        for r in part.to_pylist():
            assert (r["p"], r["q"]) == key
            seen.append((r["p"], r["q"], r["v"]))
    assert sorted(seen, key=repr) == sorted(rows, key=repr)


def test_write_and_read_files_with_target_size() -> None:
    schema, _ = assign_field_ids(pa.schema([("id", pa.int64()), ("day", pa.string())]))
    objects = MemoryStore()
    data = pa.table({"id": list(range(10_000)), "day": ["mon"] * 5000 + ["tue"] * 5000}, schema=schema)
    files = write_files(objects, "data/t", data, schema, ["day"], target_file_bytes=20_000)
    assert len(files) > 2 and sum(f.rows for f in files) == 10_000
    assert {tuple(f.partition.values()) for f in files} == {("mon",), ("tue",)}
    back = pa.concat_tables([read_file(objects, f, schema) for f in files])
    assert sorted(back.column("id").to_pylist()) == list(range(10_000))
    assert all(objects.head(f.path).size == f.size for f in files)


def test_small_decimals_are_stored_as_integers_and_read_back_exactly() -> None:
    """The Parquet layout Spark and Iceberg use: precision <= 9 INT32, <= 18 INT64, wider FIXED_LEN_BYTE_ARRAY."""
    import pyarrow.parquet as pq

    schema, _ = assign_field_ids(
        pa.schema([("d9", pa.decimal128(9, 2)), ("d15", pa.decimal128(15, 2)), ("d20", pa.decimal128(20, 4))])
    )
    values = [decimal.Decimal("-1234567.89"), None, decimal.Decimal("0.01")]
    wide = [decimal.Decimal("-1234567890123456.7891"), None, decimal.Decimal("0.0001")]
    data = pa.table({"d9": values, "d15": values, "d20": wide}, schema=schema)
    objects = MemoryStore()
    (entry,) = write_files(objects, "data/t", data, schema, [])
    parquet_schema = pq.ParquetFile(pa.BufferReader(objects.get(entry.path))).schema
    assert [parquet_schema.column(i).physical_type for i in range(3)] == ["INT32", "INT64", "FIXED_LEN_BYTE_ARRAY"]
    assert read_file(objects, entry, schema).equals(data)


def test_read_file_batches_streams_the_same_rows_as_read_file() -> None:
    schema, last_id = assign_field_ids(pa.schema([("id", pa.int64()), ("name", pa.string())]))
    objects = MemoryStore()
    data = pa.table({"id": list(range(10_000)), "name": [f"n{i}" for i in range(10_000)]}, schema=schema)
    (entry,) = write_files(objects, "data/t", data, schema, [])
    # A later schema: "name" renamed (same field id) and a column added: matched by id, not name.
    renamed = pa.schema([schema.field("id"), schema.field("name").with_name("label"),
                         with_field_id(pa.field("extra", pa.int32()), last_id + 1)])
    batches = list(read_file_batches(objects, entry, renamed, batch_size=3000))
    assert [b.num_rows for b in batches] == [3000, 3000, 3000, 1000]
    assert pa.Table.from_batches(batches).equals(read_file(objects, entry, renamed))
    assert batches[0].column("label").to_pylist()[:2] == ["n0", "n1"]
    assert batches[0].column("extra").null_count == 3000


# -- entries of files another writer (Spark's Parquet writer) wrote ------------------


def _foreign_file(store: MemoryStore, data: pa.Table, ids: dict[str, str], row_group_size: int) -> tuple[str, int]:
    """``data`` as a Parquet file with field ids and no stored Arrow schema, as Spark writes it."""
    import io

    import pyarrow.parquet as pq

    from catalog.datafiles import with_parquet_field_ids
    from kvstore.format.checksum import crc32c

    sink = io.BytesIO()
    pq.write_table(with_parquet_field_ids(data, ids), sink, row_group_size=row_group_size, store_schema=False)
    path = "data/t/0123abcd.parquet"
    store.put(path, sink.getvalue())
    return path, crc32c(sink.getvalue())


FOREIGN_SCHEMA = pa.schema(
    [
        with_field_id(pa.field("n", pa.int32()), 1),
        with_field_id(pa.field("s", pa.string()), 2),
        with_field_id(pa.field("d", pa.decimal128(9, 2)), 3),
        with_field_id(pa.field("day", pa.date32()), 4),
        with_field_id(pa.field("x", pa.float64()), 5),
        with_field_id(pa.field("region", pa.string()), 6),
    ]
)


@given(
    st.lists(
        st.tuples(
            st.none() | st.integers(-(2**31), 2**31 - 1),
            st.none() | st.text(max_size=5),
            st.none() | st.decimals(min_value=-9999999, max_value=9999999, places=2, allow_nan=False),
            st.none() | st.dates(),
            st.none() | st.floats(allow_nan=False),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 8),
)
def test_an_entry_from_the_footer_has_the_statistics_of_the_data(values: list[tuple], row_group_size: int) -> None:
    from catalog.datafiles import entry_from_footer

    columns = list(zip(*values))
    plain = pa.schema([f.remove_metadata() for f in FOREIGN_SCHEMA])
    data = pa.table([*columns, ["eu"] * len(values)], schema=plain)
    store = MemoryStore()
    path, checksum = _foreign_file(store, data, {f.name: f.metadata[b"field_id"].decode() for f in FOREIGN_SCHEMA}, row_group_size)
    entry = entry_from_footer(store, path, checksum, FOREIGN_SCHEMA, ["region"])
    assert (entry.id, entry.rows, entry.crc32c, entry.parquet_field_ids) == ("0123abcd", len(values), checksum, True)
    assert entry.partition == {"6": "eu"}
    for f in FOREIGN_SCHEMA:
        expected = column_stats(data.column(f.name))
        if pa.types.is_floating(f.type):
            expected = [None, None, expected[2]]  # no float bounds from a footer
        assert entry.stats[f.metadata[b"field_id"].decode()] == expected, f.name
    assert read_file(store, entry, FOREIGN_SCHEMA).equals(data.cast(plain))  # read back by Parquet field id


def test_an_entry_from_the_footer_refuses_a_file_of_two_partitions_or_no_parquet() -> None:
    from catalog.datafiles import entry_from_footer
    from catalog.errors import CorruptDataFileError

    schema = pa.schema([with_field_id(pa.field("region", pa.string()), 1)])
    store = MemoryStore()
    path, checksum = _foreign_file(store, pa.table({"region": ["eu", "us"]}), {"region": "1"}, 10)
    with pytest.raises(ValueError, match="more than one value of partition column 'region'"):
        entry_from_footer(store, path, checksum, schema, ["region"])
    store.put(path, b"not parquet at all")
    with pytest.raises(CorruptDataFileError, match="not a Parquet file"):
        entry_from_footer(store, path, checksum, schema, ["region"])


def test_discard_files_deletes_what_it_can_and_logs_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    class OneStuckFile(MemoryStore):
        def delete(self, path: str) -> None:
            if path == "data/t/stuck.parquet":
                raise OSError("permission denied")
            super().delete(path)

    objects = OneStuckFile()
    for name in ("a", "stuck", "b"):
        objects.put(f"data/t/{name}.parquet", b"x")
    with caplog.at_level("WARNING", logger="catalog.datafiles"):
        discard_files(objects, ["data/t/a.parquet", "data/t/stuck.parquet", "data/t/b.parquet", "data/t/gone.parquet"], "a test")
    assert [meta.path for meta in objects.list("data/")] == ["data/t/stuck.parquet"]  # the others went, missing is fine
    assert "data/t/stuck.parquet (a test)" in caplog.text and "permission denied" in caplog.text


# -- the footer region: what the Spark plugin's JVM reader checks -------------------


def _chunk_ranges(body: bytes) -> list[tuple[int, int]]:
    """The byte ranges of every column chunk of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    metadata = pq.read_metadata(pa.BufferReader(body))
    ranges = []
    for g in range(metadata.num_row_groups):
        for i in range(metadata.num_columns):
            chunk = metadata.row_group(g).column(i)
            start = min(chunk.data_page_offset, chunk.dictionary_page_offset or chunk.data_page_offset)
            ranges.append((start, start + chunk.total_compressed_size))
    return ranges


def test_every_written_entry_records_the_checksum_of_its_footer_region() -> None:
    from kvstore.format.checksum import crc32c

    schema, _ = assign_field_ids(pa.schema([("id", pa.int64()), ("name", pa.string())]))
    objects = MemoryStore()
    data = pa.table({"id": list(range(5000)), "name": [f"n{i % 7}" for i in range(5000)]}, schema=schema)
    (entry,) = write_files(objects, "data/t", data, schema, [])
    body = objects.get(entry.path)
    assert entry.footer_size is not None and entry.footer_crc32c is not None
    # Everything after the last column chunk: the footer, its length and the magic.
    assert len(body) - entry.footer_size == max(end for _, end in _chunk_ranges(body))
    assert entry.footer_size == int.from_bytes(body[-8:-4], "little") + 8
    assert entry.footer_crc32c == crc32c(body[-entry.footer_size :])


def test_a_damaged_footer_fails_its_own_checksum_on_read_too() -> None:
    """An entry without the whole-file CRC (so only the footer check can see it): a footer flip is named."""
    import dataclasses

    from catalog.errors import CorruptDataFileError

    schema, _ = assign_field_ids(pa.schema([("id", pa.int64())]))
    objects = MemoryStore()
    (entry,) = write_files(objects, "data/t", pa.table({"id": list(range(100))}, schema=schema), schema, [])
    footer_only = dataclasses.replace(entry, crc32c=None)
    body = objects.get(entry.path)
    for position in range(len(body) - entry.footer_size, len(body), 7):
        bad = bytearray(body)
        bad[position] ^= 0x10
        objects.put(entry.path, bytes(bad))
        with pytest.raises(CorruptDataFileError, match=f"{entry.path} of table 't' failed its footer checksum"):
            read_file(objects, footer_only, schema, table="t")
    objects.put(entry.path, body)
    assert read_file(objects, footer_only, schema).num_rows == 100


@pytest.mark.parametrize("row_group_size", [7, 1000])
def test_an_entry_from_the_footer_covers_page_indexes_and_the_footer(row_group_size: int) -> None:
    """parquet-mr writes page indexes (per-page min/max) between the last chunk and the footer: the region covers them."""
    import io

    import pyarrow.parquet as pq

    from catalog.datafiles import entry_from_footer, with_parquet_field_ids
    from kvstore.format.checksum import crc32c

    schema = pa.schema([with_field_id(pa.field("n", pa.int32()), 1), with_field_id(pa.field("s", pa.string()), 2)])
    data = pa.table({"n": list(range(50)), "s": [f"s{i}" for i in range(50)]}, schema=pa.schema([f.remove_metadata() for f in schema]))
    sink = io.BytesIO()
    pq.write_table(with_parquet_field_ids(data, {"n": "1", "s": "2"}), sink, row_group_size=row_group_size,
                   store_schema=False, write_page_index=True)
    body = sink.getvalue()
    store = MemoryStore()
    store.put("data/t/0123abcd.parquet", body)
    entry = entry_from_footer(store, "data/t/0123abcd.parquet", crc32c(body), schema, [])
    footer_length = int.from_bytes(body[-8:-4], "little") + 8
    assert len(body) - entry.footer_size == max(end for _, end in _chunk_ranges(body))
    assert entry.footer_size > footer_length  # the page indexes are inside
    assert entry.footer_crc32c == crc32c(body[-entry.footer_size :])
    assert DataFile.decode(entry.encode()) == entry


def test_an_entry_from_the_footer_refuses_chunks_past_the_footer() -> None:
    from catalog.datafiles import entry_from_footer
    from catalog.errors import CorruptDataFileError

    schema = pa.schema([with_field_id(pa.field("n", pa.int32()), 1)])
    store = MemoryStore()
    path, checksum = _foreign_file(store, pa.table({"n": list(range(10))}), {"n": "1"}, 10)
    body = store.get(path)
    footer_length = int.from_bytes(body[-8:-4], "little")
    # The footer alone, behind a magic: its chunks point past the bytes that are left.
    store.put(path, b"PAR1" + body[-footer_length - 8 :])
    with pytest.raises(CorruptDataFileError, match="places column chunks up to byte"):
        entry_from_footer(store, path, checksum, schema, [])


def test_footer_checksums_round_trip_and_old_entries_have_none() -> None:
    base = {"id": "a", "path": "data/t/a.parquet", "size": 100, "rows": 2}
    old = DataFile.from_json(base)
    assert (old.footer_size, old.footer_crc32c) == (None, None)
    assert "footer_size" not in old.to_json()  # an old entry is stored as before
    new = DataFile.from_json({**base, "crc32c": 5, "footer_size": 40, "footer_crc32c": 0xFFFFFFFF})
    assert (new.footer_size, new.footer_crc32c) == (40, 0xFFFFFFFF)
    assert DataFile.decode(new.encode()) == new
    for bad, match in [
        ({"footer_size": 40}, "go together"),
        ({"footer_crc32c": 1}, "go together"),
        ({"footer_size": 40, "footer_crc32c": 1 << 32}, "footer_crc32c out of range"),
        ({"footer_size": 101, "footer_crc32c": 1}, "not inside the file"),
        ({"footer_size": 7, "footer_crc32c": 1}, "not inside the file"),
        ({"footer_size": "x", "footer_crc32c": 1}, "malformed"),
    ]:
        with pytest.raises(ValueError, match=match):
            DataFile.from_json({**base, **bad})


# Arrow types a native table keeps whose Iceberg type pyiceberg reads back as
# the same Arrow type (strings and binaries: pyiceberg asks for large_string
# / large_binary but passes a file's string / binary through, uncast).
PYICEBERG_NATIVE_TYPES = [
    pa.bool_(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.large_string(), pa.binary(),
    pa.date32(), pa.time64("us"), pa.timestamp("us"), pa.timestamp("us", "UTC"), pa.decimal128(10, 2), pa.decimal128(30, 4),
]


def test_pyiceberg_reads_written_files_without_a_cast(tmp_path: Path) -> None:
    """pyiceberg's scan hands back a data file's columns as the file has them.

    pyiceberg converts every batch to the table's schema and casts a column
    whose Arrow type is not the one its Iceberg type asks for (int8 -> int32,
    timestamp[ms] -> [us], ...): per-batch work its full scan pays beside a
    plain ``read_table``. What lakekv writes for these types is read with no
    cast: the scan's types are the file's types, and so are the values.
    """
    import pyarrow.parquet as pq
    from pyiceberg.table import StaticTable

    import catalog

    schema = pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(PYICEBERG_NATIVE_TYPES)] + [pa.field("part", pa.int32())])
    columns = {f"c{i}": _sample(t, 5) for i, t in enumerate(PYICEBERG_NATIVE_TYPES)}
    data = pa.table({**columns, "part": pa.array([0, 0, 1, 1, 1], pa.int32())}, schema=schema)
    with catalog.open(str(tmp_path), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        table = lake.create_table("ns.t", schema, partition_by=["part"])
        table.append(data)
        table = lake.load_table("ns.t")
        location = table.metadata_location
        assert location is not None
        file_schemas = {pq.read_schema(str(tmp_path / f.path)).remove_metadata() for f in table.files()}
    assert len(file_schemas) == 1
    (file_schema,) = file_schemas
    scanned = StaticTable.from_metadata(location).scan().to_arrow()
    assert [f.type for f in scanned.schema] == [f.type for f in file_schema] == list(schema.types)
    assert scanned.sort_by([("part", "ascending"), ("c1", "ascending")]).equals(data.sort_by([("part", "ascending"), ("c1", "ascending")]))


def _sample(t: pa.DataType, rows: int) -> pa.Array:
    """``rows`` values of ``t``: a null, then distinct values."""
    ints = pa.array([None, *range(1, rows)], pa.int64())
    if pa.types.is_boolean(t):
        return pa.array([None, *[i % 2 == 0 for i in range(1, rows)]], t)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        return ints.cast(pa.string()).cast(t)
    if pa.types.is_decimal(t):
        return pa.array([None, *[decimal.Decimal(i).scaleb(-2) for i in range(1, rows)]], t)
    if pa.types.is_date32(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t):
        return ints.cast(pa.int32() if pa.types.is_date32(t) else pa.int64()).cast(t)
    return ints.cast(t)
