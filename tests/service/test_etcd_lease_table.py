"""The lease records beside the store (:mod:`service.etcd.lease_table`): a model of deadlines checked
against two tables on one object store (two servers), and faults on every write."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvstore.errors import InjectedFaultError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore
from service.etcd.errors import (
    EtcdLeaseExistsError,
    EtcdLeaseLateError,
    EtcdLeaseNotFoundError,
    EtcdLeaseTTLTooLargeError,
)
from service.etcd.lease_table import LEASE_DIR, MIN_TTL_S, LeaseTable


class Clock:
    """Milliseconds that move only when a test says so."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class SlowPuts:
    """An object store whose ``put`` takes ``delay_ms`` of the test clock (a slow write to S3)."""

    def __init__(self, inner: MemoryStore, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.url = inner.url
        self.delay_ms = 0

    def put(self, path: str, data: bytes) -> None:
        self._clock.ms += self.delay_ms
        self._inner.put(path, data)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@dataclass
class Modelled:
    ttl: int
    expire_ms: int


class LeaseTableModel(RuleBasedStateMachine):
    """Two servers' tables over one store agree with a dict of deadlines, whatever the order of calls."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.objects = SlowPuts(MemoryStore(), self.clock)
        self.servers = [LeaseTable(self.objects, self.clock), LeaseTable(self.objects, self.clock)]  # type: ignore[arg-type]
        self.model: dict[int, Modelled] = {}
        self.revoked: dict[int, int] = {}  # id -> the deadline it had when removed

    @rule(server=st.integers(0, 1), ttl=st.integers(-5, 100), lease_id=st.integers(0, 5))
    def grant(self, server: int, ttl: int, lease_id: int) -> None:
        if lease_id in self.model:
            with pytest.raises(EtcdLeaseExistsError):
                self.servers[server].grant(ttl, lease_id)
            return
        record = self.servers[server].grant(ttl, lease_id)
        granted = max(ttl, MIN_TTL_S)
        # An id granted again keeps the deadline it had when revoked, if later (other servers may cache it).
        expected = max(self.clock.ms + granted * 1000, self.revoked.get(lease_id, 0) if lease_id else 0)
        assert record.ttl == granted and record.expire_ms == expected
        assert lease_id == 0 or record.id == lease_id
        self.model[record.id] = Modelled(granted, record.expire_ms)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), server=st.integers(0, 1), delay_ms=st.sampled_from([0, 0, 500, 5_000]))
    def keepalive(self, data: st.DataObject, server: int, delay_ms: int) -> None:
        lease_id = data.draw(st.sampled_from(sorted(self.model)))
        lease = self.model[lease_id]
        start = self.clock.ms
        self.objects.delay_ms = delay_ms
        try:
            if start >= lease.expire_ms:
                with pytest.raises(EtcdLeaseNotFoundError) as refused:
                    self.servers[server].keepalive(lease_id)
                assert not isinstance(refused.value, EtcdLeaseLateError)  # refused before writing
                return
            if start + delay_ms >= lease.expire_ms:
                # The write landed after the old deadline: the deadline moved, but the caller must revoke.
                with pytest.raises(EtcdLeaseLateError):
                    self.servers[server].keepalive(lease_id)
            else:
                assert self.servers[server].keepalive(lease_id).expire_ms == max(start + lease.ttl * 1000, lease.expire_ms)
            lease.expire_ms = max(start + lease.ttl * 1000, lease.expire_ms)  # a deadline never moves back
        finally:
            self.objects.delay_ms = 0

    @rule(ms=st.integers(0, 60_000))
    def advance(self, ms: int) -> None:
        self.clock.ms += ms

    @precondition(lambda self: self.model)
    @rule(data=st.data(), server=st.integers(0, 1))
    def remove(self, data: st.DataObject, server: int) -> None:
        lease_id = data.draw(st.sampled_from(sorted(self.model)))
        self.servers[server].remove(lease_id)
        if self.model[lease_id].expire_ms > self.clock.ms:
            self.revoked[lease_id] = self.model[lease_id].expire_ms
        del self.model[lease_id]

    @rule(server=st.integers(0, 1))
    def forget_tombstones(self, server: int) -> None:
        self.servers[server].forget_tombstones()
        self.revoked = {i: deadline for i, deadline in self.revoked.items() if deadline > self.clock.ms}

    @invariant()
    def both_servers_agree_with_the_model(self) -> None:
        now = self.clock.ms
        for table in self.servers:
            assert set(table.ids()) == set(self.model)
            assert set(table.expired()) == {i for i, lease in self.model.items() if lease.expire_ms <= now}
            for lease_id, lease in self.model.items():
                assert table.is_alive(lease_id) == (lease.expire_ms > now)
                record = table.get(lease_id)
                assert record is not None and (record.ttl, record.expire_ms) == (lease.ttl, lease.expire_ms)
                if lease.expire_ms > now:
                    assert table.live(lease_id).expire_ms == lease.expire_ms
                else:
                    with pytest.raises(EtcdLeaseNotFoundError):
                        table.live(lease_id)
            assert not table.is_alive(99)


LeaseTableModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_lease_table_model = LeaseTableModel.TestCase


def test_ttl_bounds_and_ids() -> None:
    table = LeaseTable(MemoryStore(), Clock())
    with pytest.raises(EtcdLeaseTTLTooLargeError, match="etcdserver: too large lease TTL"):
        table.grant(9_000_000_001)
    with pytest.raises(TypeError):
        table.grant("10")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="int64"):
        table.grant(10, 1 << 63)
    negative = table.grant(10, -5)  # a client may pick any int64
    assert negative.id == -5 and table.ids() == [-5]
    assert table.keepalive(-5).id == -5


def test_a_failed_grant_leaves_nothing_or_a_lease_that_expires() -> None:
    clock = Clock()
    objects = FaultyStore(MemoryStore(), seed=1)
    table = LeaseTable(objects, clock)
    objects.fail_next("put_if_absent", when="before", path_prefix=LEASE_DIR)
    with pytest.raises(InjectedFaultError):
        table.grant(10, 7)
    assert table.ids() == []
    objects.fail_next("put_if_absent", when="after", path_prefix=LEASE_DIR)
    with pytest.raises(InjectedFaultError):
        table.grant(10, 7)
    assert table.ids() == [7] and table.is_alive(7)  # written, unacknowledged: it expires like any lease
    clock.ms += 10_000
    assert table.expired() == [7] and not table.is_alive(7)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_keepalive_never_shortens_a_lease(when: str) -> None:
    clock = Clock()
    objects = FaultyStore(MemoryStore(), seed=1)
    table, other = LeaseTable(objects, clock), LeaseTable(objects, clock)
    first = table.grant(10, 3)
    clock.ms += 5_000
    objects.fail_next("put", when=when, path_prefix=LEASE_DIR)
    with pytest.raises(InjectedFaultError):
        table.keepalive(3)
    expected = first.expire_ms if when == "before" else clock.ms + 10_000
    for server in (table, other):
        record = server.get(3)
        assert record is not None and record.expire_ms == expected and server.is_alive(3)
    clock.ms = expected
    assert not table.is_alive(3) and not other.is_alive(3)
