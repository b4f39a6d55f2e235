"""Two ``lakekv serve --etcd-listen`` processes on one store, over gRPC (issue 36, acceptance 3):
a write through A is seen by a linearizable read through B, and a watch on B sees A's writes in
revision order."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from tests.service.etcd_peers import LakekvEtcd

WRITES = 1000


@pytest.fixture()
def two(tmp_path: Path) -> Iterator[tuple[LakekvEtcd, LakekvEtcd]]:
    store = str(tmp_path / "store")
    a = LakekvEtcd(store, tmp_path / "a.log").start()
    b = LakekvEtcd(store, tmp_path / "b.log").start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def test_a_write_on_a_is_read_on_b_and_watched_on_b_in_revision_order(two: tuple[LakekvEtcd, LakekvEtcd]) -> None:
    a, b = two
    with grpc.insecure_channel(a.endpoint) as on_a, grpc.insecure_channel(b.endpoint) as on_b:
        kv_a, kv_b = rpc_pb2_grpc.KVStub(on_a), rpc_pb2_grpc.KVStub(on_b)
        requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
        requests.put(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"shared/", range_end=b"shared0")))
        responses = rpc_pb2_grpc.WatchStub(on_b).Watch(iter(requests.get, None), timeout=300)
        assert next(responses).created
        revisions = []
        for i in range(WRITES):
            put = kv_a.Put(pb.PutRequest(key=b"shared/%d" % (i % 7), value=b"%d" % i))
            revisions.append(put.header.revision)
            got = kv_b.Range(pb.RangeRequest(key=b"shared/%d" % (i % 7)))  # linearizable by default
            assert [(kv.value, kv.mod_revision) for kv in got.kvs] == [(b"%d" % i, put.header.revision)]
        seen: list[int] = []
        while len(seen) < WRITES:
            seen.extend(event.kv.mod_revision for event in next(responses).events)
        requests.put(None)
        responses.cancel()
        assert seen == revisions


def test_compare_and_set_through_both_servers_loses_no_increment(two: tuple[LakekvEtcd, LakekvEtcd]) -> None:
    import threading

    a, b = two
    rounds = 40
    wins = [0] * 4

    def client(n: int) -> None:
        with grpc.insecure_channel((a if n % 2 else b).endpoint) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            for _ in range(rounds):
                while True:  # read, then compare-and-set on the revision read; retry when another client won
                    current = kv.Range(pb.RangeRequest(key=b"counter")).kvs
                    value = int(current[0].value) if current else 0
                    compare = pb.Compare(key=b"counter", target=pb.Compare.MOD, result=pb.Compare.EQUAL,
                                         mod_revision=current[0].mod_revision if current else 0)
                    put = pb.RequestOp(request_put=pb.PutRequest(key=b"counter", value=b"%d" % (value + 1)))
                    if kv.Txn(pb.TxnRequest(compare=[compare], success=[put])).succeeded:
                        wins[n] += 1
                        break

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with grpc.insecure_channel(b.endpoint) as channel:
        (counter,) = rpc_pb2_grpc.KVStub(channel).Range(pb.RangeRequest(key=b"counter")).kvs
    assert wins == [rounds] * 4
    assert int(counter.value) == 4 * rounds and counter.version == 4 * rounds
