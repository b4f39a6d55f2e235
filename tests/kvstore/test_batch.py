"""WriteBatch and the argument checks shared by every write entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore import batch as batch_module
from kvstore.batch import put_pairs_py
from kvstore.batch import MAX_SUMMARY_BYTES, MAX_TTL_S, WriteBatch, check_key, check_limit, check_summary, expiry_from_ttl, scan_bounds
from kvstore.format.rows import DELETE, PUT


def test_last_operation_per_key_wins() -> None:
    batch = WriteBatch().put(b"a", b"1").delete(b"a").put(b"b", b"2")
    assert batch.mutations == {b"a": (DELETE, None, None), b"b": (PUT, b"2", None)}
    assert len(batch) == 2 and repr(batch) == "WriteBatch(2 keys)"


@pytest.mark.parametrize("key, error", [("s", TypeError), (b"", ValueError), (b"x" * (64 * 1024 + 1), ValueError), (None, TypeError)])
def test_bad_keys(key, error) -> None:
    with pytest.raises(error, match="key"):
        check_key(key)


def test_bytes_like_keys_become_bytes() -> None:
    assert check_key(bytearray(b"ab")) == b"ab" and type(check_key(memoryview(b"ab"))) is bytes


def test_limit() -> None:
    assert check_limit(None) is None and check_limit(0) == 0
    for bad in (-1, True, 1.5, "3"):
        with pytest.raises(ValueError, match="limit"):
            check_limit(bad)


def test_ttl_bounds() -> None:
    assert expiry_from_ttl(MAX_TTL_S) is not None
    for bad in (0, -1, MAX_TTL_S + 1, float("inf"), float("-inf"), float("nan")):
        with pytest.raises(ValueError, match="ttl"):
            expiry_from_ttl(bad)
    with pytest.raises(TypeError, match="ttl"):
        expiry_from_ttl("1")  # type: ignore[arg-type]


def test_summary_round_trips_and_limits() -> None:
    assert check_summary({"t": (1, 2)}) == {"t": [1, 2]}
    assert check_summary({"x": "y" * (MAX_SUMMARY_BYTES - 20)})
    with pytest.raises(ValueError, match="limit"):
        check_summary({"x": "y" * MAX_SUMMARY_BYTES})
    circular: dict = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="summary"):
        check_summary(circular)


def test_scan_bounds_combine_prefix_and_range() -> None:
    assert scan_bounds(None, None, b"ab") == (b"ab", b"ac")
    assert scan_bounds(b"abc", b"zz", b"ab") == (b"abc", b"ac")
    assert scan_bounds(None, None, b"\xff") == (b"\xff", None)


def _put_slow(key: object, value: object, ttl: object) -> object:
    """What WriteBatch.put stores, through the general checks (or the error type)."""
    from kvstore.batch import put_mutation

    stored: dict = {}
    try:
        stored[check_key(key)] = put_mutation(value, ttl)  # type: ignore[arg-type]  # the value is checked first
        return stored
    except (TypeError, ValueError) as exc:
        return type(exc)


@pytest.mark.parametrize(
    "key",
    [b"k", b"", b"x" * (64 * 1024), b"x" * (64 * 1024 + 1), bytearray(b"ba"), "s", None],
    ids=["short", "empty", "max", "too-long", "bytearray", "str", "none"],
)
@pytest.mark.parametrize("value", [b"", b"v", bytearray(b"bv"), "s", None], ids=["empty", "bytes", "bytearray", "str", "none"])
@pytest.mark.parametrize("ttl", [None, 5], ids=["no-ttl", "ttl"])
def test_put_fast_path_stores_what_the_checks_would(key, value, ttl) -> None:
    expected = _put_slow(key, value, ttl)
    try:
        got: object = WriteBatch().put(key, value, ttl).mutations
    except (TypeError, ValueError) as exc:
        got = type(exc)
    if ttl is not None and isinstance(expected, dict):
        # The expiry is "now + ttl": compare everything but its exact millisecond.
        assert isinstance(got, dict) and got.keys() == expected.keys()
        (g,), (e,) = got.values(), expected.values()
        assert g[:2] == e[:2] and abs(g[2] - e[2]) < 5000
    else:
        assert got == expected


# -- put_many and its compiled loop ---------------------------------------------

_plain_or_not = st.one_of(
    st.tuples(st.binary(min_size=1, max_size=6), st.binary(max_size=6)),  # plain: the compiled loop stores it
    st.tuples(st.binary(max_size=3).map(bytearray), st.binary(max_size=3)),  # bytes-like or empty key: put() decides
    st.tuples(st.binary(min_size=1, max_size=3), st.binary(max_size=3).map(bytearray)),
    st.lists(st.binary(min_size=1, max_size=3), min_size=2, max_size=2),  # a list, not a tuple
    st.tuples(st.binary(min_size=1, max_size=3)),  # one item
    st.tuples(st.text(max_size=2), st.binary(max_size=2)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_plain_or_not, max_size=25))
def test_compiled_put_pairs_and_its_twin_stop_at_the_same_item(items) -> None:
    outcomes = []
    for impl in (batch_module._put_pairs, put_pairs_py):  # internals: the compiled loop put_many uses, and its twin
        mutations: dict = {}
        pairs = iter(items)
        stops = []
        while (item := impl(mutations, pairs, PUT, 4, 4)) is not None:
            stops.append(item)
        outcomes.append((mutations, stops))
    assert outcomes[0] == outcomes[1]
    assert batch_module._put_pairs is not put_pairs_py, "cython_ext._writebatch did not build (run make install)"  # internals: built


# -- a commit group's rows in storage order ---------------------------------------

# Keys sharing long prefixes and differing in length, so the compiled sort's
# 16-byte fast path and its tie-breaks (memcmp past 16 bytes, then length) all run.
_group_keys = st.one_of(
    st.binary(min_size=1, max_size=20),
    st.sampled_from([b"a", b"ab", b"a" * 16, b"a" * 16 + b"\x00", b"a" * 17, b"a" * 16 + b"b" * 3, b"\x00" * 16, b"\xff" * 18]),
)
_group_mutations = st.dictionaries(
    _group_keys,
    st.one_of(st.tuples(st.just(PUT), st.binary(max_size=4), st.none() | st.integers(0, 2**40)), st.just((DELETE, None, None))),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_group_mutations, max_size=4))
def test_compiled_mutation_rows_match_the_twin_and_storage_order(mutations) -> None:
    groups = [(len(mutations) - index, m) for index, m in enumerate(mutations)]  # newest (highest seq) first
    expected = sorted(
        ((key, seq, kind, value, expire) for seq, m in groups for key, (kind, value, expire) in m.items()),
        key=lambda row: (row[0], -row[1]),
    )
    assert batch_module.mutation_rows_py(groups) == expected
    assert batch_module._mutation_rows_compiled is not None, "cython_ext._writebatch did not build"  # internals: built
    assert batch_module._mutation_rows_compiled(groups) == expected  # internals: the compiled builder


@pytest.mark.parametrize(
    "mutations, outcome",
    [
        ({"text": (PUT, b"v", None)}, [("text", 1, PUT, b"v", None)]),  # encode_rows refuses it later
        ({b"k": [PUT, b"v", None]}, [(b"k", 1, PUT, b"v", None)]),
        ({b"k": (PUT, b"v")}, ValueError),
    ],
)
def test_mutation_rows_leave_odd_rows_to_the_twin(mutations, outcome) -> None:
    assert batch_module._mutation_rows_compiled([(1, mutations)]) is None  # internals: declines, builds nothing
    if isinstance(outcome, list):
        assert batch_module.mutation_rows([(1, mutations)]) == outcome
    else:
        with pytest.raises(outcome):
            batch_module.mutation_rows([(1, mutations)])


def test_the_compiled_module_imports_first_without_a_cycle() -> None:
    # It once imported kvstore, whose import of it then found it half made
    # and fell back to the twin with a warning.
    code = "import warnings; warnings.simplefilter('error'); import cython_ext._writebatch, kvstore; print(kvstore.batch._put_pairs.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "cython_ext._writebatch"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.binary(max_size=4) | st.binary(max_size=4).map(bytearray)), max_size=40))
def test_put_many_is_put_per_pair(pairs) -> None:
    one_by_one = WriteBatch()
    for key, value in pairs:
        one_by_one.put(key, value)
    assert WriteBatch().put_many(pairs).mutations == one_by_one.mutations
    assert WriteBatch().put_many(iter(pairs)).mutations == one_by_one.mutations


def test_put_many_keeps_order_and_later_pairs_win() -> None:
    batch = WriteBatch().delete(b"a").put_many([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])
    assert batch.mutations == {b"a": (PUT, b"3", None), b"b": (PUT, b"2", None)}


@pytest.mark.parametrize(
    ("pairs", "error", "match"),
    [
        (5, TypeError, "iterable of \\(key, value\\) pairs, not int"),
        ([(b"a", b"1"), (b"b", b"2", b"3")], TypeError, "pairs, got"),
        ([(b"a", b"1"), b"xyz"], TypeError, "pairs, got"),
        ([(b"a", b"1"), (b"", b"2")], ValueError, "key must not be empty"),
        ([(b"a", b"1"), ("s", b"2")], TypeError, "key must be bytes"),
        ([(b"a", b"1"), (b"b", 2)], TypeError, "value must be bytes"),
    ],
)
def test_put_many_rejects_bad_pairs_after_keeping_the_good_ones(pairs, error, match) -> None:
    batch = WriteBatch()
    with pytest.raises(error, match=match):
        batch.put_many(pairs)
    assert batch.mutations == ({} if pairs == 5 else {b"a": (PUT, b"1", None)})


def test_put_many_applies_the_size_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_module, "MAX_VALUE_BYTES", 3)  # put() reads the same limit
    with pytest.raises(ValueError, match="limit"):
        WriteBatch().put_many([(b"k", b"1234")])
