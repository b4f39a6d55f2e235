"""The lock compatibility rules of seed 003, pair by pair, plus properties of the queue rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.durable.compat import blocker, conflicts, is_redundant

SNAP = ("snapshot", None, None)
SH = ("shared", None, None)
SH_C1 = ("shared", "k1", None)
SH_C2 = ("shared", "k2", None)
SH_A1 = ("shared", None, "k1")
EX = ("exclusive", None, None)

# requested, held (by an unrelated transaction), conflict?
MATRIX = [
    (SNAP, SNAP, False), (SNAP, SH, False), (SNAP, SH_C1, False), (SNAP, EX, False),
    (SH, SNAP, False), (SH, SH, False), (SH, SH_C1, False), (SH, SH_A1, False), (SH, EX, True),
    (SH_C1, SNAP, False), (SH_C1, SH, False), (SH_C1, SH_C1, True), (SH_C1, SH_C2, False),
    (SH_C1, SH_A1, False), (SH_C1, EX, True),
    (SH_A1, SH_A1, True), (SH_A1, SH_C1, False), (SH_A1, EX, True),
    (EX, SNAP, False), (EX, SH, True), (EX, SH_C1, True), (EX, SH_A1, True), (EX, EX, True),
]  # fmt: skip


@pytest.mark.parametrize(("requested", "held", "expected"), MATRIX)
def test_matrix(requested: tuple, held: tuple, expected: bool) -> None:
    assert conflicts(*requested, *held) is expected


LOCKS = st.sampled_from([SNAP, SH, SH_C1, SH_C2, SH_A1, EX])


@given(LOCKS, LOCKS)
def test_conflict_is_symmetric(a: tuple, b: tuple) -> None:
    assert conflicts(*a, *b) == conflicts(*b, *a)


def _lock(txn: str, spec: tuple, state: str = "acquired") -> SimpleNamespace:
    mode, child, attr = spec
    return SimpleNamespace(txn=txn, mode=mode, child_key=child, attribute_key=attr, state=state)


@given(LOCKS, st.lists(st.tuples(st.sampled_from(["t1", "t2", "me", "parent"]), LOCKS, st.sampled_from(["acquired", "pending"]))))
def test_blocker_ignores_related_and_other_queues(request_spec: tuple, held: list) -> None:
    request = _lock("me", request_spec)
    ahead = [_lock(txn, spec, state) for txn, spec, state in held]
    found = blocker(request, frozenset({"me", "parent"}), ahead)
    if found is None:
        for lock in ahead:
            related = lock.txn in {"me", "parent"}
            other_queue = lock.state == "pending" and (lock.child_key, lock.attribute_key) != (request.child_key, request.attribute_key)
            assert related or other_queue or not conflicts(*request_spec, lock.mode, lock.child_key, lock.attribute_key)
    else:
        assert found.txn not in {"me", "parent"}
        assert request.mode != "snapshot"


@given(LOCKS, LOCKS)
def test_redundant_request_adds_no_rights(held: tuple, requested: tuple) -> None:
    # if holding `held` makes `requested` redundant, anything `requested` conflicts with, `held` conflicts with too
    if is_redundant(_lock("me", held), *requested):
        for other in [SNAP, SH, SH_C1, SH_C2, SH_A1, EX]:
            if conflicts(*requested, *other):
                assert conflicts(*held, *other)
