"""service.etcd.keyspace in process: the lease hook the Lease service plugs in, and the key records."""

from __future__ import annotations

from typing import Any

import pytest

import kvstore
from kvstore.objstore.memory import MemoryStore
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.keyspace import Keyspace


class Leases:
    """A LeaseHook over a set of live lease ids, recording what it is told."""

    def __init__(self) -> None:
        self.alive = {7, 8}
        self.calls: list[tuple[Any, ...]] = []

    def check(self, txn: Any, lease: int) -> None:
        if lease not in self.alive:
            raise errors.LEASE_NOT_FOUND

    def on_put(self, txn: Any, key: bytes, old_lease: int, new_lease: int) -> int | None:
        self.calls.append(("put", key, old_lease, new_lease))
        return None

    def on_delete(self, txn: Any, key: bytes, old_lease: int) -> None:
        self.calls.append(("delete", key, old_lease))

    def live(self, lease: int) -> bool:
        return lease in self.alive


@pytest.fixture()
def keyspace() -> Any:
    with kvstore.open(MemoryStore()) as db:
        yield Keyspace(db)


def test_a_lease_needs_a_hook(keyspace: Keyspace) -> None:
    with pytest.raises(errors.EtcdError) as refused:
        keyspace.put(pb.PutRequest(key=b"k", value=b"v", lease=7))
    assert refused.value is errors.LEASE_NOT_FOUND
    assert keyspace.range(pb.RangeRequest(key=b"k")).count == 0


def test_the_hook_sees_puts_and_deletes_and_hides_the_keys_of_ended_leases(keyspace: Keyspace) -> None:
    hook = Leases()
    keyspace.leases = hook
    with pytest.raises(errors.EtcdError):
        keyspace.put(pb.PutRequest(key=b"k", value=b"v", lease=99))
    keyspace.put(pb.PutRequest(key=b"k", value=b"v", lease=7))
    keyspace.put(pb.PutRequest(key=b"k", value=b"w", lease=8))
    keyspace.put(pb.PutRequest(key=b"plain", value=b"p"))
    (kv,) = keyspace.range(pb.RangeRequest(key=b"k")).kvs
    assert (kv.value, kv.lease, kv.version) == (b"w", 8, 2)
    hook.alive.discard(8)
    assert [kv.key for kv in keyspace.range(pb.RangeRequest(key=b"a", range_end=b"z")).kvs] == [b"plain"]
    keyspace.delete_range(pb.DeleteRangeRequest(key=b"plain"))
    assert hook.calls == [("put", b"k", 0, 7), ("put", b"k", 7, 8), ("put", b"plain", 0, 0), ("delete", b"plain", 0)]


def test_ignore_lease_keeps_the_key_s_lease(keyspace: Keyspace) -> None:
    keyspace.leases = Leases()
    keyspace.put(pb.PutRequest(key=b"k", value=b"v", lease=7))
    keyspace.put(pb.PutRequest(key=b"k", value=b"w", ignore_lease=True))
    (kv,) = keyspace.range(pb.RangeRequest(key=b"k")).kvs
    assert (kv.value, kv.lease) == (b"w", 7)
