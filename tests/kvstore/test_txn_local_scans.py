"""A transaction's scans see its own writes, however they interleave (its sorted write set is kept merged, not re-sorted)."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore.objstore.memory import MemoryStore

_KEY = st.text(alphabet="abc", min_size=1, max_size=3).map(str.encode)
_STEP = st.one_of(
    st.tuples(st.just("put"), _KEY, st.binary(max_size=2)),
    st.tuples(st.just("delete"), _KEY),
    st.tuples(st.just("scan"), st.text(alphabet="abc", max_size=2).map(str.encode)),
)


@settings(max_examples=60, deadline=None)
@given(committed=st.dictionaries(_KEY, st.binary(max_size=2), max_size=6), steps=st.lists(_STEP, max_size=30))
def test_scans_between_writes_match_a_dict(committed: dict[bytes, bytes], steps: list[tuple[Any, ...]]) -> None:
    with kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0) as db:
        if committed:
            txn = db.begin()
            for key, value in committed.items():
                txn.put(key, value)
            txn.commit()
        model = dict(committed)
        txn = db.begin()
        for step in steps:
            if step[0] == "put":
                _, key, value = step
                txn.put(key, value)
                model[key] = value
            elif step[0] == "delete":
                txn.delete(step[1])
                model.pop(step[1], None)
            else:
                prefix = step[1]
                expected = sorted((k, v) for k, v in model.items() if k.startswith(prefix))
                assert list(txn.scan(prefix=prefix) if prefix else txn.scan()) == expected
        txn.rollback()
