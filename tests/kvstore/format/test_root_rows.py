"""The root file's delta rows: compiled encoder and its pure-Python twin agree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.errors import CorruptionError
from kvstore.format import root as root_module
from kvstore.format.root import RootFile, decode_root, encode_root, encode_rows, encode_rows_py
from kvstore.format.rows import DELETE, PUT

FIRST_SEQ = 1000

_row = st.tuples(
    st.binary(min_size=1, max_size=12),
    st.integers(FIRST_SEQ, FIRST_SEQ + 2**32 - 1),
    st.sampled_from([PUT, DELETE]),
    st.none() | st.binary(max_size=40),
    st.none() | st.integers(-(2**63), 2**63 - 1).filter(lambda e: e != -1),  # -1 encodes "never"
)


def test_the_compiled_encoder_is_built() -> None:
    assert encode_rows is not encode_rows_py, "cython_ext._rootrows did not build (run make install)"


@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=30))
def test_compiled_and_python_encoders_write_the_same_bytes(rows) -> None:
    assert encode_rows(rows, FIRST_SEQ) == encode_rows_py(rows, FIRST_SEQ)


@settings(max_examples=100, deadline=None)
@given(st.lists(_row, max_size=30))
def test_rows_round_trip_through_a_root_file(rows) -> None:
    rows.sort(key=lambda row: (row[0], -row[1]))
    root = RootFile(
        version=3, parent=2, first_seq=FIRST_SEQ, last_seq=FIRST_SEQ, writer_id="w", writer_clock_ms=1,
        commit_id="c", tree=None, flushed_upto=0, delta=None, rows=tuple(rows),
    )
    data = encode_root(root)
    assert encode_root(root, encode_rows(rows, FIRST_SEQ)) == data
    assert decode_root(data, 3).delta_rows() == rows


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ((b"k", FIRST_SEQ - 1, PUT, b"v", None), "does not fit format 2"),
        ((b"k", FIRST_SEQ + 2**32, PUT, b"v", None), "does not fit format 2"),
        ((b"k", FIRST_SEQ, 3, b"v", None), "does not fit format 2"),
        ((b"k", FIRST_SEQ, PUT, b"v", 2**63), "outside int64"),
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
    sealed = root_module.seal_root(b"LKVROOT2", header, encoded_rows)
    assert sealed == root_module.seal_root_py(b"LKVROOT2", header, encoded_rows)
    assert sealed[12 : 12 + len(header)] == header and sealed[12 + len(header) : -4] == encoded_rows


def test_a_root_written_by_the_compiled_seal_reads_back() -> None:
    rows = [(b"k%04d" % i, FIRST_SEQ, PUT, b"v" * (i % 50), None) for i in range(500)]
    root = RootFile(version=3, parent=2, first_seq=FIRST_SEQ, last_seq=FIRST_SEQ, writer_id="w", writer_clock_ms=1,
                    commit_id="c", tree=None, flushed_upto=0, delta=None, rows=tuple(rows))
    data = encode_root(root)
    assert decode_root(data, 3).rows == tuple(rows)
    with pytest.raises(CorruptionError, match="checksum"):
        decode_root(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:], 3)
