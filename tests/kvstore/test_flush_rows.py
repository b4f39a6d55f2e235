"""The flush's Arrow batches: built in C, against the pure-Python twin, a
model of the retention rule, and the merge iterator's tuples that the flush
wrote before (the same rows, batches and SST contents)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore import flush_rows
from kvstore.flush_rows import flush_batches, flush_batches_py, flush_rows_py
from kvstore.format.rows import DELETE, MAX_SEQ, PUT, ROW_SCHEMA, rows_to_batch
from kvstore.format.sst import SSTReader, write_sst
from kvstore.iterators.merge import merge_rows
from kvstore.memtable import Memtable, apply_rows_py, merge_runs_py
from kvstore.objstore.memory import MemoryStore

# Keys around the compiled sort's 16-byte inline prefix: short ones, zero
# bytes (the prefix pads with zeros), long ones sharing 16+ bytes.
_keys = st.one_of(
    st.binary(min_size=1, max_size=2),
    st.binary(min_size=1, max_size=18).map(lambda b: b"\x00" * len(b)),
    st.binary(max_size=3).map(lambda b: b"k" * 16 + b),
    st.binary(min_size=15, max_size=17),
)


@st.composite
def _versions(draw):
    """Versions as the engine applies them: increasing seqs (from 1, or near
    2**64), each version a list of rows, one key possibly at several seqs,
    sorted into storage order or shuffled; maybe the last applied twice."""
    seq = draw(st.sampled_from([0, MAX_SEQ - 400]))
    versions = []
    for _ in range(draw(st.integers(0, 12))):
        rows = {}
        for key, step in draw(st.lists(st.tuples(_keys, st.integers(1, 3)), max_size=10)):
            row_seq = seq + step
            kind = draw(st.sampled_from([PUT, PUT, DELETE]))
            value = draw(st.binary(max_size=3)) if kind == PUT else None  # b"" included
            expire = draw(st.none() | st.integers(0, 10) | st.just(2**63 - 1))
            rows[(key, row_seq)] = (key, row_seq, kind, value, expire)
        seq += 3
        ordered = sorted(rows.values(), key=lambda row: (row[0], -row[1]))
        versions.append(ordered if draw(st.booleans()) else draw(st.permutations(ordered)))
    if versions and draw(st.booleans()):
        versions.append(list(versions[-1]))  # a follower re-applying a version
    return versions, seq


def _model(table: Memtable, low: int, high: int, floor: int) -> list:
    """The memtable's own view (newest first per key), cut to ``(low, high]``
    and to every version above the floor plus the newest at or below it."""
    kept, boundary = [], set()
    for row in table.iter_rows():
        if not low < row[1] <= high:
            continue
        if row[1] > floor:
            kept.append(row)
        elif row[0] not in boundary:
            kept.append(row)
            boundary.add(row[0])
    return kept


def _rows(batches: list[pa.RecordBatch]) -> list[tuple]:
    return [tuple(row.values()) for batch in batches for row in batch.to_pylist()]


def test_the_compiled_batches_are_built() -> None:
    assert flush_rows.IMPLEMENTATION == "cython", "cython_ext._memtable did not build (run make install)"


@settings(max_examples=200, deadline=None)
@given(_versions(), st.data(), st.integers(1, 5), st.sampled_from([1, 2, 5, flush_rows.BATCH_BYTES]))
def test_compiled_and_python_batches_agree_with_the_model_and_the_merge(generated, data, batch_rows, batch_bytes) -> None:
    versions, top = generated
    bottom = max(0, top - 40)
    low = data.draw(st.integers(bottom, top))
    high = data.draw(st.integers(low, top))
    floor = data.draw(st.integers(bottom, top))
    old_limits = flush_rows.BATCH_ROWS, flush_rows.BATCH_BYTES
    # Small batches: cut at every position, by rows and by key or value bytes.
    flush_rows.BATCH_ROWS, flush_rows.BATCH_BYTES = batch_rows, batch_bytes
    try:
        compiled_table = Memtable()
        python_table = Memtable(apply_rows_py, merge_runs_py, flush_batches_py)
        for rows in versions:
            compiled_table.apply(list(rows))
            python_table.apply(list(rows))
        compiled = list(compiled_table.flush_batches(low, high, floor))
        python = list(python_table.flush_batches(low, high, floor))
    finally:
        flush_rows.BATCH_ROWS, flush_rows.BATCH_BYTES = old_limits
    assert len(compiled) == len(python)
    for ours, twin in zip(compiled, python):
        assert ours.schema.equals(ROW_SCHEMA) and ours.equals(twin)
        assert 0 < ours.num_rows <= batch_rows
        keys, values = ours.column(0), ours.column(3)
        if ours.num_rows > 1:
            assert sum(map(len, keys.to_pylist())) <= batch_bytes
            assert sum(len(value or b"") for value in values.to_pylist()) <= batch_bytes
    expected = _model(compiled_table, low, high, floor)
    assert _rows(compiled) == expected
    # What the flush wrote before: the merge iterator in compaction mode over
    # one sorted source per version.
    sources = [sorted([row for row in rows if low < row[1]], key=lambda row: (row[0], -row[1])) for rows in versions]
    assert list(merge_rows(sources, mode="compaction", floor_seq=floor, snapshot_seq=high)) == expected


def test_the_sst_holds_what_the_merged_tuples_wrote() -> None:
    """A bulk load's shape: 1000-row versions of random keys, second
    versions of some keys, tombstones, several blocks."""
    rng = random.Random(5)
    order = list(range(6000))
    rng.shuffle(order)
    versions = []
    for seq, start in enumerate(range(0, len(order), 1000), start=1):
        rows = [(b"key%08d" % i, seq, PUT if i % 7 else DELETE, None if i % 7 == 0 else b"v" * (i % 300), None)
                for i in order[start:start + 1000]]
        versions.append(sorted(rows, key=lambda row: (row[0], -row[1])))
    versions.append([(b"key%08d" % i, 7, PUT, b"newer", 99) for i in range(0, 6000, 3)])
    table = Memtable()
    for rows in versions:
        table.apply(rows)
    batches = list(table.flush_batches(0, 7, 3))
    assert len(batches) == 1 and batches[0].num_rows == 8000
    tuples = list(merge_rows(versions, mode="compaction", floor_seq=3, snapshot_seq=7))
    store = MemoryStore()
    ours, theirs = write_sst(store, "sst/a.sst", batches), write_sst(store, "sst/b.sst", tuples)
    # The bytes depend on where the writer's input batches end (pyarrow
    # writes a block sliced from one batch apart from one it concatenated),
    # not the rows, blocks or index.
    same = ("row_count", "key_count", "delete_count", "min_key", "max_key", "min_seq", "max_seq", "block_count")
    assert {name: getattr(ours, name) for name in same} == {name: getattr(theirs, name) for name in same}
    assert ours.block_count > 1
    reader = SSTReader.open(store, ours.path, cache=None, size=ours.size, tail_size=ours.tail_size)
    assert list(reader.iter()) == tuples


def test_rows_the_c_code_does_not_take_go_to_the_twin() -> None:
    # A bytearray value (the memtable only checks keys) and a seq past
    # uint64: the compiled builder hands the whole call to the twin.
    versions = [
        [(b"a", 1, PUT, bytearray(b"x"), None), (b"b", 1, PUT, b"y", None)],
        [(b"a", 2, PUT, b"z", 5)],
    ]
    assert _rows(list(flush_batches(versions, 0, 2, 0))) == [
        (b"a", 2, PUT, b"z", 5), (b"a", 1, PUT, b"x", None), (b"b", 1, PUT, b"y", None)
    ]
    assert _rows(list(flush_batches(versions, 0, 2, 0))) == _rows(list(flush_batches_py(versions, 0, 2, 0)))
    as_tuples = [tuple(rows) for rows in versions[1:]]  # versions that are not lists: the twin too
    assert _rows(list(flush_batches(as_tuples, 0, 2, 0))) == [(b"a", 2, PUT, b"z", 5)]


@pytest.mark.parametrize(
    ("low", "high", "floor", "error", "match"),
    [
        (-1, 3, 0, ValueError, "low must be in"),
        (0, MAX_SEQ + 1, 0, ValueError, "high must be in"),
        (0, 3, "1", TypeError, "floor must be int"),
        (0, 3.0, 0, TypeError, "high must be int"),
    ],
)
def test_bad_bounds_are_named(low, high, floor, error, match) -> None:
    table = Memtable()
    table.apply([(b"a", 1, PUT, b"v", None)])
    with pytest.raises(error, match=match):
        table.flush_batches(low, high, floor)


def test_the_twin_keeps_the_last_applied_of_a_repeated_key_and_seq() -> None:
    first = [(b"a", 1, PUT, b"old", None)]
    again = [(b"a", 1, PUT, b"new", None)]
    table = Memtable()
    table.apply(first)
    table.apply(again)  # re-applied with another value: the key index keeps the later row
    assert table.get(b"a", 1) == again[0]
    assert flush_rows_py([first, again], 0, 1, 0) == again
    assert _rows(list(table.flush_batches(0, 1, 0))) == again
    assert rows_to_batch(again).equals(next(table.flush_batches(0, 1, 0)))
