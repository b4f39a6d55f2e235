"""Memtable: versions newest first, snapshot gets, chunked range iteration."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.format.rows import DELETE, PUT
from kvstore.memtable import Memtable


def test_get_returns_newest_visible_version() -> None:
    table = Memtable()
    table.apply([(b"k", 1, PUT, b"v1", None)])
    table.apply([(b"k", 5, PUT, b"v5", None)])
    table.apply([(b"k", 9, DELETE, None, None)])
    assert table.get(b"k", 0) is None
    assert table.get(b"k", 4)[3] == b"v1"
    assert table.get(b"k", 8)[3] == b"v5"
    assert table.get(b"k", 9)[2] == DELETE
    assert table.get(b"other", 100) is None
    table.check_invariants()


def test_batch_in_storage_order_with_two_versions_of_a_key() -> None:
    table = Memtable()
    table.apply([(b"k", 7, PUT, b"new", None), (b"k", 6, PUT, b"old", None)])
    assert [row[1] for row in table.iter_rows()] == [7, 6]
    table.check_invariants()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.booleans()), max_size=200),
       st.binary(max_size=2), st.binary(max_size=2), st.booleans())
def test_iter_rows_matches_a_sorted_model(ops, start, end, reverse) -> None:
    table = Memtable()
    model: dict[bytes, list[int]] = {}
    for seq, (key, is_put) in enumerate(ops, start=1):
        table.apply([(key, seq, PUT if is_put else DELETE, b"v" if is_put else None, None)])
        model.setdefault(key, []).insert(0, seq)
    lo, hi = (start or None), (end or None)
    keys = sorted(k for k in model if (lo is None or k >= lo) and (hi is None or k < hi))
    if reverse:
        keys.reverse()
    expected = [(k, s) for k in keys for s in model[k]]
    assert [(row[0], row[1]) for row in table.iter_rows(lo, hi, reverse)] == expected
    table.check_invariants()


def test_scan_while_writing_sees_each_key_once() -> None:
    table = Memtable()
    table.apply([(b"%06d" % i, 1, PUT, b"v", None) for i in range(0, 20000, 2)])
    stop = threading.Event()

    def writer() -> None:
        seq = 2
        i = 1
        while not stop.is_set() and i < 20000:
            table.apply([(b"%06d" % i, seq, PUT, b"w", None)])
            i += 2
            seq += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(5):
            keys = [row[0] for row in table.iter_rows() if row[1] == 1]
            assert keys == sorted(set(keys)) and len(keys) == 10000
    finally:
        stop.set()
        thread.join()
    table.check_invariants()


# Versions of random rows: each a list of (key, commits-ago) pairs; a pair
# becomes a row of the version's first seq + commits-ago (several commits of
# one version may write one key), in random order unless ``sort`` says so.
_versions = st.lists(
    st.tuples(
        st.lists(st.tuples(st.binary(min_size=1, max_size=2), st.integers(0, 2)), min_size=1, max_size=12),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_versions, st.data())
def test_version_rows_are_sorted_lists_of_exactly_the_rows_between_two_seqs(versions, data) -> None:
    table = Memtable()
    seq = 0
    for pairs, sort in versions:
        rows = {(key, seq + 1 + ago): (key, seq + 1 + ago, PUT, b"v", None) for key, ago in pairs}
        ordered = sorted(rows.values(), key=lambda row: (row[0], -row[1]))
        table.apply(ordered if sort else list(reversed(ordered)))
        seq += 3  # each version owns three seqs
    low = data.draw(st.integers(0, seq))
    high = data.draw(st.integers(low, seq))
    lists = table.version_rows(low, high)
    for rows in lists:
        assert rows == sorted(rows, key=lambda row: (row[0], -row[1]))
        assert all(row[1] > low for row in rows)
        assert all(a[:2] != b[:2] for a, b in zip(rows, rows[1:]))
    got = sorted((row for rows in lists for row in rows if row[1] <= high), key=lambda row: (row[0], -row[1]))
    assert got == [row for row in table.iter_rows() if low < row[1] <= high]
