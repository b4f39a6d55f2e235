"""The root file's delta rows (format 3): the compiled encoder and decoder
agree with their pure-Python twins, and malformed rows are corruption."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.errors import CorruptionError
from kvstore.format import root as root_module
from kvstore.format.root import (
    RootFile,
    decode_root,
    decode_rows,
    decode_rows_py,
    encode_root,
    encode_rows,
    encode_rows_py,
)
from kvstore.format.rows import DELETE, PUT

FIRST_SEQ = 1000
U64_MAX = 2**64 - 1

_row = st.tuples(
    st.binary(min_size=1, max_size=12),
    st.integers(FIRST_SEQ, FIRST_SEQ + 2**32 - 1),
    st.sampled_from([PUT, DELETE]),
    st.none() | st.binary(max_size=40),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)

# Keys that share prefixes with each other, are empty, or long enough for a
# 2-byte (> 127) or 3-byte (> 16383) length varint.
_key = st.builds(
    lambda stem, pad, tail: stem + b"p" * pad + tail,
    st.sampled_from([b"", b"user:", b"user:00", b"\xff\x00"]),
    st.sampled_from([0, 0, 0, 1, 130, 16400]),
    st.binary(max_size=3),
)
_value = st.none() | st.sampled_from([b"", b"v" * 200, b"w" * 17000]) | st.binary(max_size=20)
_expire = st.none() | st.sampled_from([-1, 0, 1, -(2**63), 2**63 - 1, 1_800_000_000_000]) | st.integers(-(2**63), 2**63 - 1)
_delta = st.sampled_from([0, 1, 127, 128, 2**32 - 1, 2**32, 2**63, U64_MAX]) | st.integers(0, U64_MAX)
_rows = st.lists(st.tuples(_key, _delta, st.sampled_from([PUT, DELETE]), _value, _expire), max_size=12)


def test_the_compiled_encoder_is_built() -> None:
    assert encode_rows is not encode_rows_py, "cython_ext._rootrows did not build (run make install)"
    assert decode_rows is not decode_rows_py, "cython_ext._rootrows did not build (run make install)"


@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=30))
def test_compiled_and_python_encoders_write_the_same_bytes(rows) -> None:
    assert encode_rows(rows, FIRST_SEQ) == encode_rows_py(rows, FIRST_SEQ)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([0, 1, FIRST_SEQ, 2**63 - 1, 2**63, 2**70]), _rows)
def test_any_rows_round_trip_through_both_encoders_and_decoders(first_seq, drawn) -> None:
    """Keys long and empty and sharing prefixes, DELETEs, null and empty
    values, expiries set or not (any int64), seq deltas up to 2**64 - 1,
    first seqs past int64: one encoding, and it decodes to the same rows."""
    rows = [(key, first_seq + delta, kind, value, expire) for key, delta, kind, value, expire in drawn]
    data = encode_rows(rows, first_seq)
    assert encode_rows_py(rows, first_seq) == data
    assert decode_rows(data, 0, len(data), first_seq) == rows
    assert decode_rows_py(data, 0, len(data), first_seq) == rows


@settings(max_examples=100, deadline=None)
@given(st.lists(_row, max_size=30))
def test_rows_round_trip_through_a_root_file(rows) -> None:
    rows.sort(key=lambda row: (row[0], -row[1]))
    root = RootFile(
        version=3, parent=2, first_seq=FIRST_SEQ, last_seq=FIRST_SEQ, writer_id="w", writer_clock_ms=1,
        commit_id="c", tree=None, flushed_upto=0, delta=None, rows=tuple(rows),
    )
    data = encode_root(root)
    assert data.startswith(b"LKVROOT3")
    assert encode_root(root, encode_rows(rows, FIRST_SEQ)) == data
    assert decode_root(data, 3).delta_rows() == rows


def test_a_w1_commit_root_is_under_its_logical_bytes() -> None:
    """Issue 38: 1,000 sorted random 16-byte decimal keys of 1M, 100-byte
    values, one seq: the root holds them in <= 0.93 bytes per key+value byte
    (format 2: 1.18)."""
    import random

    rng = random.Random(38)
    keys = sorted(b"%016d" % i for i in rng.sample(range(1_000_000), 1000))
    rows = [(key, 5, PUT, rng.randbytes(100), None) for key in keys]
    root = RootFile(
        version=4242, parent=4241, first_seq=5, last_seq=5, writer_id="a" * 32, writer_clock_ms=1_800_000_000_000,
        commit_id="b" * 32, tree="tree/" + "c" * 32 + ".ipc", flushed_upto=4200, delta=None, rows=tuple(rows),
        commits=[{"op": "write", "keys": 1000, "seq": 5}],
    )
    data = encode_root(root)
    assert len(data) <= 0.93 * sum(len(key) + len(value) for key, _, _, value, _ in rows), len(data)
    assert decode_root(data, 4242).rows == tuple(rows)


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ((b"k", FIRST_SEQ - 1, PUT, b"v", None), "does not fit format 3"),
        ((b"k", FIRST_SEQ + 2**64, PUT, b"v", None), "does not fit format 3"),
        ((b"k", FIRST_SEQ, 3, b"v", None), "does not fit format 3"),
        ((b"k", float(FIRST_SEQ), PUT, b"v", None), "does not fit format 3"),
        ((b"k", FIRST_SEQ, 1.0, b"v", None), "does not fit format 3"),
        ((b"k", FIRST_SEQ, PUT, b"v", 2**63), "not an int64"),
        ((b"k", FIRST_SEQ, PUT, b"v", -(2**63) - 1), "not an int64"),
        ((b"k", FIRST_SEQ, PUT, b"v", 1.5), "not an int64"),
        ((b"k", FIRST_SEQ, PUT, "text", None), "bytes or None value"),
        (("k", FIRST_SEQ, PUT, b"v", None), "bytes key"),
        ((b"k", FIRST_SEQ, PUT, b"v"), "is not a"),
        ([b"k", FIRST_SEQ, PUT, b"v", None], "is not a"),
    ],
)
@pytest.mark.parametrize("encoder", [encode_rows, encode_rows_py], ids=["compiled", "python"])
def test_bad_rows_raise_the_same_value_error(encoder, row, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        encoder([(b"a", FIRST_SEQ, PUT, b"ok", None), row], FIRST_SEQ)


def test_encode_root_uses_the_picked_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def spy(rows, first_seq):
        calls.append(len(rows))
        return encode_rows_py(rows, first_seq)

    monkeypatch.setattr(root_module, "encode_rows", spy)
    root = RootFile(
        version=1, parent=0, first_seq=5, last_seq=5, writer_id="w", writer_clock_ms=1, commit_id="c",
        tree=None, flushed_upto=0, delta=None, rows=((b"k", 5, PUT, b"v", None),),
    )
    assert decode_root(encode_root(root), 1).delta_rows() == [(b"k", 5, PUT, b"v", None)]
    assert calls == [1]


class _Int(int):
    pass


@pytest.mark.parametrize(
    ("rows", "first_seq"),
    [
        ([(b"k", True, PUT, b"v", None)], 0),  # bool seq and kind take the exact checks
        ([(b"k", 5, True, b"v", None)], 5),
        ([(b"k", _Int(7), _Int(PUT), b"v", _Int(3))], 5),
        ([(b"k", 2**63 + 5, PUT, b"v", None)], 2**63),  # first_seq beyond int64
        ([(b"k", 2**63 - 1, PUT, b"v", None)], 0),  # a delta of 2**63 - 1 in C integers
        ([(b"k", 2**64 - 1, PUT, b"v", None)], 0),  # past int64: the exact checks
        ([(b"k", 5, PUT, b"v", None)], -3),  # a negative first_seq
        ([(b"k", 5, PUT, b"v", None)], True),
        ([(b"k", 2**64 + 5, DELETE, None, 2**63 - 1)], 2**64),
        ([(b"k", 5, PUT, b"v", -(2**63))], 5),
        ([(b"a", 1, PUT, b"v", None), (b"b", 2, PUT, b"v", 2**64)], 1),
        ([(b"a", 1, PUT, b"v", None), (b"b", 2, 2**70, b"v", None)], 1),
        ([(b"a", 1, PUT, b"v", None), (b"b", -(2**70), PUT, b"v", None)], 1),
    ],
)
def test_compiled_and_python_agree_on_unusual_ints(rows, first_seq) -> None:
    """The compiled encoder checks plain ints with C integers and everything
    else with the twin's Python comparisons: both give the same bytes or error."""
    outcomes = []
    for encoder in (encode_rows, encode_rows_py):
        try:
            outcomes.append(encoder(rows, first_seq))
        except ValueError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.binary(max_size=3000))
def test_compiled_and_python_seal_write_the_same_file(header, encoded_rows) -> None:
    assert root_module.seal_root is not root_module.seal_root_py, "cython_ext._rootrows did not build"
    sealed = root_module.seal_root(b"LKVROOT3", header, encoded_rows)
    assert sealed == root_module.seal_root_py(b"LKVROOT3", header, encoded_rows)
    assert sealed[12 : 12 + len(header)] == header and sealed[12 + len(header) : -4] == encoded_rows


def test_a_root_written_by_the_compiled_seal_reads_back() -> None:
    rows = [(b"k%04d" % i, FIRST_SEQ, PUT, b"v" * (i % 50), None) for i in range(500)]
    root = RootFile(version=3, parent=2, first_seq=FIRST_SEQ, last_seq=FIRST_SEQ, writer_id="w", writer_clock_ms=1,
                    commit_id="c", tree=None, flushed_upto=0, delta=None, rows=tuple(rows))
    data = encode_root(root)
    assert decode_root(data, 3).rows == tuple(rows)
    with pytest.raises(CorruptionError, match="checksum"):
        decode_root(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:], 3)


# -- malformed rows under a valid checksum: a writer bug, reported as corruption ----


def _sealed(encoded_rows: bytes, first_seq: int = FIRST_SEQ) -> bytes:
    header = {"version": 3, "first_seq": first_seq, "last_seq": first_seq, "writer_id": "w",
              "writer_clock_ms": 1, "commit_id": "c", "flushed_upto": 0}
    return root_module.seal_root_py(b"LKVROOT3", json.dumps(header).encode(), encoded_rows)


def _decoded_by_both(data: bytes, first_seq: int = FIRST_SEQ) -> list:
    """Both decoders' result on ``data``: the same rows or the same ValueError."""
    outcomes = []
    for decoder in (decode_rows, decode_rows_py):
        try:
            outcomes.append(decoder(data, 0, len(data), first_seq))
        except ValueError as exc:
            outcomes.append(f"ValueError: {exc}")
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


SAMPLE = [
    (b"", FIRST_SEQ, PUT, b"", None),
    (b"user:" + b"k" * 200, FIRST_SEQ + 300, DELETE, None, -5),
    (b"user:" + b"k" * 200 + b"2", FIRST_SEQ, PUT, b"v" * 130, 1_800_000_000_000),
]


@pytest.mark.parametrize(
    ("encoded", "match"),
    [
        (b"", "varint runs past the end"),
        (b"\x80", "varint runs past the end"),  # the row count, cut inside
        (b"\x01", "section flags are missing"),
        (b"\x01\x02", "section flags 0x02"),
        (b"\x01\x01", "lead byte is missing"),  # one row promised, none there
        (b"\x01\x01\x00\x85", "varint runs past the end"),  # a key length cut inside
        (b"\x01\x01\x00\x05ab", "key runs past the end"),
        (b"\x01\x01\x03\x01a\x01v", "shares 3 bytes with a 0-byte key"),  # a plain lead
        (b"\x01\x01\x81\x03\x01a\x01v", "shares 3 bytes with a 0-byte key"),  # a flagged lead
        (b"\x01\x01\x81", "varint runs past the end"),  # flagged, its shared length missing
        (b"\x01\x01\x83\x00\x01a\x01v", "flags 0x03"),
        (b"\x01\x01\x91\x00\x01a\x01v", "flags 0x11"),
        (b"\x01\x01\x00\x01a\x05v", "value runs past the end"),
        (b"\x01\x00\x00\x01a", "varint runs past the end"),  # the seq field missing
        (b"\x01\x01\x89\x00\x01a\x01v", "varint runs past the end"),  # expiry flagged, missing
        (b"\x01\x01\x89\x00\x01a\x01v\xff", "varint runs past the end"),  # expiry cut inside
        (b"\x01\x00\x00\x01a" + b"\xff" * 9 + b"\x02\x01v", "overflows 64 bits"),
        (b"\x01\x00\x00\x01a" + b"\xff" * 10 + b"\x01\x01v", "overflows 64 bits"),
        (b"\x00\x00\x00", "1 bytes after the last row"),
    ],
)
def test_malformed_rows_are_corruption_not_a_crash(encoded: bytes, match: str) -> None:
    assert _decoded_by_both(encoded).startswith("ValueError")
    with pytest.raises(CorruptionError, match=match):
        decode_root(_sealed(encoded), 3)


def test_hand_written_rows_decode() -> None:
    """count 1; per-row seqs; lead 0x80 | DELETE | null | expiry; shared 0, key "a";
    seq delta 2; zigzag(-2) = 3. Then a plain PUT in a one-seq commit: count 1,
    one seq, lead = shared 0, key "a", value "v"."""
    assert _decoded_by_both(b"\x01\x00\x8e\x00\x01a\x02\x03") == [(b"a", FIRST_SEQ + 2, DELETE, None, -2)]
    assert encode_rows_py([(b"a", FIRST_SEQ + 2, DELETE, None, -2)], FIRST_SEQ) == b"\x01\x00\x8e\x00\x01a\x02\x03"
    plain = [(b"a", FIRST_SEQ, PUT, b"v", None), (b"ab", FIRST_SEQ, PUT, b"w", None)]
    assert encode_rows_py(plain, FIRST_SEQ) == encode_rows(plain, FIRST_SEQ) == b"\x02\x01\x00\x01a\x01v\x01\x01b\x01w"
    assert _decoded_by_both(b"\x02\x01\x00\x01a\x01v\x01\x01b\x01w") == plain


def test_every_truncation_of_the_rows_is_corruption() -> None:
    encoded = encode_rows(SAMPLE, FIRST_SEQ)
    assert decode_root(_sealed(encoded), 3).rows == tuple(SAMPLE)
    for cut in range(len(encoded)):
        assert _decoded_by_both(encoded[:cut]).startswith("ValueError")
        with pytest.raises(CorruptionError, match="cannot parse"):
            decode_root(_sealed(encoded[:cut]), 3)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_compiled_and_python_decoders_agree_on_any_bytes(noise: bytes) -> None:
    encoded = encode_rows(SAMPLE, FIRST_SEQ)
    for data in (noise, encoded[: len(noise)] + noise, b"\x03" + noise):
        outcome = _decoded_by_both(data)
        if isinstance(outcome, str):
            with pytest.raises(CorruptionError, match="cannot parse"):
                decode_root(_sealed(data), 3)


def test_decoders_refuse_a_range_outside_the_bytes() -> None:
    for decoder in (decode_rows, decode_rows_py):
        with pytest.raises(ValueError, match="outside 3 bytes"):
            decoder(b"\x00\x00\x00", 2, 5, FIRST_SEQ)
        assert decoder(b"xy\x00\x01", 2, 4, FIRST_SEQ) == []
