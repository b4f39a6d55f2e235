"""lakekv's HTTP API takes the store-wide revision (issue 36: "Every API takes that number"): a read at a
revision, a watch from a key's revision, message ids and Last-Event-ID that are revisions, and Compact.

The deprecated version parameters (``?version=``, ``start=``, ``end=``) still mean versions."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import kvstore
from service.testing import ServerProcess
from tests.service.http_client import call_json, path_key


def _stream(server: ServerProcess, query: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """A bounded watch's whole answer (the query must bound it, or be refused)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("GET", f"/kv/v1/watch?{query}", headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def _messages(body: str) -> list[tuple[str, dict]]:
    """``(id, data)`` of each message of an event stream."""
    found = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "data" in lines:
            found.append((lines["id"], json.loads(lines["data"])))
    return found


def _put(db: kvstore.Store, key: bytes, value: bytes) -> int:
    return db.put(key, value)


def test_a_read_at_a_revision_sees_the_store_right_after_that_commit(server: ServerProcess) -> None:
    key = b"rev-" + uuid.uuid4().hex.encode()
    with kvstore.open(server.url) as db:
        first = db.put(key, b"1")
        db.put(key, b"2")
    status, body = call_json(server, "GET", f"/kv/v1/keys/{path_key(key)}?revision={first}")
    assert status == 200 and body["revision"] == first and body["value"] == "MQ=="
    status, body = call_json(server, "GET", f"/kv/v1/keys/{path_key(key)}?revision={first - 1}")
    assert status == 404  # not written yet at that revision


def test_a_read_at_a_future_revision_or_with_both_numbers_is_400(server: ServerProcess) -> None:
    status, info = call_json(server, "GET", "/kv/v1/info")
    assert status == 200 and info["revision"] == info["seq"]
    key = path_key(b"anything")
    status, body = call_json(server, "GET", f"/kv/v1/keys/{key}?revision={info['revision'] + 1000}")
    assert status == 400 and body["error"]["type"] == "ValueError"
    status, body = call_json(server, "GET", f"/kv/v1/keys/{key}?revision=1&version=1")
    assert status == 400 and "revision" in body["error"]["message"]


def test_a_keys_revision_starts_a_watch_and_message_ids_are_revisions(server: ServerProcess) -> None:
    prefix = b"revwatch-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        revisions = [db.put(prefix + b"%d" % i, b"v%d" % i) for i in range(4)]
    query = f"prefix={path_key(prefix)}&start_revision={revisions[1]}&end_revision={revisions[-1]}"
    status, body = _stream(server, query)
    assert status == 200, body
    messages = _messages(body)
    seen = [event["revision"] for _, data in messages for event in data["events"]]
    assert seen == revisions[1:]
    # Each message's id is the revision it is complete through, so Last-Event-ID resumes right after it.
    first_id, first_data = messages[0]
    assert first_id == f"r{first_data['revision']}" and first_data["revision"] >= revisions[1]
    status, body = _stream(server, f"prefix={path_key(prefix)}&end_revision={revisions[-1]}",
                           headers={"Last-Event-ID": first_id})
    assert status == 200
    assert [e["revision"] for _, data in _messages(body) for e in data["events"]] == [
        r for r in revisions if r > first_data["revision"]]
    # The stream says where it is in revisions as well.
    assert f": next-revision {revisions[-1] + 1}" in body


def test_the_deprecated_version_parameters_still_mean_versions(server: ServerProcess) -> None:
    prefix = b"oldwatch-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        start = db.refresh() + 1
        seq = db.put(prefix + b"k", b"v")
        end = db.refresh()
    status, body = _stream(server, f"prefix={path_key(prefix)}&start={start}&end={end}")
    assert status == 200
    assert [e["seq"] for _, data in _messages(body) for e in data["events"]] == [seq]
    status, body = call_json(server, "GET", f"/kv/v1/keys/{path_key(prefix + b'k')}?version={end}")
    assert status == 200 and body["revision"] == seq


def test_a_numeric_last_event_id_is_an_old_version_id_and_resumes_after_that_version(server: ServerProcess) -> None:
    prefix = b"oldid-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        db.put(prefix + b"a", b"1")
        version = db.refresh()
        later = db.put(prefix + b"b", b"2")
    status, body = _stream(server, f"prefix={path_key(prefix)}&end_revision={later}",
                           headers={"Last-Event-ID": str(version)})
    assert status == 200
    assert [e["revision"] for _, data in _messages(body) for e in data["events"]] == [later]
    status, body = _stream(server, f"prefix={path_key(prefix)}&end_revision={later}",
                           headers={"Last-Event-ID": "v3"})
    assert status == 400 and "r<revision>" in body


@pytest.mark.parametrize("query", [
    "start_revision=1&start=1", "end_revision=1&end=1", "start_revision=-1", "end_revision=-1",
    "start_revision=x", "end_revision=999999999",
])
def test_bad_revision_watch_parameters_are_400(server: ServerProcess, query: str) -> None:
    status, body = _stream(server, query)
    assert status == 400, (query, body)


@pytest.fixture()
def own_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of its own: compaction raises the floor of the whole store."""
    process = ServerProcess(str(tmp_path / "store"), tmp_path / "server.log").start()
    try:
        yield process
    finally:
        process.stop()


def test_compact_refuses_reads_and_watches_below_the_floor_with_410(own_server: ServerProcess) -> None:
    with kvstore.open(own_server.url) as db:
        first = db.put(b"c/a", b"1")
        db.refresh()
        old_version = db.version
        second = db.put(b"c/a", b"2")
        third = db.put(b"c/b", b"3")
    assert call_json(own_server, "GET", "/kv/v1/compact") == (200, {"compacted_revision": 0})
    assert call_json(own_server, "POST", "/kv/v1/compact", {"revision": second}) == (
        200, {"compacted_revision": second})
    assert call_json(own_server, "GET", "/kv/v1/compact") == (200, {"compacted_revision": second})
    key = path_key(b"c/a")
    status, body = call_json(own_server, "GET", f"/kv/v1/keys/{key}?revision={first}")
    assert status == 410 and body["error"]["type"] == "SnapshotTooOldError"
    status, body = call_json(own_server, "GET", f"/kv/v1/keys/{key}?version={old_version}")
    assert status == 410 and body["error"]["type"] == "SnapshotTooOldError"
    status, body = _stream(own_server, f"start_revision={first}&end_revision={third}")
    assert status == 410 and "SnapshotTooOldError" in body
    status, body = _stream(own_server, f"start={old_version}&end_revision={third}")
    assert status == 410 and "SnapshotTooOldError" in body
    # At the floor and above: still readable and watchable.
    status, body = call_json(own_server, "GET", f"/kv/v1/keys/{key}?revision={second}")
    assert status == 200 and body["revision"] == second
    status, body = _stream(own_server, f"start_revision={second}&end_revision={third}")
    assert [e["revision"] for _, data in _messages(body) for e in data["events"]] == [second, third]
    # Compacting again at or below the floor is etcd's compacted error; a future revision is a ValueError.
    status, body = call_json(own_server, "POST", "/kv/v1/compact", {"revision": second})
    assert status == 410 and body["error"]["type"] == "SnapshotTooOldError"
    status, body = call_json(own_server, "POST", "/kv/v1/compact", {"revision": third + 100})
    assert status == 400 and body["error"]["type"] == "ValueError"
    status, body = call_json(own_server, "POST", "/kv/v1/compact", {"revison": third})
    assert status == 400  # an unknown field is refused, not ignored


def test_a_scan_at_a_revision_pages_through_one_past_view(server: ServerProcess) -> None:
    prefix = b"revscan-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        for i in range(3):
            db.put(prefix + b"%d" % i, b"old")
        revision = db.put(prefix + b"3", b"old")
        for i in range(4):
            db.put(prefix + b"%d" % i, b"new")
        db.delete(prefix + b"0")
    items, cursor, query = [], None, f"prefix={path_key(prefix)}&revision={revision}&page_size=3"
    while True:
        status, page = call_json(server, "GET", f"/kv/v1/scan?{query}" + (f"&cursor={cursor}" if cursor else ""))
        assert status == 200, page
        items += page["items"]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert [item[1] for item in items] == ["b2xk"] * 4  # base64 of b"old": the view at that revision
    status, page = call_json(server, "GET", f"/kv/v1/scan?prefix={path_key(prefix)}&revision={revision}"
                             "&consistency=serializable")
    assert status == 400


def test_the_remote_client_watches_from_a_keys_revision(server: ServerProcess) -> None:
    prefix = b"remoterev-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        first = db.put(prefix + b"a", b"1")
        second = db.put(prefix + b"a", b"2")
        with db.watch(prefix, start_revision=second, end=db.refresh()) as watch:
            assert [(e.seq, e.value) for e in watch] == [(second, b"2")]
            assert watch.next_revision == second + 1
        with pytest.raises(TypeError):
            db.watch(prefix, start=1, start_revision=first)
