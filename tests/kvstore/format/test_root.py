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
    assert batch_to_rows(decoded.delta) == batch_to_rows(root.delta)


def test_root_with_empty_delta() -> None:
    decoded = decode_root(encode_root(_root(rows=[])), 7)
    assert decoded.delta.num_rows == 0


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


def test_truncated_root_is_corrupt() -> None:
    data = encode_root(_root())
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(CorruptionError):
            decode_root(data[:cut], 7)


def test_user_data_that_looks_like_a_seal_token_is_harmless() -> None:
    rows = [(b"k", 10, PUT, b"lakekv-crc-0000000000000000:00000000", None)]
    decoded = decode_root(encode_root(_root(rows=rows)), 7)
    assert batch_to_rows(decoded.delta) == rows


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
