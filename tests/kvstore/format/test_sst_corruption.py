"""Corruption tests: any changed byte of an SST makes every read touching it raise
CorruptionError (never wrong data, never a raw pyarrow/struct error), while reads
of untouched blocks keep returning the right rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvstore.errors import CorruptionError
from kvstore.format.rows import DELETE, PUT, Row
from kvstore.format.sst import SSTReader, encode_sst
from kvstore.format.sst_format import (
    SST_COMPRESSIONS,
    TAIL_CRC_PREFIX,
    decode_block,
    decode_meta,
    parse_footer_blocks,
    tail_crc,
)
from kvstore.objstore.memory import MemoryStore

PATH = "sst/corrupt.sst"

# Unique keys, so a point get of a block's first key touches exactly that block.
SMALL_ROWS: list[Row] = [
    (b"apple", 9, PUT, b"red", None),
    (b"banana", 8, DELETE, None, None),
    (b"cherry", 7, PUT, b"", 1_700_000_000_000),
    (b"date", 6, PUT, b"brown" * 4, None),
]


def layout(data: bytes) -> SSTReader:
    """A reader over the intact file, used to learn its block layout."""
    store = MemoryStore()
    store.put(PATH, data)
    return SSTReader.open(store, PATH)


def open_corrupted(data: bytes, pos: int, mask: int) -> tuple[MemoryStore, bytes]:
    corrupted = bytearray(data)
    corrupted[pos] ^= mask
    store = MemoryStore()
    store.put(PATH, bytes(corrupted))
    return store, bytes(corrupted)


def assert_every_touching_read_fails(data: bytes, rows: list[Row], pos: int, mask: int) -> None:
    """Flip ``mask`` into byte ``pos``; check open, each block's point read, scans, check_invariants."""
    intact = layout(data)
    meta = intact.meta
    store, _corrupted = open_corrupted(data, pos, mask)
    if pos >= meta.info.size - meta.info.tail_size:  # meta block, Arrow footer, trailer
        with pytest.raises(CorruptionError):
            SSTReader.open(store, PATH, size=len(data))
        return
    reader = SSTReader.open(store, PATH, size=len(data))  # open reads only the intact tail
    expected = {row[0]: row for row in rows}
    for b in range(meta.info.block_count):
        start, end = meta.offsets[b], meta.offsets[b] + meta.lengths[b]
        touches = start <= pos < end or (b == 0 and pos < meta.head_length)  # block 0 is read with the head
        key = meta.first_keys[b]
        if touches:
            with pytest.raises(CorruptionError, match=f"{PATH}: (block {b}|file head)"):
                reader.get(key)
        else:
            assert reader.get(key) == expected[key]
    with pytest.raises(CorruptionError):
        list(reader.iter())
    with pytest.raises(CorruptionError):
        list(reader.iter(reverse=True))
    with pytest.raises(CorruptionError):
        list(SSTReader.open(store, PATH, size=len(data)).iter_batches())
    with pytest.raises(CorruptionError):
        reader.check_invariants()


def test_exhaustive_sweep_of_every_byte_of_a_small_file() -> None:
    # The default codec compresses the blocks; the property test below draws every codec.
    data, info = encode_sst(PATH, SMALL_ROWS, block_size=1)  # one row per block
    assert info.block_count == len(SMALL_ROWS)
    for pos in range(len(data)):
        # Vary which bit(s) flip with the position; CRC32C catches any change
        # confined to one byte, so the choice of mask is not what is tested.
        mask = (0x01, 0x80, 0xFF, 0x5A)[pos % 4] if pos % 3 else 1 << (pos % 8)
        assert_every_touching_read_fails(data, SMALL_ROWS, pos, mask)


@st.composite
def sst_files(draw: st.DrawFn) -> tuple[bytes, list[Row]]:
    keys = sorted(draw(st.sets(st.binary(min_size=1, max_size=6), min_size=1, max_size=12)))
    rows: list[Row] = []
    for key in keys:
        kind = draw(st.sampled_from([PUT, DELETE]))
        value = draw(st.binary(max_size=30)) if kind == PUT else None
        rows.append((key, draw(st.integers(0, 2**64 - 1)), kind, value, draw(st.none() | st.integers(0, 2**40))))
    codec = draw(st.sampled_from(sorted(SST_COMPRESSIONS)))  # compressed blocks are CRC-checked the same way
    data, _info = encode_sst(PATH, rows, block_size=draw(st.sampled_from([1, 50, 4096])), compression=codec)
    return data, rows


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file=sst_files(), choice=st.data(), mask=st.integers(1, 255))
def test_flipping_any_byte_is_detected(file: tuple[bytes, list[Row]], choice: st.DataObject, mask: int) -> None:
    data, rows = file
    pos = choice.draw(st.integers(0, len(data) - 1), label="pos")
    assert_every_touching_read_fails(data, rows, pos, mask)


@settings(max_examples=100, deadline=None)
@given(file=sst_files(), cut=st.floats(0, 1, exclude_max=True))
def test_truncated_file_is_corrupt(file: tuple[bytes, list[Row]], cut: float) -> None:
    data, _rows = file
    store = MemoryStore()
    store.put(PATH, data[: int(cut * len(data))])
    with pytest.raises(CorruptionError):
        SSTReader.open(store, PATH)
    with pytest.raises(CorruptionError, match="shorter"):
        SSTReader.open(store, PATH, size=len(data))  # the manifest remembers the real size


@pytest.mark.parametrize("digits", [b" 1234567", b"+1234567", b"0x123456", b"1234_567", b"ABCDEF12", b"1234567"])
def test_tail_checksum_slot_must_be_exactly_eight_lowercase_hex_digits(digits: bytes) -> None:
    # The slot is outside the checksum, so a lenient parse (int(" 1234567", 16)
    # == int("01234567", 16)) would let a flipped leading "0" go unnoticed.
    data, info = encode_sst(PATH, SMALL_ROWS)
    tail = data[info.size - info.tail_size :]
    slot = tail.index(TAIL_CRC_PREFIX) + len(TAIL_CRC_PREFIX)
    computed, stored = tail_crc(tail, PATH)
    assert computed == stored
    with pytest.raises(CorruptionError, match="not 8 hex digits"):
        tail_crc(tail[:slot] + digits + tail[slot + 8 :], PATH)


def test_not_an_sst() -> None:
    store = MemoryStore()
    store.put(PATH, b"")
    with pytest.raises(CorruptionError, match="too small"):
        SSTReader.open(store, PATH)
    table = pa.table({"x": [1, 2, 3]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    store.put(PATH, sink.getvalue().to_pybytes())  # a valid Arrow file, but not an SST
    with pytest.raises(CorruptionError):
        SSTReader.open(store, PATH)


@settings(max_examples=300, deadline=None)
@given(footer=st.binary(max_size=200))
def test_footer_parser_never_crashes_on_garbage(footer: bytes) -> None:
    try:
        blocks = parse_footer_blocks(footer, PATH)
    except CorruptionError:
        return
    assert all(offset >= 0 and length >= 0 for offset, length in blocks)


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=300))
def test_block_decoder_reports_garbage_as_corruption(garbage: bytes) -> None:
    with pytest.raises(CorruptionError, match="block 3"):
        decode_block(garbage, PATH, 3, rows=1)


@pytest.mark.parametrize(
    "custom",
    [
        {},
        {b"lakekv.sst.meta": b"{", b"lakekv.sst.index": b"{}", b"lakekv.sst.bloom": b""},
        {b"lakekv.sst.meta": b"[]", b"lakekv.sst.index": b"[]", b"lakekv.sst.bloom": b"!"},
    ],
)
def test_meta_decoder_reports_malformed_metadata_as_corruption(custom: dict[bytes, bytes]) -> None:
    with pytest.raises(CorruptionError, match="malformed SST metadata"):
        decode_meta(custom, PATH, 1000)


def test_metadata_inconsistent_with_itself_is_corruption() -> None:
    data, info = encode_sst(PATH, SMALL_ROWS, block_size=1)
    store = MemoryStore()
    store.put(PATH, data)
    meta_reader = SSTReader.open(store, PATH)
    custom = pa.ipc.open_file(pa.py_buffer(data)).get_batch_with_custom_metadata(info.block_count).custom_metadata
    custom = dict(custom)
    assert decode_meta(custom, PATH, info.size) == meta_reader.meta
    swapped = custom[b"lakekv.sst.index"].replace(b'"offset":[', b'"offset":[1,', 1)
    with pytest.raises(CorruptionError, match=r"index arrays|contiguous|head"):
        decode_meta(custom | {b"lakekv.sst.index": swapped}, PATH, info.size)
