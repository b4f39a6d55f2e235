"""scan_kv_batches / scan_kv_pairs (the compiled window merge over cached
blocks) against the row path (scan_rows), the pure-Python twin of the merge
and a model, on random layered stores.

Partly a test of the module's internals: the twin is fed the windows of the
private ``_windows``, as the compiled merge is."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layered_store import ABSENT, KEY_POOL, NOW_MS, build_layers, model_row, rows_of, versions

from kvstore.format.rows import MAX_SEQ, PUT
from kvstore.iterators.arrow_scan import (  # internals: _windows, the windows the Python twin is fed
    IMPLEMENTATION,
    KV_SCHEMA,
    _windows,
    merge_segments,
    merge_segments_py,
    scan_kv_batches,
    scan_kv_pairs,
)
from kvstore.reader import now_ms, scan_rows, visible_value

BOUNDS = sorted(set(KEY_POOL + ABSENT))


def _pairs(batches: list[pa.RecordBatch]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for batch in batches for k, v in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())]


@settings(max_examples=100, deadline=None)
@given(
    history=versions,
    cut_fractions=st.lists(st.floats(0, 1), max_size=4),
    run_files=st.integers(1, 4),
    block_size=st.sampled_from([1, 64, 4096]),
    batch_rows=st.integers(1, 7),
    start=st.none() | st.sampled_from(BOUNDS),
    end=st.none() | st.sampled_from(BOUNDS),
)
def test_arrow_scan_matches_row_scan_and_model(
    history: list[dict], cut_fractions: list[float], run_files: int, block_size: int, batch_rows: int,
    start: bytes | None, end: bytes | None,
) -> None:
    cuts = sorted({int(f * len(history)) for f in cut_fractions}) or [len(history)]
    layers = build_layers(history, cuts, run_files, block_size, 1 << 20, "cython")
    rows = rows_of(history)
    for snapshot in sorted({0, 1, len(history) // 2, len(history), MAX_SEQ}):
        batches = list(scan_kv_batches(layers, snapshot, start, end, batch_rows, NOW_MS))
        assert all(batch.schema == KV_SCHEMA and 0 < batch.num_rows <= batch_rows for batch in batches)
        assert all(batch.num_rows == batch_rows for batch in batches[:-1])
        got = _pairs(batches)
        assert got == _model(rows, snapshot, start, end, NOW_MS)
        # The row path reads the wall clock: compare both at (about) now.
        clock = now_ms()
        via_rows = [(row[0], row[3]) for row in scan_rows(layers, snapshot, start, end)]
        assert via_rows == _model(rows, snapshot, start, end, clock)
        assert _pairs(list(scan_kv_batches(layers, snapshot, start, end, batch_rows, clock))) == via_rows


def _model(rows: list, snapshot: int, start: bytes | None, end: bytes | None, clock: int) -> list[tuple[bytes, bytes]]:
    model = []
    for key in sorted({row[0] for row in rows}):
        if (start is None or key >= start) and (end is None or key < end):
            value = visible_value(model_row(rows, key, snapshot), clock)
            if value is not None:
                model.append((key, value))
    return model


def test_long_scan_spans_many_windows() -> None:
    # 15,000 versions of 2,143 keys in 3 sources: several windows, keys straddling them.
    history = [{b"%05d" % ((i * 7 + j) % 2500): (1, b"v%d" % i, None) for j in range(50)} for i in range(300)]
    layers = build_layers(history, [100, 200], 3, 512, 1 << 24, "cython")
    rows = rows_of(history)
    expected = []
    for key in sorted({row[0] for row in rows}):
        expected.append((key, model_row(rows, key, MAX_SEQ)[3]))  # type: ignore[index]
    batches = list(scan_kv_batches(layers, MAX_SEQ, None, None, 1000, NOW_MS))
    assert _pairs(batches) == expected
    assert len(expected) == 2143
    assert [batch.num_rows for batch in batches] == [1000, 1000, 143]
    prefix = list(itertools.islice(scan_kv_batches(layers, MAX_SEQ, b"01000", b"01010", 3, NOW_MS), 2))
    assert _pairs(prefix) == expected[1000:1006]


@settings(max_examples=60, deadline=None)
@given(
    history=versions,
    cut_fractions=st.lists(st.floats(0, 1), max_size=3),
    block_size=st.sampled_from([1, 64, 4096]),
    start=st.none() | st.sampled_from(BOUNDS),
    end=st.none() | st.sampled_from(BOUNDS),
    first_window=st.integers(1, 5),
    limit=st.none() | st.integers(0, 12),
)
def test_pairs_and_python_twin_agree(
    history: list[dict], cut_fractions: list[float], block_size: int, start: bytes | None, end: bytes | None,
    first_window: int, limit: int | None,
) -> None:
    cuts = sorted({int(f * len(history)) for f in cut_fractions}) or [len(history)]
    fast = build_layers(history, cuts, 2, block_size, 1 << 20, "cython")
    slow = build_layers(history, cuts, 2, block_size, 1 << 20, "python")
    rows = rows_of(history)
    for snapshot in sorted({0, len(history) // 2, MAX_SEQ}):
        expected = _model(rows, snapshot, start, end, NOW_MS)
        assert list(scan_kv_pairs(fast, snapshot, start, end, NOW_MS, first_window)) == expected
        assert list(scan_kv_pairs(fast, snapshot, start, end, NOW_MS, first_window, limit)) == expected[:limit]
        windows = list(_windows(slow, snapshot, start, end, first_window))
        assert [p for parts in windows for p in merge_segments_py(parts, snapshot, NOW_MS, True)] == expected
        arrays = [merge_segments_py(parts, snapshot, NOW_MS, False) for parts in windows]
        assert [(k, v) for keys, values in arrays for k, v in zip(keys.to_pylist(), values.to_pylist())] == expected


def test_merge_rejects_unknown_segments() -> None:
    with pytest.raises(TypeError, match="BlockViews or lists"):
        merge_segments([[("not a segment", 0, 1)]], MAX_SEQ, NOW_MS, True)


def test_the_compiled_merge_is_selected_when_built() -> None:
    assert IMPLEMENTATION == "cython"


# Keys of 0-20 bytes over a few byte values (so they share long prefixes,
# differ past the first 8 or 16 bytes, and carry bytes >= 0x80): the compiled
# merge compares keys 8 bytes at a time.
_merge_keys = st.lists(st.sampled_from([b"\x00", b"a", b"\x7f", b"\x80", b"\xff"]), max_size=20).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_merge_keys, max_size=15), min_size=1, max_size=4))
def test_the_compiled_merge_orders_keys_like_bytes(key_lists: list[list[bytes]]) -> None:
    """List sources (the memtable's form) with overlapping keys: the compiled
    merge and its twin agree with bytes order, newest version winning."""
    sources = []
    for index, keys in enumerate(key_lists):
        rows = [(key, 10 + index, PUT, b"%d" % index, None) for key in sorted(set(keys))]
        sources.append([(rows, 0, len(rows))] if rows else [])
    expected = {}
    for index, keys in enumerate(key_lists):
        for key in keys:
            expected[key] = b"%d" % index  # the highest index holds the newest seq
    assert merge_segments(sources, MAX_SEQ, NOW_MS, True) == merge_segments_py(sources, MAX_SEQ, NOW_MS, True)
    assert merge_segments(sources, MAX_SEQ, NOW_MS, True) == sorted(expected.items())
