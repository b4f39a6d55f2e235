"""WriteBatch and the argument checks shared by every write entry point."""

from __future__ import annotations

import pytest

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
