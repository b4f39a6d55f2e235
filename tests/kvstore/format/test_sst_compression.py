"""Compressed SST data blocks (the store option ``sst_compression``): every
codec round-trips through a real store (flush, compaction, delta SSTs, point
gets, scans both ways, time travel), an SST reads back the same rows under
every codec, any Arrow reader decodes the files, the block cache charges a
compressed block its decoded size, uncompressed SSTs from older versions
still read, and a bad option is a clear error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvstore
from kvstore.cache import BlockCache
from kvstore.errors import CorruptionError
from kvstore.format.block_view import BLOCK_OVERHEAD_BYTES, KEY_HEAD_BYTES
from kvstore.format.rows import DELETE, PUT, Row, batch_to_rows, rows_to_batch
from kvstore.format.sst import SSTReader, encode_sst, write_sst
from kvstore.format.sst_format import SST_COMPRESSIONS, is_compressed
from kvstore.objstore.memory import MemoryStore
from kvstore.options import StoreOptions

CODECS = tuple(SST_COMPRESSIONS)
PATH = "sst/c.sst"
FIXTURE_V1 = Path(__file__).resolve().parent.parent / "data" / "store_v1"
# The first bytes of a compressed Arrow buffer (after its 8-byte length): an
# LZ4 frame or a Zstandard frame, in little-endian order.
FRAME_MAGIC = {"lz4": b"\x04\x22\x4d\x18", "zstd": b"\x28\xb5\x2f\xfd"}


def codec_of(data: bytes) -> str:
    """Which codec an SST's bytes show: a frame magic of one codec and none of the other."""
    found = [name for name, magic in FRAME_MAGIC.items() if magic in data]
    assert len(found) <= 1, f"frames of both codecs in one file: {found}"
    return found[0] if found else "none"


def compressible_rows(n: int, seq: int = 1) -> list[Row]:
    return [(b"key-%08d" % i, seq, PUT, b"value %d " % (i % 7) * 12, None) for i in range(n)]


def sst_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (root / "sst").glob("*.sst")}


@pytest.mark.parametrize("codec", CODECS)
def test_a_store_round_trips_every_codec(tmp_path: Path, codec: str) -> None:
    """Flush, a large-commit delta SST and compaction all write ``codec``; every read path agrees with a model."""
    path = tmp_path / "store"
    options = dict(poll_interval_s=0, background_maintenance=False, sst_compression=codec, inline_delta_bytes=4096)
    model: dict[bytes, bytes] = {}
    with kvstore.open(path, **options) as db:
        for i in range(0, 600, 10):  # small commits: inline in the root file, then flushed to L0
            db.write(kvstore.WriteBatch().put_many([(b"key-%08d" % j, b"first %d " % j * 8) for j in range(i, i + 10)]))
        model.update({b"key-%08d" % j: b"first %d " % j * 8 for j in range(600)})
        assert db.flush() is not None
        first_version = db.version
        big = [(b"key-%08d" % j, b"second %d " % (j % 5) * 20) for j in range(300, 900)]  # > inline_delta_bytes
        db.write(kvstore.WriteBatch().put_many(big))
        model.update(big)
        assert len(sst_files(path)) == 2  # the first flush's L0 SST and the big commit's delta SST
        wb = kvstore.WriteBatch()
        for j in range(0, 100, 3):
            wb.delete(b"key-%08d" % j)
            model.pop(b"key-%08d" % j, None)
        db.write(wb)
        db.flush()
        for name, data in sst_files(path).items():
            assert codec_of(data) == codec, name
            pa.ipc.open_file(pa.py_buffer(data)).read_all()  # plain Arrow IPC: Arrow's own reader decodes it
        assert db.compact(full=True)
        after_compaction = sst_files(path)
        assert all(codec_of(data) == codec for data in after_compaction.values())

        expected = sorted(model.items())
        assert list(db.scan()) == expected
        assert list(db.scan(reverse=True)) == expected[::-1]
        assert list(db.scan(start=b"key-00000250", end=b"key-00000350")) == [
            kv for kv in expected if b"key-00000250" <= kv[0] < b"key-00000350"
        ]
        for key in (b"key-00000000", b"key-00000001", b"key-00000450", b"key-00000899", b"key-00000900"):
            assert db.get(key) == model.get(key)
        with db.at(version=first_version) as old:  # before the big commit and the deletes
            assert old.get(b"key-00000000") == b"first 0 " * 8
            assert old.get(b"key-00000700") is None
            assert old.get(b"key-00000450") == b"first 450 " * 8
        assert db.verify().ok
    with kvstore.open(path, **options) as db:  # a fresh handle, cold cache
        assert list(db.scan()) == expected


@st.composite
def sorted_rows(draw: st.DrawFn) -> list[Row]:
    keys = sorted(draw(st.sets(st.binary(max_size=12), min_size=1, max_size=40)))
    rows: list[Row] = []
    for key in keys:
        seqs = sorted(draw(st.sets(st.integers(0, 2**64 - 1), min_size=1, max_size=3)), reverse=True)
        for seq in seqs:
            kind = draw(st.sampled_from([PUT, DELETE]))
            value = draw(st.binary(max_size=200) | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3),
                                                                 st.integers(1, 100))) if kind == PUT else None
            rows.append((key, seq, kind, value, draw(st.none() | st.integers(-(2**63), 2**63 - 1))))
    return rows


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=sorted_rows(), block_size=st.sampled_from([1, 200, 4096]), as_batch=st.booleans())
def test_an_sst_reads_back_the_same_rows_under_every_codec(rows: list[Row], block_size: int, as_batch: bool) -> None:
    store = MemoryStore()
    source = [rows_to_batch(rows)] if as_batch else rows
    for codec in CODECS:
        path = f"sst/{codec}.sst"
        info = write_sst(store, path, source, block_size=block_size, compression=codec)
        reader = SSTReader.open(store, path, cache=BlockCache(1 << 20))
        assert info.row_count == len(rows)
        assert list(reader.iter()) == rows
        assert [row for batch in reader.iter_batches() for row in batch_to_rows(batch)] == rows
        for row in rows:
            assert reader.get(row[0], row[1]) == row
        reader.check_invariants()
        arrow = pa.ipc.open_file(pa.py_buffer(store.get(path))).read_all()
        assert batch_to_rows(arrow.combine_chunks().to_batches()[0]) == rows  # the meta block has no rows


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_corrupt_compressed_block_fails_its_crc_not_arrow(codec: str) -> None:
    """A flipped byte inside a compressed buffer is a CorruptionError naming the
    block's CRC, raised before Arrow tries to decompress it."""
    rows = compressible_rows(2000)
    data, info = encode_sst(PATH, rows, block_size=4096, compression=codec)
    meta = SSTReader.open(_stored(data), PATH).meta
    b = 1
    frame = data.index(FRAME_MAGIC[codec], meta.offsets[b])
    assert frame < meta.offsets[b] + meta.lengths[b]
    corrupted = bytearray(data)
    corrupted[frame + 8] ^= 0x40  # inside the compressed frame
    reader = SSTReader.open(_stored(bytes(corrupted)), PATH)
    with pytest.raises(CorruptionError, match=f"block {b} .*CRC32C"):
        reader.get(meta.first_keys[b])
    with pytest.raises(CorruptionError, match=f"block {b} .*CRC32C"):
        list(reader.iter())
    with pytest.raises(CorruptionError, match=f"block {b} failed its CRC32C"):
        reader.check_invariants()
    assert reader.get(meta.first_keys[0]) == rows[0]  # untouched blocks still read


def _stored(data: bytes) -> MemoryStore:
    store = MemoryStore()
    store.put(PATH, data)
    return store


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_the_cache_charges_a_compressed_block_its_decoded_size(codec: str) -> None:
    """A compressed block's buffers are decompressed into new memory: the cache
    charges that (much more than its size on disk here), not the compressed bytes."""
    rows = compressible_rows(20_000)
    store = MemoryStore()
    info = write_sst(store, PATH, rows, compression=codec)
    cache = BlockCache(256 << 20)
    reader = SSTReader.open(store, PATH, cache=cache, size=info.size, tail_size=info.tail_size)
    allocated = pa.total_allocated_bytes()
    for key in reader.meta.first_keys:
        assert reader.get(key) == rows[int(key[4:])]
    decoded = pa.total_allocated_bytes() - allocated  # the blocks' decompressed buffers, all still cached
    block_bytes = cache.stats().bytes - info.tail_size * 2  # the footer is charged twice its tail
    on_disk = info.size - info.tail_size
    assert decoded > 3 * on_disk  # the rows compress well: the test is about the difference
    overheads = info.block_count * BLOCK_OVERHEAD_BYTES + KEY_HEAD_BYTES * len(rows)
    assert decoded <= block_bytes <= decoded + overheads


def test_uncompressed_ssts_of_older_versions_read_and_mix_with_compressed_ones(tmp_path: Path) -> None:
    """The committed format-1 fixture's SST (written before compression existed)
    reads as is; new flushes and a compaction in that store write zstd, and
    reads across both kinds agree."""
    (old_sst,) = (FIXTURE_V1 / "sst").glob("*.sst")
    old = old_sst.read_bytes()
    assert codec_of(old) == "none"
    store = MemoryStore()
    store.put(PATH, old)
    reader = SSTReader.open(store, PATH)
    reader.check_invariants()
    assert list(reader.iter()) and list(reader.iter(reverse=True)) == sorted(
        reader.iter(), key=lambda row: row[0], reverse=True
    )

    path = tmp_path / "store"
    shutil.copytree(FIXTURE_V1, path)
    options = dict(poll_interval_s=0, background_maintenance=False, sst_compression="zstd")
    with kvstore.open(path, create=False, **options) as db:
        before = dict(db.scan())
        db.put(b"k1", b"replaced")
        db.write(kvstore.WriteBatch().put_many([(b"z%04d" % i, b"zz" * 40) for i in range(200)]))
        db.flush()
        codecs = sorted(codec_of(data) for data in sst_files(path).values())
        assert "none" in codecs and "zstd" in codecs  # a mixed tree
        expected = {**before, b"k1": b"replaced", **{b"z%04d" % i: b"zz" * 40 for i in range(200)}}
        assert dict(db.scan()) == expected
        assert [k for k, _ in db.scan(reverse=True)] == sorted(expected, reverse=True)
        assert db.get(b"k2") == before[b"k2"] and db.get(b"k1") == b"replaced"
        db.compact(full=True)
        assert dict(db.scan()) == expected
        assert db.verify().ok


def test_the_option_is_validated() -> None:
    assert StoreOptions().sst_compression in CODECS
    for codec in CODECS:
        assert StoreOptions.from_kwargs(sst_compression=codec).sst_compression == codec
    with pytest.raises(ValueError, match=r"'sst_compression' must be one of \('lz4', 'zstd', 'none'\), got 'gzip'"):
        StoreOptions.from_kwargs(sst_compression="gzip")
    with pytest.raises(TypeError, match="'sst_compression' must be str, not NoneType"):
        StoreOptions.from_kwargs(sst_compression=None)


def test_kvstore_open_rejects_a_bad_codec_before_touching_storage(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sst_compression"):
        kvstore.open(tmp_path / "store", sst_compression="LZ4")
    assert not (tmp_path / "store").exists()


def test_the_writer_rejects_a_bad_codec() -> None:
    with pytest.raises(ValueError, match=r"compression must be one of \('lz4', 'zstd', 'none'\), got 'snappy'"):
        encode_sst(PATH, compressible_rows(3), compression="snappy")
    with pytest.raises(TypeError, match="compression must be str, not NoneType"):
        encode_sst(PATH, compressible_rows(3), compression=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", CODECS)
def test_blocks_declare_their_compression_in_the_arrow_message(codec: str) -> None:
    """The reader tells compressed blocks (decompressed in the calling thread)
    from uncompressed ones (zero-copy) by the message's BodyCompression field."""
    data, _info = encode_sst(PATH, compressible_rows(500), block_size=4096, compression=codec)
    meta = SSTReader.open(_stored(data), PATH).meta
    for offset, length in zip(meta.offsets, meta.lengths, strict=True):
        message = pa.ipc.read_message(pa.py_buffer(data[offset : offset + length]))
        assert is_compressed(message.metadata.to_pybytes()) == (codec != "none")
    with pytest.raises(ValueError, match="out of bounds"):
        is_compressed(b"\xff\xff\xff\x7f")


@pytest.mark.parametrize("codec", CODECS)
def test_blocks_larger_than_the_writers_buffer_round_trip(codec: str) -> None:
    """The writer buffers pyarrow's output one block at a time; a block of a
    few hundred KiB (one large value) passes through in pieces, checksummed whole."""
    rows: list[Row] = [
        (b"a", 3, PUT, bytes(range(256)) * 1200, None),
        (b"b", 2, PUT, b"B" * 400_000, 1_700_000_000_000),
        (b"c", 1, DELETE, None, None),
    ]
    store = MemoryStore()
    info = write_sst(store, PATH, rows, block_size=1024, compression=codec)
    assert info.block_count == 3
    reader = SSTReader.open(store, PATH)
    assert list(reader.iter()) == rows and reader.get(b"b") == rows[1]
    reader.check_invariants()
