"""StoreOptions: parsed once, every bad value refused with a message naming it."""

from __future__ import annotations

import pytest

import kvstore
from kvstore.options import StoreOptions


def test_defaults_are_valid_and_frozen() -> None:
    options = StoreOptions.from_kwargs()
    assert options == StoreOptions()
    with pytest.raises(AttributeError):
        options.fsync = False  # type: ignore[misc]


@pytest.mark.parametrize(
    "name, value, error, match",
    [
        ("txn_ttl_s", 0, ValueError, "txn_ttl_s.*> 0"),
        ("maintenance_interval_s", 0, ValueError, "maintenance_interval_s.*> 0"),
        ("poll_interval_s", float("nan"), ValueError, "poll_interval_s.*finite"),
        ("retention_window_s", float("inf"), ValueError, "retention_window_s.*finite"),
        ("gc_grace_s", -1.0, ValueError, "gc_grace_s.*>= 0"),
        ("background_threads", "no", TypeError, "background_threads.*bool"),
        ("fsync", 1, TypeError, "fsync.*bool"),
        ("cache_bytes", True, TypeError, "cache_bytes.*int"),
        ("flush_max_versions", 1, ValueError, "flush_max_versions"),
        ("no_such_option", 1, ValueError, "unknown store option 'no_such_option'"),
    ],
)
def test_bad_values(name, value, error, match) -> None:
    with pytest.raises(error, match=match):
        StoreOptions.from_kwargs(**{name: value})


def test_ints_are_accepted_for_floats() -> None:
    assert StoreOptions.from_kwargs(poll_interval_s=2).poll_interval_s == 2.0


@pytest.mark.parametrize("create", ["no", 0, None])
def test_open_create_must_be_a_bool(create) -> None:
    with pytest.raises(TypeError, match="create must be a bool"):
        kvstore.open("memory://options-create", create=create)
