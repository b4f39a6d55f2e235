"""``etcdctl endpoint status``, ``endpoint health`` and ``member list`` against ``lakekv serve --etcd-listen``:
the members are the servers sharing the store."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from tests.service.etcd_peers import LakekvEtcd, etcdctl, etcdctl_json


def test_endpoint_status_and_health(tmp_path: Path) -> None:
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        revision = etcdctl_json(server.endpoint, "put", "k", "v")["header"]["revision"]
        (status,) = etcdctl_json(server.endpoint, "endpoint", "status")
        assert status["Endpoint"] == server.endpoint
        answer = status["Status"]
        assert answer["version"] == "3.5.1" and answer["dbSize"] > 0
        assert answer["leader"] == answer["header"]["member_id"]  # every server serves writes: each leads itself
        assert answer["raftIndex"] == revision and answer["header"]["revision"] == revision
        health = etcdctl(server.endpoint, "endpoint", "health").stdout
        assert f"{server.endpoint} is healthy" in health
        with grpc.insecure_channel(server.endpoint) as channel:
            maintenance = rpc_pb2_grpc.MaintenanceStub(channel)
            assert not maintenance.Alarm(pb.AlarmRequest(action=pb.AlarmRequest.GET)).alarms
            with pytest.raises(grpc.RpcError) as refused:
                maintenance.Alarm(pb.AlarmRequest(action=pb.AlarmRequest.ACTIVATE, alarm=pb.NOSPACE))
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        server.stop()


def test_member_list_is_the_servers_on_the_store(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    a = LakekvEtcd(store, tmp_path / "a.log").start()
    b = LakekvEtcd(store, tmp_path / "b.log").start()
    try:
        listed = etcdctl_json(a.endpoint, "member", "list")
        urls = sorted(url for member in listed["members"] for url in member["clientURLs"])
        assert urls == sorted([f"http://{a.endpoint}", f"http://{b.endpoint}"])
        assert {member["ID"] for member in listed["members"]} == {
            etcdctl_json(a.endpoint, "endpoint", "status")[0]["Status"]["header"]["member_id"],
            etcdctl_json(b.endpoint, "endpoint", "status")[0]["Status"]["header"]["member_id"],
        }
        table = etcdctl(b.endpoint, "member", "list").stdout
        assert table.count("started") == 2
        assert etcdctl_json(a.endpoint, "endpoint", "status")[0]["Status"]["header"]["cluster_id"] == listed[
            "header"
        ]["cluster_id"]
        b.stop()  # a clean stop leaves the list at once
        after = etcdctl_json(a.endpoint, "member", "list")
        assert [member["clientURLs"] for member in after["members"]] == [[f"http://{a.endpoint}"]]
    finally:
        a.stop()
        b.stop()
