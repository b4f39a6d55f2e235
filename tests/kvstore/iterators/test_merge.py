"""Tests for the k-way merge iterator (kvstore.iterators.merge).

Every test runs against both implementations, the compiled ``cython_ext._merge``
and the pure-Python reference ``kvstore.iterators.merge_ref``. The property
tests compare each with :func:`model`, a brute-force dict-based statement of
the contract, on random sources; the example tests pin down one rule each.
A test of the merge's internals too: it imports the private compiled module.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
import cython_ext._merge as compiled  # internals: the compiled extension itself, beside its Python reference
from kvstore.format import rows as row_format
from kvstore.format.rows import DELETE, MAX_SEQ, PUT, Row
from kvstore.iterators import merge as public_merge
from kvstore.iterators import merge_ref

MergeFn = Callable[..., Iterator[Row]]
IMPLEMENTATIONS = pytest.mark.parametrize(
    "merge", [compiled.merge_rows, merge_ref.merge_rows], ids=["cython", "python"]
)
NOW = 1_000


def put(key: bytes, seq: int, value: bytes = b"v", expire_at_ms: int | None = None) -> Row:
    """A PUT row."""
    return (key, seq, PUT, value, expire_at_ms)


def delete(key: bytes, seq: int) -> Row:
    """A tombstone."""
    return (key, seq, DELETE, None, None)


def model(sources: list[list[Row]], *, now_ms: int, snapshot_seq: int = MAX_SEQ, reverse: bool = False,
          start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
          mode: str = "read", floor_seq: int = 0, last_run: bool = False) -> list[Row]:
    """The contract by brute force: collect every visible version in a dict, then apply the rules."""
    versions: dict[bytes, dict[int, Row]] = {}
    for source in sources:  # newest source first, so setdefault keeps its copy of a (key, seq)
        for row in source:
            key, seq = row[0], row[1]
            in_range = ((start is None or key >= start) and (end is None or key < end)
                        and (prefix is None or key.startswith(prefix)))
            if in_range and seq <= snapshot_seq:
                versions.setdefault(key, {}).setdefault(seq, row)

    def hidden(row: Row) -> bool:
        return row[2] == DELETE or (row[4] is not None and row[4] <= now_ms)

    out = []
    for key in sorted(versions, reverse=reverse):
        newest_first = [versions[key][seq] for seq in sorted(versions[key], reverse=True)]
        if mode == "read":
            if not hidden(newest_first[0]):
                out.append(newest_first[0])
            continue
        for row in newest_first:
            if row[1] > floor_seq:
                out.append(row)
            else:  # the boundary version, then nothing older
                if not (last_run and hidden(row)):
                    out.append(row)
                break
    return out


# Keys from a tiny alphabet, behind prefixes of 0, 7, 8, 16 and 17 bytes, so
# that keys collide, are prefixes of each other, and straddle the 8-byte words
# the compiled comparison works in.
_tails = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0xFE, 0xFF]), max_size=3).map(bytes)
key_st = st.builds(bytes.__add__, st.sampled_from([b"", b"", b"", b"k" * 7, b"k" * 8, b"k" * 16, b"k" * 17]), _tails)
seq_st = st.integers(0, 12) | st.sampled_from([2**31, 2**63, MAX_SEQ])  # small, so that seqs collide
row_st = st.one_of(
    st.builds(put, key_st, seq_st, st.binary(max_size=2), st.none() | st.integers(0, 12)),
    st.builds(delete, key_st, seq_st),
)
bound_st = st.none() | key_st


def sort_source(rows: Iterable[Row], reverse: bool) -> list[Row]:
    """Storage order (key asc, seq desc), or key desc with seq still desc; one row per (key, seq)."""
    unique = {(row[0], row[1]): row for row in rows}
    if reverse:
        return sorted(unique.values(), key=lambda row: (row[0], row[1]), reverse=True)
    return sorted(unique.values(), key=lambda row: (row[0], -row[1]))


def as_container(rows: list[Row], kind: str) -> Iterable[Row]:
    """The same rows as a list (the fast path), a tuple, an iterator or a generator."""
    if kind == "tuple":
        return tuple(rows)
    if kind == "iterator":
        return iter(rows)
    if kind == "generator":
        return (row for row in rows)
    return rows


@st.composite
def scenarios(draw: st.DrawFn, compaction: bool, max_sources: int = 6, max_rows: int = 12) -> dict[str, Any]:
    """Random sorted sources (each as a random kind of iterable) and merge arguments."""
    reverse = False if compaction else draw(st.booleans())
    raw = draw(st.lists(st.lists(row_st, max_size=max_rows), max_size=max_sources))
    kinds = draw(st.lists(st.sampled_from(["list", "tuple", "iterator", "generator"]),
                          min_size=len(raw), max_size=len(raw)))
    kwargs: dict[str, Any] = {
        "snapshot_seq": draw(st.integers(0, 14) | st.just(MAX_SEQ)),
        "start": draw(bound_st), "end": draw(bound_st), "prefix": draw(bound_st),
        "now_ms": draw(st.integers(0, 13)),
    }
    if compaction:
        kwargs.update(mode="compaction", floor_seq=draw(st.integers(0, 14)), last_run=draw(st.booleans()))
    else:
        kwargs["reverse"] = reverse
    sources = [sort_source(source, reverse) for source in raw]
    return {"sources": sources, "kinds": kinds, "kwargs": kwargs}


def run(merge: MergeFn, scenario: dict[str, Any]) -> list[Row]:
    """Merge a scenario's sources, fresh iterables each time."""
    containers = [as_container(rows, kind) for rows, kind in zip(scenario["sources"], scenario["kinds"])]
    return list(merge(containers, **scenario["kwargs"]))


@IMPLEMENTATIONS
@settings(max_examples=400, deadline=None)
@given(scenario=scenarios(compaction=False))
def test_read_matches_model(merge: MergeFn, scenario: dict[str, Any]) -> None:
    assert run(merge, scenario) == model(scenario["sources"], **scenario["kwargs"])


@IMPLEMENTATIONS
@settings(max_examples=400, deadline=None)
@given(scenario=scenarios(compaction=True))
def test_compaction_matches_model(merge: MergeFn, scenario: dict[str, Any]) -> None:
    assert run(merge, scenario) == model(scenario["sources"], **scenario["kwargs"])


@settings(max_examples=100, deadline=None)
@given(scenario=st.booleans().flatmap(lambda c: scenarios(compaction=c, max_sources=12, max_rows=60)))
def test_implementations_agree_on_larger_inputs(scenario: dict[str, Any]) -> None:
    # Up to 12 sources: loser trees of 1 to 16 leaves, some of them padding.
    expected = model(scenario["sources"], **scenario["kwargs"])
    assert run(compiled.merge_rows, scenario) == expected
    assert run(merge_ref.merge_rows, scenario) == expected


@IMPLEMENTATIONS
def test_duplicate_key_seq_is_kept_once_from_the_lowest_source(merge: MergeFn) -> None:
    memtable_copy, flushed_copy = put(b"k", 5, b"memtable"), put(b"k", 5, b"flushed")
    sources = [[memtable_copy], [flushed_copy], [put(b"k", 5, b"older")]]
    assert [row is memtable_copy for row in merge(sources, now_ms=NOW)] == [True]
    compacted = list(merge(sources, now_ms=NOW, mode="compaction"))
    assert len(compacted) == 1 and compacted[0] is memtable_copy


@IMPLEMENTATIONS
def test_equal_keys_resolve_by_seq_not_by_source(merge: MergeFn) -> None:
    newer_in_older_source = put(b"k", 9, b"new")
    assert list(merge([[put(b"k", 3, b"old")], [newer_in_older_source]], now_ms=NOW)) == [newer_in_older_source]


@IMPLEMENTATIONS
def test_tombstone_hides_the_key_without_resurrecting_older_versions(merge: MergeFn) -> None:
    sources = [[delete(b"a", 7)], [put(b"a", 5), put(b"b", 4)], [put(b"a", 1)]]
    assert list(merge(sources, now_ms=NOW)) == [put(b"b", 4)]
    assert list(merge(sources, now_ms=NOW, snapshot_seq=6)) == [put(b"a", 5), put(b"b", 4)]


@IMPLEMENTATIONS
def test_expired_newest_version_hides_the_key(merge: MergeFn) -> None:
    sources = [[put(b"a", 7, expire_at_ms=NOW)], [put(b"a", 5)], [put(b"b", 3, expire_at_ms=NOW + 1)]]
    assert list(merge(sources, now_ms=NOW)) == [put(b"b", 3, expire_at_ms=NOW + 1)]  # expiry is inclusive
    assert list(merge(sources, now_ms=NOW - 1)) == [put(b"a", 7, expire_at_ms=NOW), put(b"b", 3, expire_at_ms=NOW + 1)]


@IMPLEMENTATIONS
def test_now_ms_defaults_to_the_wall_clock(merge: MergeFn) -> None:
    wall_ms = int(time.time() * 1000)
    sources = [[put(b"a", 2, expire_at_ms=wall_ms - 3_600_000), put(b"b", 1, expire_at_ms=wall_ms + 3_600_000)]]
    assert [row[0] for row in merge(sources)] == [b"b"]


@IMPLEMENTATIONS
def test_rows_newer_than_the_snapshot_are_invisible(merge: MergeFn) -> None:
    sources = [[put(b"a", 9, b"a9"), put(b"b", 8, b"b8")], [put(b"a", 4, b"a4")]]
    assert [row[3] for row in merge(sources, now_ms=NOW, snapshot_seq=5)] == [b"a4"]
    assert [row[3] for row in merge(sources, now_ms=NOW, snapshot_seq=MAX_SEQ)] == [b"a9", b"b8"]


@IMPLEMENTATIONS
def test_reverse_yields_keys_descending_with_the_newest_version(merge: MergeFn) -> None:
    sources = [[put(b"c", 6, b"c6"), put(b"a", 2, b"a2")], [put(b"c", 1, b"c1"), put(b"b", 3, b"b3")]]
    assert [row[3] for row in merge(sources, now_ms=NOW, reverse=True)] == [b"c6", b"b3", b"a2"]


@IMPLEMENTATIONS
def test_compaction_keeps_versions_above_the_floor_and_one_boundary_version(merge: MergeFn) -> None:
    sources = [[put(b"a", 8), delete(b"a", 6)], [put(b"a", 4), put(b"a", 2), put(b"b", 1)]]
    kept = list(merge(sources, now_ms=NOW, mode="compaction", floor_seq=5))
    assert [(row[0], row[1]) for row in kept] == [(b"a", 8), (b"a", 6), (b"a", 4), (b"b", 1)]
    kept = list(merge(sources, now_ms=NOW, mode="compaction", floor_seq=6))
    assert [(row[0], row[1]) for row in kept] == [(b"a", 8), (b"a", 6), (b"b", 1)]


@IMPLEMENTATIONS
def test_last_run_drops_a_hidden_boundary_version_but_never_rows_above_the_floor(merge: MergeFn) -> None:
    sources = [[delete(b"a", 9), delete(b"a", 5), put(b"a", 3)], [put(b"b", 4, expire_at_ms=NOW), put(b"c", 2)]]
    kept = list(merge(sources, now_ms=NOW, mode="compaction", floor_seq=6, last_run=True))
    assert [(row[0], row[1]) for row in kept] == [(b"a", 9), (b"c", 2)]
    kept = list(merge(sources, now_ms=NOW, mode="compaction", floor_seq=6, last_run=False))
    assert [(row[0], row[1]) for row in kept] == [(b"a", 9), (b"a", 5), (b"b", 4), (b"c", 2)]


@IMPLEMENTATIONS
def test_empty_and_single_sources(merge: MergeFn) -> None:
    source = [put(b"a", 3), put(b"a", 1), delete(b"b", 2), put(b"c", 1)]
    assert list(merge([], now_ms=NOW)) == []
    assert list(merge([[], iter([]), ()], now_ms=NOW)) == []
    assert list(merge([source], now_ms=NOW, mode="compaction")) == source
    assert list(merge([[], source, []], now_ms=NOW)) == [put(b"a", 3), put(b"c", 1)]


@IMPLEMENTATIONS
def test_yields_the_source_row_objects(merge: MergeFn) -> None:
    source = [put(b"a", 1), put(b"b", 1)]
    assert all(out is row for out, row in zip(merge([iter(source)], now_ms=NOW), source, strict=True))


@IMPLEMENTATIONS
def test_binary_keys_sort_bytewise(merge: MergeFn) -> None:
    ordered = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"k" * 8, b"k" * 8 + b"\x00", b"k" * 16,
               b"k" * 16 + b"\x00", b"k" * 17, b"\xff", b"\xff\x00", b"\xff\xff"]
    first, second = [put(key, 1) for key in ordered[::2]], [put(key, 1) for key in ordered[1::2]]
    assert [row[0] for row in merge([first, second], now_ms=NOW)] == ordered
    assert [row[0] for row in merge([second[::-1], first[::-1]], now_ms=NOW, reverse=True)] == ordered[::-1]


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"prefix": b"\xff"}, [b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\x01"]),
        ({"prefix": b"\xff\xff"}, [b"\xff\xff", b"\xff\xff\x01"]),
        ({"prefix": b""}, [b"", b"a", b"a\xff", b"b", b"\xfe\xff", b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\x01"]),
        ({"prefix": b"a"}, [b"a", b"a\xff"]),
        ({"prefix": b"a\xff"}, [b"a\xff"]),
        ({"prefix": b"\xff", "start": b"\xff\x01", "end": b"\xff\xff\x01"}, [b"\xff\xff"]),
        ({"start": b"a", "end": b"b"}, [b"a", b"a\xff"]),
        ({"start": b"b", "end": b"b"}, []),
        ({"start": b"", "end": b"a"}, [b""]),
    ],
)
def test_bounds_and_prefixes(merge: MergeFn, kwargs: dict[str, bytes], expected: list[bytes]) -> None:
    keys = [b"", b"a", b"a\xff", b"b", b"\xfe\xff", b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\x01"]
    source = [put(key, 1) for key in keys]
    assert [row[0] for row in merge([source], now_ms=NOW, **kwargs)] == expected
    assert [row[0] for row in merge([source[::-1]], now_ms=NOW, reverse=True, **kwargs)] == expected[::-1]


def _then_fail(rows: list[Row]) -> Iterator[Row]:
    """Yield rows, then fail: reading this source past them is a bug."""
    yield from rows
    raise AssertionError("source read past the first row beyond the far bound")


@IMPLEMENTATIONS
def test_a_source_is_not_read_past_the_far_bound(merge: MergeFn) -> None:
    forward = [put(b"a", 1), put(b"b", 1), put(b"c", 1)]
    assert [row[0] for row in merge([_then_fail(forward)], now_ms=NOW, end=b"b")] == [b"a"]
    assert [row[0] for row in merge([_then_fail(forward[::-1])], now_ms=NOW, reverse=True, start=b"b")] == [b"c", b"b"]
    assert list(merge([_then_fail([])], now_ms=NOW, start=b"x", end=b"a")) == []  # empty range: not read at all


@IMPLEMENTATIONS
def test_a_failing_source_propagates_and_ends_the_iteration(merge: MergeFn) -> None:
    class SourceError(Exception):
        pass

    def failing() -> Iterator[Row]:
        yield put(b"a", 1)
        raise SourceError

    merged = merge([failing(), [put(b"b", 1)]], now_ms=NOW)
    with pytest.raises(SourceError):
        list(merged)
    assert list(merged) == []


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"mode": "scan"}, ValueError, "mode"),
        ({"floor_seq": -1, "mode": "compaction"}, ValueError, "floor_seq"),
        ({"snapshot_seq": MAX_SEQ + 1}, ValueError, "snapshot_seq"),
        ({"snapshot_seq": 1.5}, TypeError, "snapshot_seq"),
        ({"now_ms": "now"}, TypeError, "now_ms"),
        ({"start": "a"}, TypeError, "start"),
        ({"end": bytearray(b"a")}, TypeError, "end"),
        ({"prefix": 1}, TypeError, "prefix"),
        ({"reverse": 1}, TypeError, "reverse"),
        ({"mode": "compaction", "reverse": True}, ValueError, "reverse"),
        ({"last_run": True}, ValueError, "last_run"),
        ({"floor_seq": 3}, ValueError, "floor_seq"),
    ],
)
def test_bad_arguments_are_rejected_at_call_time(
    merge: MergeFn, kwargs: dict[str, Any], error: type[Exception], argument: str
) -> None:
    with pytest.raises(error, match=argument):
        merge([[put(b"a", 1)]], **kwargs)


@IMPLEMENTATIONS
def test_bad_sources_are_rejected_at_call_time(merge: MergeFn) -> None:
    with pytest.raises(TypeError, match="sources"):
        merge(iter([[put(b"a", 1)]]))
    with pytest.raises(TypeError, match=r"sources\[1\]"):
        merge([[], 42])


@pytest.mark.parametrize(
    "row",
    [[b"a", 1, PUT, b"v", None], (b"a", 1, PUT), ("a", 1, PUT, b"v", None), (b"a", "1", PUT, b"v", None),
     (b"a", -1, PUT, b"v", None)],
    ids=["list", "short", "str-key", "str-seq", "negative-seq"],
)
def test_compiled_rejects_malformed_rows(row: Any) -> None:
    with pytest.raises((TypeError, OverflowError)):
        list(compiled.merge_rows([[row]], now_ms=NOW))


def test_compiled_refuses_reentrant_next() -> None:
    def sneaky() -> Iterator[Row]:
        yield put(b"a", 1)
        next(merged)

    merged = compiled.merge_rows([sneaky()], now_ms=NOW)
    with pytest.raises(ValueError, match="already executing"):
        list(merged)


def test_compiled_constants_mirror_the_row_format() -> None:
    assert (compiled.PUT, compiled.DELETE, compiled.MAX_SEQ) == (row_format.PUT, row_format.DELETE, row_format.MAX_SEQ)


def test_public_entry_point_runs_the_compiled_merge_with_the_contract_signature() -> None:
    assert public_merge.IMPLEMENTATION == "cython"
    parameters = inspect.signature(public_merge.merge_rows).parameters
    assert list(parameters) == ["sources", "snapshot_seq", "reverse", "start", "end", "prefix", "now_ms", "mode",
                                "floor_seq", "last_run"]
    sources = [[delete(b"a", 4)], [put(b"a", 2), put(b"b", 1)]]
    assert list(public_merge.merge_rows(sources, now_ms=NOW)) == [put(b"b", 1)]


def test_missing_extension_falls_back_to_the_reference_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, "cython_ext._merge", None)  # makes importing it fail
            patch.delattr(cython_ext, "_merge")  # internals: hide the built extension, to reach the fallback
            with pytest.warns(UserWarning, match="pure-Python reference"):
                fallback = importlib.reload(public_merge)
            assert fallback.IMPLEMENTATION == "python"
            assert list(fallback.merge_rows([[delete(b"a", 2), put(b"b", 1)]], now_ms=NOW)) == [put(b"b", 1)]
    finally:
        importlib.reload(public_merge)
    assert public_merge.IMPLEMENTATION == "cython"
