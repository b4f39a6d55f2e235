"""Durable transactions against a small model, and under injected storage faults.

The model knows only each transaction's parent, deadline and explicit end;
a transaction's state is the earliest of its own deadline (expired), its
commit or abort, and its ancestors' ends. After every step the stored state
must satisfy :meth:`TransactionManager.check` and every transaction's state
must match the model.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import kvstore
from catalog.durable import DurableTransactionExpiredError, LockConflictError, TransactionManager, TransactionStateError
from durable_workers import FakeClock
from kvstore.errors import ObjectStoreError
from kvstore.objstore import MemoryStore
from kvstore.objstore.faulty import FaultyStore

NODES = ["n0", "n1", "n2"]
LOCK_SPECS = [
    ("snapshot", None, None),
    ("shared", None, None),
    ("shared", "a", None),
    ("shared", None, "a"),
    ("exclusive", None, None),
]
OPTIONS = {"poll_interval_s": 0, "background_maintenance": False}


class DurableModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.store = kvstore.open(MemoryStore(), **OPTIONS)
        self.manager = TransactionManager(self.store, clock=self.clock)
        self.parent: dict[str, str | None] = {}
        self.deadline: dict[str, int] = {}
        self.timeout_ms: dict[str, int] = {}
        self.ended: dict[str, tuple[int, str]] = {}  # explicit commit/abort: (time, kind)
        self.order: list[str] = []

    def teardown(self) -> None:
        self.store.close()

    # -- the model ---------------------------------------------------------------

    def ancestors(self, txid: str) -> list[str]:
        chain = []
        parent = self.parent[txid]
        while parent is not None:
            chain.append(parent)
            parent = self.parent[parent]
        return chain

    def end(self, txid: str) -> tuple[int, str] | None:
        """(time, kind) at which txid ended, or None if it is active now."""
        candidates = [(self.deadline[txid], "expired")]
        if txid in self.ended:
            candidates.append(self.ended[txid])
        for ancestor in self.ancestors(txid):
            ancestor_end = self.end(ancestor)
            if ancestor_end is not None and ancestor_end[1] != "committed":
                candidates.append(ancestor_end)
        # at equal times a deadline wins (an operation at the deadline sees it expired)
        first = min(candidates, key=lambda c: (c[0], c[1] != "expired"))
        return first if first[0] <= self.clock.ms else None

    def state(self, txid: str) -> str:
        end = self.end(txid)
        return "active" if end is None else end[1]

    def children(self, txid: str) -> list[str]:
        return [t for t in self.order if self.parent[t] == txid]

    # -- rules ---------------------------------------------------------------------

    @rule(timeout=st.sampled_from([1, 3, 10]), parent_index=st.integers(0, 30), nested=st.booleans())
    def begin(self, timeout: int, parent_index: int, nested: bool) -> None:
        active = [t for t in self.order if self.state(t) == "active"]
        parent = active[parent_index % len(active)] if nested and active else None
        tx = self.manager.begin(timeout=timeout, parent=parent)
        self.parent[tx.id] = parent
        self.timeout_ms[tx.id] = timeout * 1000
        self.deadline[tx.id] = self.clock.ms + timeout * 1000
        self.order.append(tx.id)

    def _pick(self, index: int) -> str:
        return self.order[index % len(self.order)]

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 30), node=st.sampled_from(NODES), spec=st.sampled_from(LOCK_SPECS), waitable=st.booleans())
    def lock(self, index: int, node: str, spec: tuple, waitable: bool) -> None:
        txid = self._pick(index)
        mode, child_key, attribute_key = spec
        expected = self.state(txid)
        try:
            self.manager.attach(txid).lock(node, mode, child_key=child_key, attribute_key=attribute_key, waitable=waitable)
            assert expected == "active"
        except LockConflictError:
            assert expected == "active"
        except DurableTransactionExpiredError:
            assert expected == "expired"
        except TransactionStateError:
            assert expected in ("committed", "aborted")

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 30), node=st.sampled_from(NODES))
    def unlock(self, index: int, node: str) -> None:
        txid = self._pick(index)
        expected = self.state(txid)
        try:
            self.manager.attach(txid).unlock(node)
            assert expected == "active"
        except DurableTransactionExpiredError:
            assert expected == "expired"
        except TransactionStateError:
            assert expected in ("committed", "aborted")

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 30))
    def commit(self, index: int) -> None:
        txid = self._pick(index)
        expected = self.state(txid)
        open_child = any(self.state(child) == "active" for child in self.children(txid))
        try:
            self.manager.attach(txid).commit()
            assert expected == "active" and not open_child
            self.ended[txid] = (self.clock.ms, "committed")
        except DurableTransactionExpiredError:
            assert expected == "expired"
        except TransactionStateError:
            assert expected in ("committed", "aborted") or open_child

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 30))
    def abort(self, index: int) -> None:
        txid = self._pick(index)
        expected = self.state(txid)
        try:
            self.manager.abort(txid)
            assert expected != "committed"
            if expected == "active":
                self.ended[txid] = (self.clock.ms, "aborted")
        except TransactionStateError:
            assert expected == "committed"

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 30), ancestors=st.booleans())
    def ping(self, index: int, ancestors: bool) -> None:
        txid = self._pick(index)
        expected = self.state(txid)
        try:
            self.manager.attach(txid).ping(ancestors=ancestors)
            assert expected == "active"
            for pinged in [txid, *self.ancestors(txid)] if ancestors else [txid]:
                self.deadline[pinged] = self.clock.ms + self.timeout_ms[pinged]
        except DurableTransactionExpiredError:
            assert expected == "expired"
        except TransactionStateError:
            assert expected in ("committed", "aborted")

    @rule(seconds=st.sampled_from([0.5, 1, 2, 4]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def stored_state_is_sound(self) -> None:
        assert self.manager.check() == []

    @invariant()
    def states_match_model(self) -> None:
        if self.order:
            records = {r.id: r.state for r in self.manager.transactions(include_finished=True)}
            assert records == {t: self.state(t) for t in self.order}

    @invariant()
    def no_lock_outlives_its_transaction(self) -> None:
        for node in NODES:
            for lock in self.manager.locks(node):
                assert self.state(lock.txn) == "active", f"{node}: lock of {self.state(lock.txn)} {lock.txn}"


TestDurableModel = DurableModel.TestCase
TestDurableModel.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("seed", range(4))
def test_faults_leave_a_sound_state(seed: int) -> None:
    """Random storage errors (before and after the call took effect) during random lock traffic."""
    inner = MemoryStore()
    kvstore.open(inner, **OPTIONS).close()
    rng = random.Random(seed)
    clock = FakeClock()
    faulty = FaultyStore(inner, seed=seed)
    failures = 0
    with kvstore.open(faulty, create=False, **OPTIONS) as store:
        faulty.error_rate = faulty.after_rate = 0.05  # faults from here on, not while opening
        manager = TransactionManager(store, clock=clock)
        txids: list[str] = []
        for _ in range(80):
            try:
                choice = rng.random()
                if choice < 0.2 or not txids:
                    parent = rng.choice(txids) if txids and rng.random() < 0.3 else None
                    txids.append(manager.begin(timeout=rng.choice([1, 5]), parent=parent).id)
                elif choice < 0.7:
                    mode, child_key, attribute_key = rng.choice(LOCK_SPECS)
                    manager.attach(rng.choice(txids)).lock(
                        rng.choice(NODES), mode, child_key=child_key, attribute_key=attribute_key, waitable=rng.random() < 0.5
                    )
                elif choice < 0.8:
                    manager.attach(rng.choice(txids)).commit()
                elif choice < 0.9:
                    manager.abort(rng.choice(txids))
                else:
                    clock.advance(rng.choice([0.5, 2]))
            except (LockConflictError, TransactionStateError, DurableTransactionExpiredError):
                pass  # refusals are part of the workload; the state checks below judge them
            except ObjectStoreError:
                failures += 1
    assert failures > 0, "the fault rate produced no faults; the test proves nothing"
    with kvstore.open(inner, create=False, **OPTIONS) as store:
        assert TransactionManager(store, clock=clock).check() == []
