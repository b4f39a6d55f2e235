"""Compare-and-set: WriteBatch.put/delete(if_seq=..., if_absent=...) and Store.get_with_revision."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore import PreconditionFailedError, WriteBatch
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET

KEYS = [b"a", b"b"]
# An op: (kind, key, value, which revision to require: None none, "current", "stale", "absent").
ops = st.lists(
    st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(KEYS), st.binary(max_size=3),
              st.sampled_from([None, "current", "stale", "absent"])),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops=ops)
def test_a_conditional_write_applies_exactly_when_its_compare_holds(ops: list) -> None:
    model: dict[bytes, tuple[bytes, int]] = {}  # key -> (value, revision)
    with kvstore.open(MemoryStore(), **QUIET) as db:
        for kind, key, value, condition in ops:
            current = model.get(key)
            required: dict = {}
            if condition == "current" and current is not None:
                required = {"if_seq": current[1]}
            elif condition == "stale":
                required = {"if_seq": (current[1] + 1) if current else 1}  # never the key's revision
            elif condition == "absent":
                required = {"if_absent": True} if kind == "put" else {"if_seq": 10**9}
            holds = not required or ("if_absent" in required and current is None) or (
                current is not None and required.get("if_seq") == current[1])
            batch = WriteBatch().put(key, value, **required) if kind == "put" else WriteBatch().delete(key, **required)
            if holds:
                seq = db.write(batch)
                if kind == "put":
                    model[key] = (value, seq)
                else:
                    model.pop(key, None)
            else:
                with pytest.raises(PreconditionFailedError) as failed:
                    db.write(batch)
                assert failed.value.key == key and failed.value.actual == (current[1] if current else None)
            for k in KEYS:
                assert db.get_with_revision(k) == (model[k] if k in model else (None, None))


def _increment(url: str, rounds: int, out: "multiprocessing.Queue[list[int]]") -> None:
    """Race the other processes: move b"n" from i to i + 1 by compare-and-set; report the i it moved."""
    won = []
    with kvstore.open(url, poll_interval_s=0, background_maintenance=False) as db:
        while True:
            db.refresh()
            value, revision = db.get_with_revision(b"n")
            n = int(value or b"0")
            if n >= rounds:
                break
            batch = WriteBatch()
            if revision is None:
                batch.put(b"n", b"%d" % (n + 1), if_absent=True)
            else:
                batch.put(b"n", b"%d" % (n + 1), if_seq=revision)
            try:
                db.write(batch)
            except PreconditionFailedError:
                continue
            won.append(n)
    out.put(won)


def test_compare_and_set_races_have_exactly_one_winner_per_round(tmp_path: Path) -> None:
    url, rounds, workers = str(tmp_path / "store"), 30, 4
    kvstore.open(url, **QUIET).close()
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    procs = [context.Process(target=_increment, args=(url, rounds, out)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    wins = sorted(n for won in results for n in won)
    assert wins == list(range(rounds))  # every round won once, by exactly one process


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda b: b.put(b"k", b"v", if_seq=0), TypeError),
        (lambda b: b.put(b"k", b"v", if_seq=True), TypeError),
        (lambda b: b.put(b"k", b"v", if_seq=1.0), TypeError),
        (lambda b: b.put(b"k", b"v", if_absent="yes"), TypeError),
        (lambda b: b.put(b"k", b"v", if_seq=1, if_absent=True), ValueError),
        (lambda b: b.delete(b"k", if_seq=-2), TypeError),
    ],
)
def test_bad_conditions_are_refused_and_leave_the_batch_as_it_was(call: object, error: type) -> None:
    batch = WriteBatch().put(b"other", b"x", if_seq=7)
    with pytest.raises(error):
        call(batch)  # type: ignore[operator]
    assert dict(batch) == {b"other": (1, b"x", None)} and batch.conditions == {b"other": 7}


def test_two_different_compares_of_one_key_are_refused() -> None:
    batch = WriteBatch().put(b"k", b"v", if_seq=1)
    with pytest.raises(ValueError, match="another condition"):
        batch.put(b"k", b"w", if_seq=2)
    assert dict(batch) == {b"k": (1, b"v", None)} and batch.conditions == {b"k": 1}
