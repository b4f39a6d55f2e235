"""Row tuples to Arrow for SST writing: the compiled converter and its pure-Python twin agree.

A test of :mod:`kvstore.format.sst_writer`'s internals: its private converters
(``_rows_to_arrays``, ``_rows_to_batch``, ``_rows_to_batch_py``) are what it compares.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.format import sst_writer
from kvstore.format.rows import DELETE, PUT, ROW_SCHEMA
from kvstore.format.sst import SSTReader, encode_sst
from kvstore.objstore.memory import MemoryStore

rows_to_arrays = sst_writer._rows_to_arrays  # internals: the compiled converter (None if not built)

_row = st.tuples(
    st.binary(min_size=1, max_size=12),
    st.integers(0, 2**64 - 1),
    st.sampled_from([PUT, DELETE]) | st.integers(0, 255),
    st.none() | st.binary(max_size=40),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)


def test_the_compiled_converter_is_built() -> None:
    assert rows_to_arrays is not None, "cython_ext._rowbatch did not build (run make install)"


@settings(max_examples=300, deadline=None)
@given(st.lists(_row, min_size=1, max_size=40))  # encode_sst never converts an empty chunk
def test_compiled_and_python_build_the_same_batch(rows) -> None:
    arrays = rows_to_arrays(rows)
    assert arrays is not None
    batch = pa.RecordBatch.from_arrays(list(arrays), schema=ROW_SCHEMA)
    batch.validate(full=True)
    expected = sst_writer._rows_to_batch_py(rows, 0)  # internals: the pure-Python twin
    assert batch.equals(expected)
    assert batch.to_pylist() == expected.to_pylist()
    assert [(r["value"] is None, r["expire_at_ms"] is None) for r in batch.to_pylist()] == [
        (row[3] is None, row[4] is None) for row in rows
    ]


class _Subclass(bytes):
    pass


@pytest.mark.parametrize(
    "bad",
    [
        (b"k", -1, PUT, b"v", None),  # seq below uint64
        (b"k", 2**64, PUT, b"v", None),  # seq above uint64
        (b"k", 1, 256, b"v", None),  # kind above uint8
        (b"k", 1, -1, b"v", None),
        (b"k", 1, PUT, b"v", 2**63),  # expiry outside int64
        (b"k", 1, PUT, b"v", -(2**63) - 1),
        (b"k", True, PUT, b"v", None),  # bool is not an int here
        (b"k", 1, PUT, "text", None),
        ("k", 1, PUT, b"v", None),
        (_Subclass(b"k"), 1, PUT, b"v", None),
        (b"k", 1, PUT, b"v"),  # four fields
        (b"k", 1.0, PUT, b"v", None),
    ],
)
def test_rows_the_compiled_path_does_not_take_raise_the_twins_error(bad) -> None:
    rows = [(b"a", 5, PUT, b"ok", None), bad]
    assert rows_to_arrays(rows) is None
    with pytest.raises((TypeError, ValueError)) as compiled_error:
        sst_writer._rows_to_batch(rows, 10)  # internals: the converter that falls back to the twin
    with pytest.raises((TypeError, ValueError)) as python_error:
        sst_writer._rows_to_batch_py(rows, 10)  # internals: the pure-Python twin
    assert type(compiled_error.value) is type(python_error.value)
    assert str(compiled_error.value) == str(python_error.value)


def test_an_sst_written_through_the_compiled_converter_reads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(b"k%05d" % i, 100 - i % 3, PUT if i % 4 else DELETE, None if i % 4 == 0 else b"v" * (i % 50), None if i % 5 else i)
            for i in range(3000)]
    rows.sort(key=lambda row: (row[0], -row[1]))
    compiled, info = encode_sst("sst/a.sst", rows, block_size=4096)
    monkeypatch.setattr(sst_writer, "_rows_to_arrays", None)  # internals: write without the compiled converter
    python, _ = encode_sst("sst/a.sst", rows, block_size=4096)
    assert compiled == python
    store = MemoryStore()
    store.put("sst/a.sst", compiled)
    assert list(SSTReader.open(store, "sst/a.sst", cache=None, size=info.size, tail_size=info.tail_size).iter()) == rows
