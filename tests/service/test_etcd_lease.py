"""etcd's Lease API on ``lakekv serve --etcd-listen``: the real ``etcdctl lease ...`` and a gRPC client.

Leases without writes: a keepalive moves the lease's deadline and writes no key (no revision, no watch
event); a key put with a lease vanishes for readers when the lease expires, and the expiry becomes a real
delete that watchers see.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.mvccpb import kv_pb2
from tests.service.etcd_background import GrpcWatch, stubs
from tests.service.etcd_peers import LakekvEtcd, etcdctl, etcdctl_json


@pytest.fixture()
def channel(lakekv: LakekvEtcd) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        yield channel


def grant(endpoint: str, ttl: int) -> str:
    """``etcdctl lease grant``: the lease id in hex, as etcdctl prints and takes it."""
    out = etcdctl(endpoint, "lease", "grant", str(ttl)).stdout
    found = re.match(r"lease ([0-9a-f]+) granted with TTL\((\d+)s\)", out)
    assert found is not None, out
    return found.group(1)


def test_grant_keepalive_timetolive_keys_revoke_and_list(lakekv: LakekvEtcd) -> None:
    endpoint = lakekv.endpoint
    lease = grant(endpoint, 60)
    etcdctl(endpoint, "put", "--lease", lease, "svc/a", "1")
    etcdctl(endpoint, "put", "--lease", lease, "svc/b", "2")
    etcdctl(endpoint, "put", "svc/c", "3")
    live = etcdctl(endpoint, "lease", "timetolive", "--keys", lease).stdout
    assert re.match(rf"lease {lease} granted with TTL\(60s\), remaining\((\d+)s\), attached keys\(\[svc/a svc/b\]\)", live)
    assert f"lease {lease} keepalived with TTL(60)" in etcdctl(endpoint, "lease", "keep-alive", "--once", lease).stdout
    assert lease in etcdctl(endpoint, "lease", "list").stdout.split()
    assert etcdctl(endpoint, "lease", "revoke", lease).stdout.strip() == f"lease {lease} revoked"
    assert etcdctl(endpoint, "get", "svc/", "--prefix", "--keys-only").stdout.split() == ["svc/c"]
    assert lease not in etcdctl(endpoint, "lease", "list").stdout.split()
    assert etcdctl(endpoint, "lease", "timetolive", lease).stdout.strip() == f"lease {lease} already expired"
    refused = etcdctl(endpoint, "lease", "revoke", lease, check=False)
    assert refused.returncode != 0 and "requested lease not found" in refused.stderr


def test_keepalive_writes_no_key_and_consumes_no_revision(lakekv: LakekvEtcd, channel: grpc.Channel) -> None:
    endpoint = lakekv.endpoint
    lease = grant(endpoint, 60)
    revision = etcdctl_json(endpoint, "put", "--lease", lease, "held", "v")["header"]["revision"]
    every_key = GrpcWatch(channel, b"\x00", revision + 1, range_end=b"\x00")
    try:
        for _ in range(3):
            etcdctl(endpoint, "lease", "keep-alive", "--once", lease)
        assert etcdctl_json(endpoint, "get", "held")["header"]["revision"] == revision
        marker = etcdctl_json(endpoint, "put", "marker", "m")["header"]["revision"]
        event = every_key.next_event()  # the first change after the keepalives is the marker: they wrote nothing
        assert (event.type, event.kv.key, event.kv.mod_revision) == (kv_pb2.Event.PUT, b"marker", marker)
        (kv,) = etcdctl_json(endpoint, "get", "held")["kvs"]
        assert kv["mod_revision"] == revision and kv["version"] == 1
    finally:
        every_key.close()


def test_an_expired_lease_hides_its_keys_then_deletes_them_with_events(
    lakekv: LakekvEtcd, channel: grpc.Channel
) -> None:
    api = stubs(channel)
    lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=2)).ID  # etcd's minimum TTL
    put = api.kv.Put(pb.PutRequest(key=b"ephemeral", value=b"x", lease=lease))
    api.kv.Put(pb.PutRequest(key=b"stays", value=b"y"))
    watch = GrpcWatch(channel, b"ephemeral", put.header.revision + 1)
    try:
        event = watch.next_event()  # no keepalive: the lease expires and the sweep deletes its key
        assert event.type == kv_pb2.Event.DELETE and event.kv.key == b"ephemeral"
        assert event.kv.mod_revision > put.header.revision
    finally:
        watch.close()
    assert not api.kv.Range(pb.RangeRequest(key=b"ephemeral")).kvs
    assert api.kv.Range(pb.RangeRequest(key=b"stays")).kvs[0].value == b"y"
    assert api.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lease)).TTL == -1
    assert api.lease.LeaseKeepAlive(iter([pb.LeaseKeepAliveRequest(ID=lease)])).next().TTL == 0


def test_put_with_a_lease_that_does_not_exist_is_refused(lakekv: LakekvEtcd) -> None:
    refused = etcdctl(lakekv.endpoint, "put", "--lease", "1234abcd", "k", "v", check=False)
    assert refused.returncode != 0 and "etcdserver: requested lease not found" in refused.stderr
    assert etcdctl_json(lakekv.endpoint, "get", "k").get("kvs") is None


def test_grant_follows_etcds_bounds_and_ids(channel: grpc.Channel) -> None:
    api = stubs(channel)
    assert api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=1)).TTL == 2  # raised to etcd's minimum
    chosen = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30, ID=4242))
    assert (chosen.ID, chosen.TTL) == (4242, 30)
    with pytest.raises(grpc.RpcError) as taken:
        api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30, ID=4242))
    assert taken.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert taken.value.details() == "etcdserver: lease already exists"
    with pytest.raises(grpc.RpcError) as too_long:
        api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=9_000_000_001))
    assert too_long.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert too_long.value.details() == "etcdserver: too large lease TTL"
    with pytest.raises(grpc.RpcError) as unknown:
        api.lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=777))
    assert (unknown.value.code(), unknown.value.details()) == (
        grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found"
    )
    ttl = api.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=4242, keys=True))
    assert (ttl.grantedTTL, list(ttl.keys)) == (30, []) and 0 < ttl.TTL <= 30
    listed = {status.ID for status in api.lease.LeaseLeases(pb.LeaseLeasesRequest()).leases}
    assert 4242 in listed


def test_a_key_put_again_without_its_lease_leaves_it(channel: grpc.Channel) -> None:
    api = stubs(channel)
    lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
    api.kv.Put(pb.PutRequest(key=b"a", value=b"1", lease=lease))
    api.kv.Put(pb.PutRequest(key=b"b", value=b"1", lease=lease))
    api.kv.Put(pb.PutRequest(key=b"a", value=b"2"))  # no lease now: revoking must not delete it
    assert list(api.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lease, keys=True)).keys) == [b"b"]
    api.lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=lease))
    assert [kv.key for kv in api.kv.Range(pb.RangeRequest(key=b"a", range_end=b"c")).kvs] == [b"a"]


def test_servers_on_one_store_share_leases(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    a = LakekvEtcd(store, tmp_path / "a.log").start()
    b = LakekvEtcd(store, tmp_path / "b.log").start()
    try:
        lease = grant(a.endpoint, 60)
        etcdctl(b.endpoint, "put", "--lease", lease, "shared", "v")  # B knows A's lease
        assert "keepalived with TTL(60)" in etcdctl(b.endpoint, "lease", "keep-alive", "--once", lease).stdout
        assert "attached keys([shared])" in etcdctl(a.endpoint, "lease", "timetolive", "--keys", lease).stdout
        etcdctl(a.endpoint, "lease", "revoke", lease)
        assert etcdctl_json(b.endpoint, "get", "shared").get("kvs") is None
        assert lease not in etcdctl(b.endpoint, "lease", "list").stdout.split()
    finally:
        a.stop()
        b.stop()


def test_a_lease_and_its_keys_survive_a_server_kill_with_their_deadline(lakekv: LakekvEtcd) -> None:
    """The deadline is durable: after ``kill -9`` and a restart the lease is there with no more time than
    before the kill (a restart grants nothing), its key still attached, and a keepalive still works."""
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api = stubs(channel)
        lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        api.kv.Put(pb.PutRequest(key=b"svc/alive", value=b"1", lease=lease))
        before = api.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lease)).TTL
    lakekv.kill()
    lakekv.restart()
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api = stubs(channel)
        after = api.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lease, keys=True))
        assert 0 < after.TTL <= before and after.grantedTTL == 60 and list(after.keys) == [b"svc/alive"]
        assert [kv.lease for kv in api.kv.Range(pb.RangeRequest(key=b"svc/alive")).kvs] == [lease]
        assert [r.ID for r in api.lease.LeaseLeases(pb.LeaseLeasesRequest()).leases] == [lease]
