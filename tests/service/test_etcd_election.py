"""Leader election on ``lakekv serve --etcd-listen``: the real ``etcdctl elect`` (clientv3's Election over
KV, Lease and Watch) and etcd's server-side Election service (v3election) over gRPC."""

from __future__ import annotations

import signal
from concurrent.futures import Future, ThreadPoolExecutor

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.mvccpb import kv_pb2
from service.etcd.api.v3electionpb import v3election_pb2 as epb
from service.etcd.api.v3electionpb import v3election_pb2_grpc
from tests.service.etcd_background import WAIT_S, Etcdctl, GrpcWatch, stubs
from tests.service.etcd_peers import LakekvEtcd, etcdctl_json


def test_etcdctl_elect_hands_leadership_over_when_the_leader_resigns(lakekv: LakekvEtcd) -> None:
    endpoint = lakekv.endpoint
    alice = Etcdctl(endpoint, "elect", "primary", "alice")
    bob = observer = None
    try:
        alice_key = alice.line()
        assert alice_key.startswith("primary/") and alice.line() == "alice"
        start = etcdctl_json(endpoint, "get", alice_key)["header"]["revision"]
        with grpc.insecure_channel(endpoint) as channel:
            queued = GrpcWatch(channel, b"primary/", start + 1, range_end=b"primary0")
            bob = Etcdctl(endpoint, "elect", "primary", "bob")
            bob_key = queued.next_event().kv.key.decode()  # bob campaigns: his key waits behind alice's
            queued.close()
        observer = Etcdctl(endpoint, "elect", "--listen", "primary")
        assert (observer.line(), observer.line()) == (alice_key, "alice")
        assert bob.printed_nothing_yet()

        alice.signal(signal.SIGINT)  # etcdctl resigns on interrupt
        assert (bob.line(), bob.line()) == (bob_key, "bob")
        assert (observer.line(), observer.line()) == (bob_key, "bob")
    finally:
        for process in (alice, bob, observer):
            if process is not None:
                process.stop()


def test_election_service_campaign_leader_proclaim_observe_resign(lakekv: LakekvEtcd) -> None:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api, elections = stubs(channel), v3election_pb2_grpc.ElectionStub(channel)
        with pytest.raises(grpc.RpcError) as nobody:
            elections.Leader(epb.LeaderRequest(name=b"E"))
        assert nobody.value.details() == "election: no leader"

        first_lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        second_lease = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        won = elections.Campaign(epb.CampaignRequest(name=b"E", lease=first_lease, value=b"one"))
        leader = won.leader
        assert (leader.name, leader.key, leader.lease) == (b"E", b"E/" + format(first_lease, "x").encode(), first_lease)
        assert elections.Leader(epb.LeaderRequest(name=b"E")).kv.value == b"one"

        observed = elections.Observe(epb.LeaderRequest(name=b"E"), timeout=WAIT_S)
        assert next(observed).kv.value == b"one"
        elections.Proclaim(epb.ProclaimRequest(leader=leader, value=b"uno"))
        assert next(observed).kv.value == b"uno"

        stale = epb.LeaderKey(name=b"E", key=leader.key, rev=leader.rev + 1000, lease=first_lease)
        with pytest.raises(grpc.RpcError) as not_leader:
            elections.Proclaim(epb.ProclaimRequest(leader=stale, value=b"x"))
        assert not_leader.value.details() == "election: not leader"
        with pytest.raises(grpc.RpcError) as missing:
            elections.Proclaim(epb.ProclaimRequest(value=b"x"))
        assert missing.value.details() == '"leader" field must be provided'

        watch = GrpcWatch(channel, b"E/", won.header.revision + 1, range_end=b"E0")
        with ThreadPoolExecutor(1) as pool:
            second: Future[epb.CampaignResponse] = pool.submit(
                elections.Campaign, epb.CampaignRequest(name=b"E", lease=second_lease, value=b"two"), timeout=WAIT_S
            )
            while (event := watch.next_event()).kv.key != b"E/" + format(second_lease, "x").encode():
                continue  # the proclaim's put comes first
            assert event.type == kv_pb2.Event.PUT and not second.done()
            elections.Resign(epb.ResignRequest(leader=leader))
            assert second.result(timeout=WAIT_S).leader.lease == second_lease
        watch.close()
        assert next(observed).kv.value == b"two"
        observed.cancel()
        assert elections.Leader(epb.LeaderRequest(name=b"E")).kv.lease == second_lease


def test_a_leader_whose_lease_ends_loses_the_election(lakekv: LakekvEtcd) -> None:
    with grpc.insecure_channel(lakekv.endpoint) as channel:
        api, elections = stubs(channel), v3election_pb2_grpc.ElectionStub(channel)
        first = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        second = api.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
        elections.Campaign(epb.CampaignRequest(name=b"F", lease=first, value=b"a"))
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(
                elections.Campaign, epb.CampaignRequest(name=b"F", lease=second, value=b"b"), timeout=WAIT_S
            )
            api.lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=first))
            assert waiting.result(timeout=WAIT_S).leader.lease == second
        assert elections.Leader(epb.LeaderRequest(name=b"F")).kv.value == b"b"
