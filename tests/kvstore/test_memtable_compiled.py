"""The memtable's compiled insert against its pure-Python twin, and the
run-based key order against a sorted model (many runs, snapshots, reverse).

Partly a test of the memtable's internals: its scan chunk size and its runs."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore import memtable as memtable_module
from kvstore.format.rows import DELETE, PUT
from kvstore.memtable import Memtable, apply_rows, apply_rows_py, merge_runs, merge_runs_py

_keys = st.binary(min_size=1, max_size=2)


def test_the_compiled_insert_is_built() -> None:
    assert apply_rows is not apply_rows_py, "cython_ext._memtable did not build (run make install)"
    assert merge_runs is not merge_runs_py


def test_the_compiled_insert_hides_rows_from_the_cyclic_gc() -> None:
    """Rows and version tuples hold only bytes, ints and None: the compiled
    insert untracks them, so a collection during a bulk load never walks the
    memtable (the twin leaves that to CPython's lazy untracking)."""
    table = Memtable(apply_impl=apply_rows)
    table.apply([(b"a", 1, PUT, b"v", None), (b"b", 1, PUT, b"v", 5)])
    table.apply([(b"a", 2, DELETE, None, None)])
    table.apply([(b"a", 2, PUT, b"again", None)])  # the same version again: the rare re-insert path
    rows = [table.get(b"a", 2), table.get(b"a", 1), table.get(b"b", 9)]
    assert [row[3] for row in rows] == [b"again", b"v", b"v"]
    assert not any(gc.is_tracked(row) for row in rows)
    assert [r[3] for r in table.iter_rows()] == [b"again", b"v", b"v"]
    # The version tuples holding them are untracked too: the cyclic GC, which
    # sees only tracked containers, finds no tuple referring to a row.
    assert not any(type(holder) is tuple for row in rows for holder in gc.get_referrers(row))


# Keys around the compiled merge's 16-byte inline prefix: short ones, zero
# bytes (the prefix pads with zeros), and long ones sharing 16+ bytes.
_merge_keys = st.one_of(
    st.binary(min_size=1, max_size=3),
    st.binary(min_size=1, max_size=20).map(lambda b: b"\x00" * len(b)),
    st.binary(max_size=4).map(lambda b: b"k" * 16 + b),
    st.binary(min_size=14, max_size=18),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_merge_keys, max_size=20), max_size=12))
def test_compiled_and_python_run_merges_agree(lists) -> None:
    runs = [sorted(set(keys)) for keys in lists]
    assert merge_runs(runs) == merge_runs_py(runs) == sorted(key for run in runs for key in run)


def test_the_compiled_merge_rejects_keys_that_are_not_bytes() -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        merge_runs([[b"a"], ["b"]])


@st.composite
def _versions(draw, max_versions: int = 40):
    """Versions as the engine applies them: increasing seqs, each a list of rows
    (one key may repeat with several seqs), sorted or shuffled."""
    versions = []
    seq = 0
    for _ in range(draw(st.integers(0, max_versions))):
        rows = []
        for key in draw(st.lists(_keys, max_size=8)):
            seq += 1
            kind = draw(st.sampled_from([PUT, DELETE]))
            expire = draw(st.none() | st.integers(0, 10))
            rows.append((key, seq, kind, b"v%d" % seq if kind == PUT else None, expire))
        if draw(st.booleans()):
            rows.sort(key=lambda row: (row[0], -row[1]))  # storage order, as the committer sends
        else:
            rows = draw(st.permutations(rows))
        versions.append(list(rows))
    return versions


@settings(max_examples=200, deadline=None)
@given(_versions(), st.booleans())
def test_compiled_and_python_inserts_agree(versions, replay_last) -> None:
    compiled: dict = {}
    python: dict = {}
    if replay_last and versions:
        versions.append(list(versions[-1]))  # re-applying a version is idempotent
    for rows in versions:
        assert apply_rows(compiled, list(rows), 120) == apply_rows_py(python, list(rows), 120)
        assert compiled == python


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_merge_keys, st.one_of(st.integers(0, 2**20), st.integers(2**62, 2**64 - 1))), max_size=25),
)
def test_compiled_and_python_inserts_agree_on_key_order_and_seqs_past_int64(pairs) -> None:
    # Keys around the 16-byte prefix and with shared prefixes (the compiled
    # order check compares bytes in C); seqs up to 2**64 - 1 (its C max_seq
    # gives way to Python ints).
    rows = [(key, seq, PUT, b"v", None) for key, seq in dict(pairs).items()]
    compiled: dict = {}
    python: dict = {}
    assert apply_rows(compiled, list(rows), 120) == apply_rows_py(python, list(rows), 120)
    assert compiled == python


@pytest.mark.parametrize("impl", [apply_rows, apply_rows_py], ids=["compiled", "python"])
@pytest.mark.parametrize("row", [[b"k", 1, PUT, b"v", None], ("k", 1, PUT, b"v", None), (b"k", 1, PUT)])
def test_bad_rows_are_a_type_error(impl, row) -> None:
    with pytest.raises(TypeError, match="memtable row"):
        impl({}, [(b"a", 1, PUT, b"v", None), row], 120)


def _model_rows(versions, upto_seq: int = -1) -> dict[bytes, list]:
    model: dict[bytes, list] = {}
    for rows in versions:
        for row in rows:
            if row[1] > upto_seq:
                model.setdefault(row[0], []).append(row)
    return {key: sorted(rows, key=lambda row: -row[1]) for key, rows in model.items()}


def _expected_scan(model, lo, hi, reverse):
    keys = sorted(k for k in model if (lo is None or k >= lo) and (hi is None or k < hi))
    if reverse:
        keys.reverse()
    return [row for key in keys for row in model[key]]


@settings(max_examples=80, deadline=None)
@given(_versions(), st.none() | _keys, st.none() | _keys, st.booleans(), st.integers(0, 400), st.integers(1, 64))
def test_memtable_matches_a_model_with_many_runs(versions, lo, hi, reverse, snapshot, chunk) -> None:
    old_chunk = memtable_module._SCAN_CHUNK  # internals: the scan's chunk size
    memtable_module._SCAN_CHUNK = chunk  # internals: small chunks exercise the multi-run merge steps
    try:
        for impl, merge in ((apply_rows, merge_runs), (apply_rows_py, merge_runs_py)):
            table = Memtable(impl, merge)
            for rows in versions:
                table.apply(rows)
            table.check_invariants()
            model = _model_rows(versions)
            assert len(table) == len(model)
            assert list(table.iter_rows(lo, hi, reverse)) == _expected_scan(model, lo, hi, reverse)
            assert [row for rows in table.row_chunks(lo, hi, reverse) for row in rows] == _expected_scan(
                model, lo, hi, reverse
            )
            for key, rows in model.items():
                visible = [row for row in rows if row[1] <= snapshot]
                assert table.get(key, snapshot) == (visible[0] if visible else None)
            table.check_invariants()  # a scan may have merged and published runs
    finally:
        memtable_module._SCAN_CHUNK = old_chunk  # internals: restored


@settings(max_examples=80, deadline=None)
@given(_versions(), st.data())
def test_without_upto_keeps_newer_rows_and_leaves_the_old_memtable_alone(versions, data) -> None:
    table = Memtable()
    for rows in versions:
        table.apply(rows)
    all_seqs = [row[1] for rows in versions for row in rows]
    cut = data.draw(st.integers(0, max(all_seqs, default=0)))
    before = list(table.iter_rows())
    fresh = table.without_upto(cut)
    fresh.check_invariants()
    assert list(fresh.iter_rows()) == _expected_scan(_model_rows(versions, cut), None, None, False)
    assert list(table.iter_rows()) == before  # readers of the old memtable see no change
    assert fresh.row_count == sum(1 for rows in versions for row in rows if row[1] > cut)


def test_a_scan_keeps_the_runs_it_started_with() -> None:
    """Keys applied after a scan began are not in it (their seqs are above any
    snapshot the scanner can hold), and the scan never sees a key twice."""
    table = Memtable()
    for i in range(20):  # more runs than a scan merges on the fly
        table.apply([(b"k%03d" % (2 * i), i + 1, PUT, b"v", None)])
    scan = table.iter_rows()
    first = next(scan)
    for i in range(20):
        table.apply([(b"k%03d" % (2 * i + 1), 100 + i, PUT, b"w", None)])
    seen = [first[0]] + [row[0] for row in scan]
    assert seen == [b"k%03d" % (2 * i) for i in range(20)]
    assert [row[0] for row in table.iter_rows()] == [b"k%03d" % i for i in range(40)]
    table.check_invariants()


def test_scans_merge_runs_once_and_publish_them() -> None:
    table = Memtable()
    for i in range(memtable_module._MAX_SCAN_RUNS * 3):  # internals: more runs than a scan merges on the fly
        table.apply([(b"%04d" % (i * 7 % 100), i + 1, PUT, b"v", None)])
    assert len(table._runs) > memtable_module._MAX_SCAN_RUNS  # internals: the runs before a scan
    keys = [row[0] for row in table.iter_rows()]
    assert keys == sorted(set(keys))
    assert len(table._runs) == 1  # internals: the scan published its merge
    table.check_invariants()
