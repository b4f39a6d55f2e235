"""Memtable: versions newest first, snapshot gets, chunked range iteration."""

from __future__ import annotations

import threading

import pytest
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


def _snapshot(table: Memtable) -> tuple:
    """Everything a reader or a flush can observe of ``table``."""
    return (list(table.iter_rows()), len(table), table.row_count, table.approx_bytes, table.version_count,
            [batch.to_pylist() for batch in table.flush_batches(0, 10**9, 0)])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.binary(min_size=1, max_size=2), max_size=12), max_size=12),
    st.lists(st.binary(min_size=1, max_size=2), min_size=1, max_size=12),
    st.booleans(),
)
def test_retract_last_leaves_the_memtable_as_before_the_apply(versions, last, scan_between) -> None:
    table = Memtable()
    seq = 0
    for keys in versions:
        seq += 1
        table.apply(sorted((key, seq, PUT, b"v%d" % seq, None) for key in set(keys)))
    before = _snapshot(table)
    seq += 1
    rows = sorted((key, seq, PUT, b"w", None) for key in set(last))
    table.apply(rows)
    if scan_between:
        list(table.iter_rows())  # may merge the runs, the apply's among them, into one
    table.retract_last(rows)
    assert _snapshot(table) == before
    table.check_invariants()
    for key in last:
        assert table.get(key, seq) == table.get(key, seq - 1)


def test_retract_takes_only_the_latest_apply() -> None:
    table = Memtable()
    first = [(b"a", 1, PUT, b"v", None)]
    table.apply(first)
    table.apply([(b"b", 2, PUT, b"v", None)])
    with pytest.raises(ValueError, match="latest apply"):
        table.retract_last(first)
    with pytest.raises(ValueError, match="latest apply"):
        table.retract_last([(b"b", 2, PUT, b"v", None)])  # equal rows, but not the list that was applied


def test_a_scan_goes_on_past_a_retracted_key() -> None:
    table = Memtable()
    table.apply([(b"%05d" % i, 1, PUT, b"v", None) for i in range(0, 4000, 2)])
    rows = [(b"%05d" % i, 2, PUT, b"w", None) for i in range(1, 4000, 2)]
    table.apply(rows)
    chunks = table.row_chunks()
    seen = list(next(chunks))  # the scan holds the runs, the retracted keys' run among them
    table.retract_last(rows)
    for chunk in chunks:
        seen += chunk
    assert [row[0] for row in seen if row[1] == 1] == [b"%05d" % i for i in range(0, 4000, 2)]
    assert all(row[0] < b"%05d" % 1024 for row in seen if row[1] == 2)  # only from the chunk taken before


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.binary(min_size=1, max_size=2), max_size=10), min_size=1, max_size=10),
    st.data(),
)
def test_a_prepared_trim_equals_the_trim_built_at_once(versions, data) -> None:
    table, twin = Memtable(), Memtable()  # the twin trims without preparing
    seq = 0

    def apply(keys: list[bytes]) -> tuple[list, list]:
        nonlocal seq
        seq += 1
        rows = sorted((key, seq, PUT, b"v%d" % seq, None) for key in set(keys))
        twin_rows = list(rows)
        table.apply(rows)
        twin.apply(twin_rows)
        return rows, twin_rows

    for keys in versions:
        apply(keys)
    trim_at = data.draw(st.integers(0, seq))
    table.prepare_without_upto(trim_at, data.draw(st.integers(trim_at, seq)))
    for keys in data.draw(st.lists(st.lists(st.binary(min_size=1, max_size=2), min_size=1, max_size=10), max_size=4)):
        rows, twin_rows = apply(keys)
        if data.draw(st.booleans()):  # applied ahead of its commit, which then did not land
            table.retract_last(rows)
            twin.retract_last(twin_rows)
            seq -= 1
    trimmed = table.without_upto(trim_at)
    assert _snapshot(trimmed) == _snapshot(twin.without_upto(trim_at))
    trimmed.check_invariants()


def test_a_trim_prepared_for_another_seq_is_not_used() -> None:
    table = Memtable()
    for seq in range(1, 5):
        table.apply([(b"k%d" % seq, seq, PUT, b"v", None)])
    table.prepare_without_upto(2, 4)
    assert [row[1] for row in table.without_upto(3).iter_rows()] == [4]
    assert [row[1] for row in table.without_upto(2).iter_rows()] == [3, 4]  # the prepared one was dropped, not reused


def test_a_scan_of_an_empty_range_never_merges_runs() -> None:
    """A probe of a range no run touches (the lease reaper's, every tick of a
    bulk load) answers from bisections; a scan that finds keys merges as before."""
    from kvstore.memtable import merge_runs

    merges: list[int] = []

    def counting_merge(runs: list[list[bytes]]) -> list[bytes]:
        merges.append(len(runs))
        return merge_runs(runs)

    table = Memtable(merge_impl=counting_merge)
    for seq in range(1, 41):  # 40 applies: 40 runs, more than a scan merges on the fly
        table.apply([(b"k%03d-%d" % (i, seq), seq, PUT, b"v", None) for i in range(0, 100, 7)])
    assert list(table.iter_rows(b"\x00lease/", b"\x00lease0")) == []
    assert list(table.iter_rows(b"zz")) == [] and list(table.iter_rows(None, b"a")) == []
    assert merges == []
    keys = [row[0] for row in table.iter_rows(b"k007", b"k008")]
    assert keys == sorted(b"k007-%d" % seq for seq in range(1, 41))
    assert merges == [40]
    table.check_invariants()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("apply"), st.lists(st.sampled_from([b"a1", b"a2", b"m1", b"m2", b"m3", b"z1", b"z2"]),
                                         min_size=1, max_size=3)),
    st.tuples(st.just("retract"), st.none()),
    st.tuples(st.just("probe"), st.none()),
    st.tuples(st.just("scan all"), st.none()),
), max_size=40))
def test_repeated_probes_of_one_range_see_every_change_of_the_runs(ops) -> None:
    """A probe of ``[m, n)`` repeated between applies, retractions and merging
    scans (more runs than a scan merges on the fly) always finds exactly the
    model's keys: what an earlier empty probe remembered never hides a key."""
    table = Memtable()
    seq = 0
    for i in range(10):  # ten runs outside the probed range: past _MAX_SCAN_RUNS from the start
        seq += 1
        table.apply([(b"b%02d" % i, seq, PUT, b"v", None)])
    applied: list[list[tuple[bytes, int, int, bytes, None]]] = []
    model: dict[bytes, int] = {b"b%02d" % i: 1 for i in range(10)}
    for op, keys in ops:
        if op == "apply":
            seq += 1
            rows = [(key, seq, PUT, b"v", None) for key in sorted(set(keys))]
            table.apply(rows)
            applied.append(rows)
            for key in set(keys):
                model[key] = model.get(key, 0) + 1
        elif op == "retract" and applied:
            rows = applied.pop()
            table.retract_last(rows)
            for row in rows:
                model[row[0]] -= 1
                if not model[row[0]]:
                    del model[row[0]]
            applied.clear()  # only the latest apply can be retracted
        elif op == "scan all":
            assert sorted({row[0] for row in table.iter_rows()}) == sorted(model)
        elif op == "probe":
            probed = sorted({row[0] for row in table.iter_rows(b"m", b"n")})
            assert probed == sorted(k for k in model if b"m" <= k < b"n")
        table.check_invariants()
    assert sorted({row[0] for row in table.iter_rows(b"m", b"n")}) == sorted(k for k in model if b"m" <= k < b"n")


def test_a_probe_after_the_last_run_was_retracted_and_replaced_sees_the_new_run() -> None:
    table = Memtable()
    for seq in range(1, 11):  # ten runs, none in [m, n)
        table.apply([(b"b%02d" % seq, seq, PUT, b"v", None)])
    outside = [(b"a1", 11, PUT, b"v", None)]
    table.apply(outside)
    assert list(table.iter_rows(b"m", b"n")) == []  # remembered: no key in these eleven runs
    table.retract_last(outside)
    table.apply([(b"m1", 11, PUT, b"v", None)])  # a new eleventh run, in range
    assert [row[0] for row in table.iter_rows(b"m", b"n")] == [b"m1"]
