"""Tests for the SST writer and reader: round trips on every backend, I/O budgets,
ordering (forward and reverse), bounds, snapshots, validation, and a model-based
property test."""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvstore.cache import BlockCache
from kvstore.errors import CorruptionError
from kvstore.format.rows import DELETE, MAX_SEQ, PUT, ROW_SCHEMA, Row, batch_to_rows, rows_to_batch
from kvstore.format.sst import SSTInfo, SSTReader, encode_sst, write_sst
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore

BACKENDS = ["memory", "local", pytest.param("s3", marks=pytest.mark.s3)]
PATH = "sst/test.sst"


def model_iter(
    rows: list[Row], start: bytes | None = None, end: bytes | None = None, snapshot_seq: int = MAX_SEQ
) -> list[Row]:
    """Brute force: what SSTReader.iter must return, forward."""
    return [
        row
        for row in rows
        if (start is None or row[0] >= start) and (end is None or row[0] < end) and row[1] <= snapshot_seq
    ]


def model_reverse(forward: list[Row]) -> list[Row]:
    """Key descending, each key's versions still newest first (sorted() is stable under reverse)."""
    return sorted(forward, key=lambda row: row[0], reverse=True)


def model_get(rows: list[Row], key: bytes, snapshot_seq: int = MAX_SEQ) -> Row | None:
    return next((row for row in rows if row[0] == key and row[1] <= snapshot_seq), None)


def flatten(batches: list[pa.RecordBatch]) -> list[Row]:
    return [row for batch in batches for row in batch_to_rows(batch)]


def sample_rows() -> list[Row]:
    """Every interesting row shape: versions, tombstones, TTLs, empty and large values, edge bytes."""
    return [
        (b"", 5, PUT, b"empty key", None),
        (b"\x00", 9, DELETE, None, None),
        (b"\x00", 8, PUT, b"", None),  # b"" is a value, not a tombstone
        (b"\x00\x00", 1, PUT, b"x", 1_700_000_000_000),
        (b"a", 30, PUT, b"a30", None),
        (b"a", 20, DELETE, None, 99),
        (b"a", 10, PUT, b"a10", None),
        (b"big", 4, PUT, b"B" * 20_000, None),  # larger than the block size below
        (b"k\xff", 2, PUT, b"v", None),
        (b"\xff", MAX_SEQ, PUT, b"max seq", None),
        (b"\xff", 0, PUT, b"seq zero", -1),
        (b"\xff\xff", 3, DELETE, None, None),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_trip_and_point_gets_on_every_backend(store_factory: Callable[[str], ObjectStore], backend: str) -> None:
    rows = sample_rows()
    store = CountingStore(store_factory(backend))
    info = write_sst(store, PATH, rows, block_size=48)
    assert store.counts["put"] == 1
    assert (info.row_count, info.key_count, info.delete_count) == (12, 8, 3)
    assert (info.min_key, info.max_key, info.min_seq, info.max_seq) == (b"", b"\xff\xff", 0, MAX_SEQ)
    assert info.size == store.head(PATH).size and info.block_count > 3

    store.reset()
    reader = SSTReader.open(store, PATH, size=info.size)
    assert store.counts["head"] == 0 and store.counts["get_range"] <= 2
    assert reader.info == info
    assert list(reader.iter()) == rows
    assert list(reader.iter(reverse=True)) == model_reverse(rows)
    assert flatten(list(reader.iter_batches())) == rows
    for key in {row[0] for row in rows} | {b"absent", b"a\x00", b"\x00\x00\x00"}:
        for snap in (0, 1, 9, 15, 25, MAX_SEQ - 1, MAX_SEQ):
            assert reader.get(key, snap) == model_get(rows, key, snap), (key, snap)
    reader.check_invariants()


@pytest.mark.parametrize("backend", BACKENDS)
def test_io_budget_open_and_point_reads(store_factory: Callable[[str], ObjectStore], backend: str) -> None:
    rows: list[Row] = [(b"key%05d" % i, 1, PUT, b"v" * 50, None) for i in range(3000)]
    inner = store_factory(backend)
    info = write_sst(inner, PATH, rows, block_size=4096)
    store = CountingStore(inner)

    reader = SSTReader.open(store, PATH)  # size unknown: one head, then the tail
    assert store.counts["head"] == 1 and 1 <= store.counts["get_range"] <= 2

    for key in (b"key00000", b"key01500", b"key02999"):
        store.reset()
        assert reader.get(key) == (key, 1, PUT, b"v" * 50, None)
        assert store.counts == {"get_range": 1}  # exactly one block, nothing else

    store.reset()
    misses = [b"nokey%05d" % i for i in range(200)]
    assert all(reader.get(key) is None for key in misses)
    assert store.counts["get_range"] <= 10  # bloom filter: ~1 % of misses reach a block

    cache = BlockCache(10 * 1024 * 1024)
    cached = SSTReader.open(store, PATH, cache=cache, size=info.size)
    cached.get(b"key01000")
    store.reset()
    assert cached.get(b"key01001") is not None  # same block: served from the cache
    assert SSTReader.open(store, PATH, cache=cache, size=info.size).get(b"key01000") is not None
    assert store.counts == {}  # footer and block both cached
    assert cache.stats().hits >= 3


def test_open_reads_a_large_tail_in_two_reads_or_one_with_tail_size() -> None:
    rows: list[Row] = [(b"%012d" % i, 1, PUT, b"", None) for i in range(60_000)]  # bloom alone is ~75 KB of base64
    store = CountingStore(MemoryStore())
    info = write_sst(store, PATH, rows)
    assert info.tail_size > 64 * 1024
    store.reset()
    assert list(SSTReader.open(store, PATH, size=info.size).iter(end=b"%012d" % 10)) == rows[:10]
    assert store.counts["get_range"] == 2 + 1  # two for the tail, one block
    store.reset()
    SSTReader.open(store, PATH, size=info.size, tail_size=info.tail_size)
    assert store.counts == {"get_range": 1}


def test_open_with_an_arrow_footer_larger_than_the_first_read() -> None:
    rows: list[Row] = [(b"%06d" % i, 1, PUT, b"", None) for i in range(4000)]
    store = CountingStore(MemoryStore())
    info = write_sst(store, PATH, rows, block_size=1)  # 4000 blocks: ~96 KB of Arrow footer
    store.reset()
    reader = SSTReader.open(store, PATH, size=info.size)
    assert store.counts["get_range"] == 3  # the documented worst case, only for tiny blocks
    assert reader.info.block_count == 4000 and list(reader.iter()) == rows


def test_versions_straddling_blocks_forward_reverse_and_get() -> None:
    # One key with 40 versions over many tiny blocks, surrounded by other keys.
    rows: list[Row] = [(b"a", 1, PUT, b"a", None)]
    for seq in range(40, 0, -1):
        rows.append((b"m", seq, PUT, b"m%d" % seq, None) if seq % 3 else (b"m", seq, DELETE, None, None))
    rows += [(b"z", 7, PUT, b"z", None)]
    store = CountingStore(MemoryStore())
    write_sst(store, PATH, rows, block_size=100)
    reader = SSTReader.open(store, PATH)
    assert reader.info.block_count > 10
    for snap in (0, 1, 2, 3, 20, 39, 40, MAX_SEQ):
        expected = model_iter(rows, snapshot_seq=snap)
        assert list(reader.iter(snapshot_seq=snap)) == expected
        assert list(reader.iter(snapshot_seq=snap, reverse=True)) == model_reverse(expected)
        assert reader.get(b"m", snap) == model_get(rows, b"m", snap)
    store.reset()
    reader.get(b"m")  # newest version is in the first block holding "m"
    assert store.counts["get_range"] == 1
    for start, end in ((b"m", b"n"), (b"b", b"z"), (b"m", b"m\x00"), (None, b"m"), (b"m", None)):
        expected = model_iter(rows, start, end)
        assert list(reader.iter(start, end)) == expected
        assert list(reader.iter(start, end, reverse=True)) == model_reverse(expected)
        assert flatten(list(reader.iter_batches(start, end))) == expected


def test_bounds_and_empty_ranges() -> None:
    rows: list[Row] = [(bytes([i]), 1, PUT, bytes([i]), None) for i in range(0, 256, 5)]
    store = MemoryStore()
    write_sst(store, PATH, rows, block_size=64)
    reader = SSTReader.open(store, PATH)
    bounds = [None, b"", b"\x00", b"\x05", b"\x06", b"\x80", b"\xfa", b"\xfa\x00", b"\xff"]
    for start in bounds:
        for end in bounds:
            expected = model_iter(rows, start, end)
            assert list(reader.iter(start, end)) == expected, (start, end)
            assert list(reader.iter(start, end, reverse=True)) == expected[::-1]
            assert flatten(list(reader.iter_batches(start, end))) == expected
    assert list(reader.iter(b"\x80", b"\x10")) == []


def test_single_row_file() -> None:
    store = MemoryStore()
    info = write_sst(store, PATH, [(b"only", 42, PUT, b"", None)])
    reader = SSTReader.open(store, PATH, size=info.size)
    assert (info.row_count, info.block_count, info.min_key, info.max_key) == (1, 1, b"only", b"only")
    assert reader.get(b"only") == (b"only", 42, PUT, b"", None)
    assert reader.get(b"only", 41) is None and reader.get(b"other") is None
    assert list(reader.iter(reverse=True)) == [(b"only", 42, PUT, b"", None)]
    assert list(reader.iter(snapshot_seq=41)) == [] and list(reader.iter_batches(snapshot_seq=41)) == []
    reader.check_invariants()


def test_rows_and_batches_cut_the_same_blocks() -> None:
    rows: list[Row] = [(b"k%04d" % (i // 3), 100 - i % 3, PUT, b"v" * (i % 50), None) for i in range(900)]
    batches = [rows_to_batch(rows[i : i + 77]) for i in range(0, len(rows), 77)]
    inputs = {"rows": rows, "batches": batches, "mixed": rows[:154] + batches[2:5] + rows[385:]}
    shapes = []
    for name, rows_or_batches in inputs.items():
        store = MemoryStore()
        write_sst(store, PATH, rows_or_batches, block_size=512)
        reader = SSTReader.open(store, PATH)
        blocks = list(reader.iter_batches())  # one batch per block when unbounded
        assert flatten(blocks) == rows, name
        reader.check_invariants()  # includes bloom membership of keys from sliced input arrays
        shapes.append([block.num_rows for block in blocks])
    assert shapes[0] == shapes[1] == shapes[2] and len(shapes[0]) > 50


def test_any_arrow_reader_sees_the_rows() -> None:
    rows = sample_rows()
    data, info = encode_sst(PATH, rows, block_size=512)
    arrow_file = pa.ipc.open_file(pa.py_buffer(data))
    assert arrow_file.schema.equals(ROW_SCHEMA)  # metadata aside
    assert arrow_file.schema.metadata[b"lakekv.file"] == b"sst"
    assert arrow_file.num_record_batches == info.block_count + 1
    assert arrow_file.read_all().to_pylist() == [dict(zip(ROW_SCHEMA.names, row, strict=True)) for row in rows]


def test_info_to_dict_is_json_and_round_trips() -> None:
    info = write_sst(MemoryStore(), PATH, sample_rows())
    as_json = json.dumps(info.to_dict())
    assert SSTInfo.from_dict(json.loads(as_json)) == info
    bad = info.to_dict() | {"row_count": "12"}
    with pytest.raises(ValueError, match="row_count"):
        SSTInfo.from_dict(bad)
    with pytest.raises(ValueError, match="fields"):
        SSTInfo.from_dict({"path": PATH})
    with pytest.raises(ValueError, match="base64"):
        SSTInfo.from_dict(info.to_dict() | {"min_key": "not base64!"})
    with pytest.raises(TypeError):
        SSTInfo.from_dict([])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rows", "error", "match"),
    [
        ([(b"b", 1, PUT, b"", None), (b"a", 1, PUT, b"", None)], ValueError, "not sorted: row 1"),
        ([(b"a", 1, PUT, b"", None), (b"a", 2, PUT, b"", None)], ValueError, "not sorted: row 1"),
        ([(b"a", 1, PUT, b"", None), (b"a", 1, DELETE, None, None)], ValueError, "row 1 repeats"),
        ([], ValueError, "empty"),
        ([(b"a", 1, 3, b"", None)], ValueError, "kind"),
        ([(b"a", 1, PUT, None, None)], ValueError, "null value"),
        ([(b"a", 1, DELETE, b"x", None)], ValueError, "DELETE row has a non-null value"),
        ([(b"a", -1, PUT, b"", None)], ValueError, "out of range"),
        ([("a", 1, PUT, b"", None)], TypeError, "key must be bytes"),
        ([(b"a", 1, PUT, "v", None)], TypeError, "value must be None or bytes"),
        ([(b"a", 1, PUT, b"")], TypeError, "4 fields"),
        ([(b"a", "1", PUT, b"", None)], TypeError, "row 0 seq must be int"),
        ([(b"a", 1, PUT, b"", 1.5)], TypeError, "expire_at_ms must be None or int"),
        ([(b"a", 1, 256, b"", None)], ValueError, "out of range"),
        ([[b"a", 1, PUT, b"", None]], TypeError, "Row tuples or pyarrow.RecordBatch"),
    ],
)
def test_write_rejects_bad_rows(rows: list, error: type[Exception], match: str) -> None:
    store = MemoryStore()
    with pytest.raises(error, match=match):
        write_sst(store, PATH, rows)
    assert list(store.list()) == []


def test_write_rejects_disorder_across_batches_and_bad_batches() -> None:
    first = rows_to_batch([(b"a", 5, PUT, b"", None), (b"b", 5, PUT, b"", None)])
    with pytest.raises(ValueError, match="row 2 repeats"):
        encode_sst(PATH, [first, rows_to_batch([(b"b", 5, PUT, b"", None)])])
    with pytest.raises(ValueError, match="not sorted: row 2"):
        encode_sst(PATH, [first, (b"a", 9, PUT, b"", None)])
    wrong = pa.RecordBatch.from_pydict({"key": [b"a"], "seq": [1]})
    with pytest.raises(TypeError, match="ROW_SCHEMA"):
        encode_sst(PATH, [wrong])
    nullable = pa.schema([field.with_nullable(True) for field in ROW_SCHEMA])
    with_null_key = pa.RecordBatch.from_pylist(
        [{"key": None, "seq": 1, "kind": PUT, "value": b"", "expire_at_ms": None}], schema=nullable
    )
    with pytest.raises(ValueError, match="must not be null"):
        encode_sst(PATH, [with_null_key])
    loose = pa.RecordBatch.from_pylist(
        [{"key": b"a", "seq": 1, "kind": PUT, "value": b"", "expire_at_ms": None}], schema=nullable
    )
    assert encode_sst(PATH, [loose])[1].row_count == 1  # nullable flags alone are not an error


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"block_size": 0}, ValueError),
        ({"block_size": 1.5}, TypeError),
        ({"bloom_bits_per_key": 0}, ValueError),
        ({"bloom_bits_per_key": True}, TypeError),
    ],
)
def test_write_rejects_bad_options(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error, match=next(iter(kwargs))):
        write_sst(MemoryStore(), PATH, [(b"a", 1, PUT, b"", None)], **kwargs)


def test_reader_rejects_bad_arguments() -> None:
    store = MemoryStore()
    info = write_sst(store, PATH, [(b"a", 1, PUT, b"", None)])
    reader = SSTReader.open(store, PATH)
    with pytest.raises(TypeError, match="key"):
        reader.get("a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        reader.may_contain(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="snapshot_seq"):
        reader.get(b"a", -1)
    with pytest.raises(ValueError, match="snapshot_seq"):
        reader.iter(snapshot_seq=MAX_SEQ + 1)
    with pytest.raises(TypeError, match="start"):
        reader.iter(start="a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="end"):
        reader.iter_batches(end=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reverse"):
        reader.iter(reverse=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        SSTReader.open(store, PATH, size=-1)
    with pytest.raises(TypeError, match="tail_size"):
        SSTReader.open(store, PATH, tail_size="10")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="forbidden"):
        SSTReader.open(store, "../x")
    with pytest.raises(FileNotFoundError):
        SSTReader.open(store, "sst/missing.sst")
    with pytest.raises(CorruptionError, match="Arrow file magic"):
        SSTReader.open(store, PATH, size=info.size - 1)  # manifest size disagrees with the file


def test_cached_footer_checked_against_the_manifest_size() -> None:
    store = MemoryStore()
    info = write_sst(store, PATH, [(b"a", 1, PUT, b"", None)])
    cache = BlockCache(1 << 20)
    SSTReader.open(store, PATH, cache=cache, size=info.size)
    with pytest.raises(CorruptionError, match="expected"):
        SSTReader.open(store, PATH, cache=cache, size=info.size + 1)


KEY_BYTES = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x7F, 0x80, 0xFE, 0xFF]), max_size=3).map(bytes)


@st.composite
def sorted_rows(draw: st.DrawFn) -> list[Row]:
    seqs = st.sets(st.integers(0, 12), min_size=1, max_size=5)
    versions = draw(st.dictionaries(KEY_BYTES, seqs, min_size=1, max_size=20))
    rows: list[Row] = []
    for key in sorted(versions):
        for seq in sorted(versions[key], reverse=True):
            kind = draw(st.sampled_from([PUT, PUT, DELETE]))
            value = draw(st.binary(max_size=40)) if kind == PUT else None
            rows.append((key, seq, kind, value, draw(st.none() | st.integers(-(2**63), 2**63 - 1))))
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=sorted_rows(),
    block_size=st.sampled_from([1, 60, 300, 65536]),
    queries=st.lists(
        st.tuples(st.none() | KEY_BYTES, st.none() | KEY_BYTES, st.sampled_from([0, 1, 5, 11, 12, MAX_SEQ])),
        min_size=1,
        max_size=6,
    ),
)
def test_reader_matches_brute_force_model(
    rows: list[Row], block_size: int, queries: list[tuple[bytes | None, bytes | None, int]]
) -> None:
    store = MemoryStore()
    info = write_sst(store, PATH, rows, block_size=block_size)
    reader = SSTReader.open(store, PATH, cache=BlockCache(1 << 20), size=info.size)
    assert list(reader.iter()) == rows
    for start, end, snap in queries:
        expected = model_iter(rows, start, end, snap)
        assert list(reader.iter(start, end, snap)) == expected
        assert list(reader.iter(start, end, snap, reverse=True)) == model_reverse(expected)
        assert flatten(list(reader.iter_batches(start, end, snap))) == expected
        for key in {row[0] for row in rows} | {start or b"", end or b"\xff\xff\xff\xff"}:
            assert reader.get(key, snap) == model_get(rows, key, snap)
    reader.check_invariants()
