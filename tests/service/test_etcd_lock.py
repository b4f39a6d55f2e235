"""Locks on ``lakekv serve --etcd-listen``: the real ``etcdctl lock`` (clientv3's Mutex over KV, Lease and
Watch) and etcd's server-side Lock service (v3lock) over gRPC, on one server and across two on one store."""

from __future__ import annotations

import signal
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.mvccpb import kv_pb2
from service.etcd.api.v3lockpb import v3lock_pb2 as lockpb
from service.etcd.api.v3lockpb import v3lock_pb2_grpc
from tests.service.etcd_background import WAIT_S, Etcdctl, GrpcWatch, stubs
from tests.service.etcd_peers import LakekvEtcd, etcdctl, etcdctl_json


def lease_of(lock_key: str) -> str:
    """The lease id in an etcd lock key ``<name>/<lease hex>``, as etcdctl prints it (16 hex digits)."""
    return f"{int(lock_key.rsplit('/', 1)[1], 16):016x}"


def test_etcdctl_lock_survives_its_holder_killed_only_after_the_lease_expires(lakekv: LakekvEtcd) -> None:
    endpoint = lakekv.endpoint
    holder = Etcdctl(endpoint, "lock", "--ttl", "3", "jobs")
    waiter = None
    with grpc.insecure_channel(endpoint) as channel:
        try:
            holder_key = holder.line()
            assert holder_key.startswith("jobs/")
            start = etcdctl_json(endpoint, "get", holder_key)["header"]["revision"]
            queued = GrpcWatch(channel, b"jobs/", start + 1, range_end=b"jobs0")
            waiter = Etcdctl(endpoint, "lock", "--ttl", "3", "jobs")
            event = queued.next_event()  # the waiter's own key: it is queued behind the holder
            queued.close()
            assert event.type == kv_pb2.Event.PUT and event.kv.key.decode() != holder_key
            # Mutual exclusion: the holder's lease lives, so the waiter has not got the lock.
            assert "remaining" in etcdctl(endpoint, "lease", "timetolive", lease_of(holder_key)).stdout
            assert waiter.printed_nothing_yet()

            holder.signal(signal.SIGKILL)  # no unlock, no revoke: only the lease's expiry frees the lock
            waiter_key = waiter.line()
            assert waiter_key == event.kv.key.decode()
            # It got the lock only once the holder's lease had expired, and the holder's key is gone.
            expired = etcdctl(endpoint, "lease", "timetolive", lease_of(holder_key)).stdout.strip()
            assert expired == f"lease {lease_of(holder_key)} already expired"
            assert etcdctl(endpoint, "get", "jobs/", "--prefix", "--keys-only").stdout.split() == [waiter_key]
        finally:
            holder.stop()
            if waiter is not None:
                waiter.stop()


def test_etcdctl_lock_runs_a_command_while_holding_it(lakekv: LakekvEtcd) -> None:
    out = etcdctl(lakekv.endpoint, "lock", "deploy", "echo", "holding").stdout
    assert out.strip() == "holding"
    assert etcdctl(lakekv.endpoint, "get", "deploy/", "--prefix", "--keys-only").stdout.strip() == ""


def test_lock_service_queues_callers_until_unlock(lakekv: LakekvEtcd) -> None:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api, locks = stubs(channel), v3lock_pb2_grpc.LockStub(channel)
        first_lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        second_lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        first = locks.Lock(lockpb.LockRequest(name=b"L", lease=first_lease))
        assert first.key == b"L/" + format(first_lease, "x").encode()
        again = locks.Lock(lockpb.LockRequest(name=b"L", lease=first_lease))  # the same lease: held already
        assert again.key == first.key
        watch = GrpcWatch(channel, b"L/", first.header.revision + 1, range_end=b"L0")
        with ThreadPoolExecutor(1) as pool:
            second: Future[lockpb.LockResponse] = pool.submit(
                locks.Lock, lockpb.LockRequest(name=b"L", lease=second_lease), timeout=WAIT_S
            )
            assert watch.next_event().kv.key == b"L/" + format(second_lease, "x").encode()  # queued
            assert not second.done()
            unlocked = locks.Unlock(lockpb.UnlockRequest(key=first.key))
            got = second.result(timeout=WAIT_S)
        watch.close()
        assert got.key == b"L/" + format(second_lease, "x").encode()
        assert got.header.revision >= unlocked.header.revision


def test_a_cancelled_lock_call_leaves_no_key(lakekv: LakekvEtcd) -> None:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api, locks = stubs(channel), v3lock_pb2_grpc.LockStub(channel)
        holder = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        quitter = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        held = locks.Lock(lockpb.LockRequest(name=b"C", lease=holder))
        watch = GrpcWatch(channel, b"C/", held.header.revision + 1, range_end=b"C0")
        call = locks.Lock.future(lockpb.LockRequest(name=b"C", lease=quitter))
        assert watch.next_event().type == kv_pb2.Event.PUT  # queued
        call.cancel()
        gone = watch.next_event()  # the server deletes the quitter's key, as etcd does
        watch.close()
        assert gone.type == kv_pb2.Event.DELETE and gone.kv.key == b"C/" + format(quitter, "x").encode()
        keys = [kv.key for kv in api.kv.Range(pb.RangeRequest(key=b"C/", range_end=b"C0")).kvs]
        assert keys == [held.key]


def test_lock_without_a_lease_refuses_an_unknown_one(lakekv: LakekvEtcd) -> None:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        locks = v3lock_pb2_grpc.LockStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            locks.Lock(lockpb.LockRequest(name=b"X", lease=99))
        assert refused.value.details() == "etcdserver: requested lease not found"
        session = locks.Lock(lockpb.LockRequest(name=b"X"))  # 0: a new 60 s lease, as etcd's session grants
        lease = int(session.key.rsplit(b"/", 1)[1], 16)
        ttl = stubs(channel).lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lease))
        assert ttl.grantedTTL == 60


def test_a_lock_held_through_one_server_excludes_clients_of_another(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    a = LakekvEtcd(store, tmp_path / "a.log").start()
    b = LakekvEtcd(store, tmp_path / "b.log").start()
    try:
        with grpc.insecure_channel(a.endpoint) as on_a, grpc.insecure_channel(b.endpoint) as on_b:
            lease_a = stubs(on_a).lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
            lease_b = stubs(on_b).lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
            held = v3lock_pb2_grpc.LockStub(on_a).Lock(lockpb.LockRequest(name=b"S", lease=lease_a))
            watch = GrpcWatch(on_a, b"S/", held.header.revision + 1, range_end=b"S0")
            done = threading.Event()
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(
                    v3lock_pb2_grpc.LockStub(on_b).Lock, lockpb.LockRequest(name=b"S", lease=lease_b), timeout=WAIT_S
                )
                waiting.add_done_callback(lambda _: done.set())
                assert watch.next_event().kv.key == b"S/" + format(lease_b, "x").encode()  # B's caller queued
                assert not done.is_set()
                stubs(on_a).lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=lease_a))  # A's holder goes away
                assert waiting.result(timeout=WAIT_S).key == b"S/" + format(lease_b, "x").encode()
            watch.close()
    finally:
        a.stop()
        b.stop()
