"""/healthz, /metrics (Prometheus text) and the access log."""

from __future__ import annotations

import json
import re
import time

import pytest
from test_security import request

from kvclient import RemoteStore
from kvstore.errors import ConflictError


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample, or 0.0 if absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:]+)(?:\{(.*)\})? (\S+)", line)
        if match and match.group(1) == name and ",".join(sorted((match.group(2) or "").split(","))) == wanted:
            return float(match.group(3))
    return 0.0


def scrape(server) -> str:  # type: ignore[no-untyped-def]
    status, headers, body = request(server, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return body.decode()


def test_healthz(server) -> None:
    status, _, body = request(server, "GET", "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_metrics_count_requests_commits_and_conflicts(server, remote_db: RemoteStore) -> None:
    before = scrape(server)
    remote_db.put(b"m", b"1")
    remote_db.get(b"m")
    remote_db.get(b"missing")
    t1, t2 = remote_db.begin(), remote_db.begin()
    t1.put(b"c", b"1")
    t2.put(b"c", b"2")
    t1.commit()
    with pytest.raises(ConflictError):
        t2.commit()
    after = scrape(server)

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    route = "/kv/v1/keys/{key}"
    assert delta("lakekv_http_requests_total", route=route, method="PUT", code="200") == 1
    assert delta("lakekv_http_requests_total", route=route, method="GET", code="200") == 1
    assert delta("lakekv_http_requests_total", route=route, method="GET", code="404") == 1
    assert delta("lakekv_http_requests_total", route="/kv/v1/txns/{txn_id}/commit", method="POST", code="409") == 1
    assert delta("lakekv_commits_total", api="kv") == 1
    assert delta("lakekv_commits_total", api="txn") == 1
    assert delta("lakekv_conflicts_total", api="txn") == 1
    assert delta("lakekv_http_request_duration_seconds_count", route=route) == 3
    # Label values are route templates: no key ever appears in the metrics.
    assert "/kv/v1/keys/bQ" not in after


def test_access_log_has_one_line_per_request(server, remote_db: RemoteStore) -> None:
    remote_db.put(b"logged", b"1")
    path = "/kv/v1/keys/bG9nZ2Vk"  # base64url of b"logged"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in server.log_tail(200_000).splitlines() if "lakekv.access" in line and path in line]
        if lines:
            break
        time.sleep(0.05)
    assert lines and re.search(r'127\.0\.0\.1 "PUT /kv/v1/keys/bG9nZ2Vk" 200 \d+\.\dms$', lines[-1]), lines
