"""Root files and tree manifests: naming, round trips, whole-file checksums."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.errors import CorruptionError
from kvstore.format.root import RootFile, decode_root, encode_root, parse_root_path, root_path
from kvstore.format.rows import DELETE, PUT, batch_to_rows, rows_to_batch
from kvstore.format.tree import TreeManifest, decode_tree, encode_tree


def _root(version: int = 7, rows=None) -> RootFile:
    rows = rows if rows is not None else [(b"a", 10, PUT, b"x", None), (b"b", 11, DELETE, None, 123)]
    return RootFile(
        version=version, parent=version - 1, first_seq=10, last_seq=11, writer_id="w1",
        writer_clock_ms=1, commit_id="c1", tree="tree/t.ipc", flushed_upto=3,
        delta=rows_to_batch(rows), commits=[{"seq": 10}], checkpoints={"nightly": 2},
    )


def test_root_path_follows_trinitylake_naming() -> None:
    assert root_path(100) == "_00100110000000000000000000000000.ipc"
    assert root_path(0) == "_" + "0" * 32 + ".ipc"
    assert parse_root_path(root_path(123456)) == 123456
    assert parse_root_path("_latest_hint") is None
    assert parse_root_path("_lakekv_store") is None
    with pytest.raises(ValueError, match="outside"):
        root_path(2**32)
    with pytest.raises(ValueError):
        root_path(-1)


@given(st.integers(0, 2**32 - 1))
def test_root_path_round_trip(version: int) -> None:
    assert parse_root_path(root_path(version)) == version


def test_root_round_trip() -> None:
    root = _root()
    decoded = decode_root(encode_root(root), 7)
    assert decoded.metadata() == root.metadata()
    assert decoded.delta_rows() == batch_to_rows(root.delta)
    for buffer in (bytearray, memoryview):
        assert decode_root(buffer(encode_root(root)), 7).delta_rows() == decoded.delta_rows()


def test_root_with_empty_delta() -> None:
    decoded = decode_root(encode_root(_root(rows=[])), 7)
    assert decoded.delta_row_count == 0 and decoded.delta_batch().num_rows == 0


def test_root_version_must_match_its_name() -> None:
    with pytest.raises(CorruptionError, match="claims version 7"):
        decode_root(encode_root(_root()), 8)


def test_every_single_bit_flip_in_a_root_file_is_detected() -> None:
    data = encode_root(_root())
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        with pytest.raises(CorruptionError):
            decode_root(bytes(damaged), 7)


def test_every_single_byte_change_in_a_small_format_3_root_is_detected() -> None:
    data = encode_root(_root())
    assert data.startswith(b"LKVROOT3") and len(data) < 250
    for position in range(len(data)):
        for flip in range(1, 256):
            damaged = bytearray(data)
            damaged[position] ^= flip
            with pytest.raises(CorruptionError):
                decode_root(bytes(damaged), 7)


def test_truncated_root_is_corrupt() -> None:
    data = encode_root(_root())
    for cut in range(len(data)):
        with pytest.raises(CorruptionError):
            decode_root(data[:cut], 7)


def test_user_data_that_looks_like_a_seal_token_is_harmless() -> None:
    rows = [(b"k", 10, PUT, b"lakekv-crc-0000000000000000:00000000", None)]
    decoded = decode_root(encode_root(_root(rows=rows)), 7)
    assert decoded.delta_rows() == rows


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_tree_manifest_flip_detected(position: int) -> None:
    tree = TreeManifest(flushed_upto=5, l0=({"path": "sst/a.sst", "size": 10},), runs=(({"path": "sst/b.sst"},),))
    data = encode_tree(tree)
    assert decode_tree(data, "tree/x.ipc") == tree
    damaged = bytearray(data)
    damaged[position % len(data)] ^= 0x01
    with pytest.raises(CorruptionError, match="tree/x.ipc"):
        decode_tree(bytes(damaged), "tree/x.ipc")


# -- format 3: dense roots; formats 2 and 1 still read ------------------------------------

ROWS_STRATEGY = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=40),
        st.integers(10, 11),
        st.sampled_from([PUT, DELETE]),
        st.binary(max_size=60),
        st.one_of(st.none(), st.integers(0, 2**62)),
    ).map(lambda r: (r[0], r[1], r[2], r[3] if r[2] == PUT else None, r[4])),
    max_size=20,
    unique_by=lambda r: (r[0], r[1]),
)


@settings(max_examples=200, deadline=None)
@given(ROWS_STRATEGY)
def test_format_3_round_trips_any_rows(rows) -> None:
    rows = sorted(rows, key=lambda r: (r[0], -r[1]))
    root = _root(rows=rows)
    decoded = decode_root(encode_root(root), 7)
    assert decoded.delta_rows() == rows
    assert batch_to_rows(decoded.delta_batch()) == rows
    assert decoded.metadata() == root.metadata()


def test_a_one_key_put_root_is_a_few_hundred_bytes() -> None:
    root = RootFile(
        version=12345, parent=12344, first_seq=99999, last_seq=99999, writer_id="a" * 32,
        writer_clock_ms=1_800_000_000_000, commit_id="b" * 32, tree="tree/" + "c" * 32 + ".ipc",
        flushed_upto=12000, delta=rows_to_batch([(b"user:1", 99999, PUT, b"alice", None)]),
        commits=[{"op": "write", "keys": 1, "seq": 99999}],
    )
    data = encode_root(root)
    assert data.startswith(b"LKVROOT3")
    assert len(data) < 340, len(data)  # format 2: 352


def test_unknown_magic_is_corruption() -> None:
    with pytest.raises(CorruptionError, match="not a lakekv root file"):
        decode_root(b"PAR1" + b"\0" * 40, 7)


def test_format_1_roots_of_an_old_store_still_decode() -> None:
    from pathlib import Path

    store_v1 = Path(__file__).resolve().parents[1] / "data" / "store_v1"
    for path in sorted(store_v1.glob("_*.ipc")):
        version = parse_root_path(path.name)
        assert version is not None
        data = path.read_bytes()
        assert data.startswith(b"ARROW1")
        root = decode_root(data, version)
        assert root.version == version and root.parent == (version - 1 if version else None)
        # and re-encoding it in format 3 keeps everything
        again = decode_root(encode_root(root), version)
        assert again.metadata() == root.metadata() and again.delta_rows() == root.delta_rows()


def test_format_2_roots_of_an_old_store_still_decode() -> None:
    from pathlib import Path

    store_v2 = Path(__file__).resolve().parents[1] / "data" / "store_v2"
    rows = 0
    for path in sorted(store_v2.glob("_*.ipc")):
        version = parse_root_path(path.name)
        assert version is not None
        data = path.read_bytes()
        assert data.startswith(b"LKVROOT2")
        root = decode_root(data, version)
        assert root.version == version
        rows += root.delta_row_count
        again = encode_root(root)
        assert again.startswith(b"LKVROOT3") and len(again) < len(data)
        decoded = decode_root(again, version)
        assert decoded.metadata() == root.metadata() and decoded.delta_rows() == root.delta_rows()
        damaged = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
        with pytest.raises(CorruptionError, match="checksum"):
            decode_root(damaged, version)
    assert rows > 50
