"""Key ranges: a prefix's bounds and the fold of scan arguments, against a model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.keyrange import merge_bounds, prefix_bounds

# Few distinct bytes, 0xff among them, so prefixes, carries and all-0xff keys are common.
_keys = st.binary(max_size=4).map(lambda b: bytes(x % 3 + 0xFD for x in b))


def _inside(key: bytes, lo: bytes | None, hi: bytes | None) -> bool:
    return (lo is None or key >= lo) and (hi is None or key < hi)


@settings(max_examples=400, deadline=None)
@given(_keys.filter(bool), _keys)
def test_prefix_bounds_cover_exactly_the_keys_with_the_prefix(prefix: bytes, key: bytes) -> None:
    lo, hi = prefix_bounds(prefix)
    assert _inside(key, lo, hi) == key.startswith(prefix)
    assert _inside(prefix + key, lo, hi)  # every extension of the prefix is inside


@settings(max_examples=400, deadline=None)
@given(st.none() | _keys, st.none() | _keys, st.none() | _keys, _keys)
def test_merge_bounds_is_start_end_and_prefix_together(start, end, prefix, key) -> None:
    lo, hi = merge_bounds(start, end, prefix)
    expected = _inside(key, start, end) and (not prefix or key.startswith(prefix))
    assert _inside(key, lo, hi) == expected
