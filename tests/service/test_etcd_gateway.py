"""etcd's JSON gateway (``/v3/...``) on the HTTP port of ``lakekv serve --etcd-listen``: grpc-gateway v1's
mapping (proto field names, base64 bytes, int64 as strings), its error shape, and the streams."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests
import pytest

from tests.service.etcd_peers import LakekvEtcd, etcdctl, etcdctl_json


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Http:
    """POSTs to one server's HTTP port (the gateway's), with a generous timeout for a loaded machine."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.session = requests.Session()

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.session.post(self.base_url + path, timeout=60, **kwargs)

    def stream(self, path: str, body: dict[str, Any]) -> Iterator[bytes]:
        """The lines of a streaming answer, as they arrive."""
        with self.session.post(self.base_url + path, json=body, stream=True, timeout=60) as response:
            assert response.status_code == 200, response.text
            yield from response.iter_lines()


@pytest.fixture()
def http(lakekv: LakekvEtcd) -> Iterator[Http]:
    client = Http(lakekv.server.url)
    try:
        yield client
    finally:
        client.session.close()


def call(http: Http, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_kv_paths_speak_etcds_json(lakekv: LakekvEtcd, http: Http) -> None:
    put = call(http, "/v3/kv/put", {"key": b64("gw/a"), "value": b64("1")})
    revision = put["header"]["revision"]
    assert isinstance(revision, str) and int(revision) > 0  # int64 as a string, as grpc-gateway writes it
    call(http, "/v3/kv/put", {"key": b64("gw/b"), "value": b64("2")})
    got = call(http, "/v3/kv/range", {"key": b64("gw/"), "range_end": b64("gw0")})
    assert [base64.b64decode(kv["key"]).decode() for kv in got["kvs"]] == ["gw/a", "gw/b"]
    assert got["count"] == "2" and got["kvs"][0]["create_revision"] == revision
    assert "more" not in got  # default values are left out
    txn = call(http, "/v3/kv/txn", {
        "compare": [{"key": b64("gw/a"), "target": "VALUE", "result": "EQUAL", "value": b64("1")}],
        "success": [{"request_put": {"key": b64("gw/a"), "value": b64("10"), "prev_kv": True}}],
    })
    assert txn["succeeded"] is True and base64.b64decode(txn["responses"][0]["response_put"]["prev_kv"]["value"]) == b"1"
    assert etcdctl(lakekv.endpoint, "get", "gw/a", "--print-value-only").stdout == "10\n"  # the same store as gRPC
    deleted = call(http, "/v3/kv/deleterange", {"key": b64("gw/"), "range_end": b64("gw0")})
    assert deleted["deleted"] == "2"


def test_errors_take_grpc_gateways_shape(http: Http) -> None:
    unknown = http.post("/v3/lease/revoke", json={"ID": "12345"})
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": "etcdserver: requested lease not found", "code": 5, "message": "etcdserver: requested lease not found"
    }
    empty_key = http.post("/v3/kv/put", json={"value": b64("x")})
    assert empty_key.status_code == 400 and empty_key.json()["message"] == "etcdserver: key is not provided"
    typo = http.post("/v3/kv/range", json={"kee": b64("x")})  # refused, never ignored
    assert typo.status_code == 400 and "kee" in typo.json()["message"]
    not_json = http.post("/v3/kv/range", data=b"{nope")
    assert not_json.status_code == 400 and not_json.json()["code"] == 3


def test_lease_paths(lakekv: LakekvEtcd, http: Http) -> None:
    granted = call(http, "/v3/lease/grant", {"TTL": "60"})
    lease = granted["ID"]
    assert granted["TTL"] == "60"
    call(http, "/v3/kv/put", {"key": b64("leased"), "value": b64("v"), "lease": lease})
    keepalive = http.post("/v3/lease/keepalive", json={"ID": lease})
    (line,) = keepalive.text.splitlines()  # one request, one response, then the stream ends
    assert json.loads(line)["result"]["TTL"] == "60"
    ttl = call(http, "/v3/lease/timetolive", {"ID": lease, "keys": True})
    assert ttl["grantedTTL"] == "60" and [base64.b64decode(key) for key in ttl["keys"]] == [b"leased"]
    assert {"ID": lease} in call(http, "/v3/lease/leases", {})["leases"]
    assert call(http, "/v3/kv/lease/leases", {}) == call(http, "/v3/lease/leases", {})
    call(http, "/v3/lease/revoke", {"ID": lease})
    assert etcdctl_json(lakekv.endpoint, "get", "leased").get("kvs") is None
    gone = http.post("/v3/lease/keepalive", json={"ID": lease})
    assert "TTL" not in json.loads(gone.text.splitlines()[0])["result"]  # etcd answers TTL 0 (left out): gone


def test_watch_streams_events_until_the_client_leaves(lakekv: LakekvEtcd, http: Http) -> None:
    first = int(call(http, "/v3/kv/put", {"key": b64("w"), "value": b64("1")})["header"]["revision"])
    call(http, "/v3/kv/put", {"key": b64("w"), "value": b64("2")})
    body = {"create_request": {"key": b64("w"), "start_revision": str(first)}}
    lines = http.stream("/v3/watch", body)
    try:
        assert json.loads(next(lines))["result"]["created"] is True
        values: list[bytes] = []
        while len(values) < 2:
            events = json.loads(next(lines))["result"].get("events", [])
            values += [base64.b64decode(event["kv"]["value"]) for event in events]
        assert values == [b"1", b"2"]
        etcdctl(lakekv.endpoint, "put", "w", "3")  # the stream stays open after its request
        later = json.loads(next(lines))["result"]["events"]
        assert base64.b64decode(later[0]["kv"]["value"]) == b"3"
    finally:
        lines.close()  # disconnects: the server ends the watch


def test_lock_and_election_paths(http: Http) -> None:
    lease = call(http, "/v3/lease/grant", {"TTL": "60"})["ID"]
    locked = call(http, "/v3/lock/lock", {"name": b64("gwlock"), "lease": lease})
    assert base64.b64decode(locked["key"]).startswith(b"gwlock/")
    call(http, "/v3/lock/unlock", {"key": locked["key"]})
    won = call(http, "/v3/election/campaign", {"name": b64("gwvote"), "lease": lease, "value": b64("me")})
    leader = call(http, "/v3/election/leader", {"name": b64("gwvote")})
    assert base64.b64decode(leader["kv"]["value"]) == b"me"
    call(http, "/v3/election/proclaim", {"leader": won["leader"], "value": b64("still me")})
    observed = http.stream("/v3/election/observe", {"name": b64("gwvote")})
    first = json.loads(next(observed))["result"]
    observed.close()
    assert base64.b64decode(first["kv"]["value"]) == b"still me"
    call(http, "/v3/election/resign", {"leader": won["leader"]})
    none = http.post("/v3/election/leader", json={"name": b64("gwvote")})
    assert none.status_code == 500 and none.json()["message"] == "election: no leader"


def test_version_is_etcds(http: Http) -> None:
    answer = http.session.get(http.base_url + "/version", timeout=60)
    assert answer.status_code == 200 and answer.json() == {"etcdserver": "3.5.1", "etcdcluster": "3.5.0"}


def test_status_and_members_paths(lakekv: LakekvEtcd, http: Http) -> None:
    status = call(http, "/v3/maintenance/status", {})
    assert status["version"] == "3.5.1" and status["leader"] == status["header"]["member_id"]
    members = call(http, "/v3/cluster/member/list", {})["members"]
    assert [member["clientURLs"] for member in members] == [[f"http://{lakekv.endpoint}"]]


def test_without_the_etcd_api_the_gateway_says_so(tmp_path: Path) -> None:
    from service.testing import ServerProcess

    server = ServerProcess(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        answer = requests.post(f"{server.url}/v3/kv/range", json={"key": b64("k")}, timeout=60)
        assert answer.status_code == 501 and "--etcd-listen" in answer.json()["message"]
    finally:
        server.stop()


def test_with_a_token_the_gateway_takes_the_bearer_and_presents_it_to_grpc(tmp_path: Path) -> None:
    token = "gateway-token-0123456789abcdef"
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log", token=token).start()
    try:
        url = server.server.url + "/v3/kv/put"
        body = {"key": b64("secured"), "value": b64("v")}
        assert requests.post(url, json=body, timeout=60).status_code == 401
        assert requests.post(url, json=body, headers={"Authorization": "Bearer wrong-token-0123456789"},
                             timeout=60).status_code == 403
        accepted = requests.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert accepted.status_code == 200, accepted.text
        got = etcdctl_json(server.endpoint, "get", "secured", user=f"root:{token}")
        assert base64.b64decode(got["kvs"][0]["value"]) == b"v"
    finally:
        server.stop()
