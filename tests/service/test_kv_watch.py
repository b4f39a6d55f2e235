"""GET /kv/v1/watch (service.kv_watch) and kvclient.watch.RemoteWatch on one server."""

from __future__ import annotations

import http.client
from pathlib import Path
import threading
import time
import uuid

import pytest

import kvstore
from service.testing import ServerProcess


def test_a_remote_watch_replays_then_follows_in_commit_order(server: ServerProcess) -> None:
    prefix = b"watch-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        first = db.put(prefix + b"a", b"1")
        start = db.refresh()
        db.delete(prefix + b"a")
        watch = db.watch(prefix, start=start)
        seen = []

        def follow() -> None:
            for event in watch:
                seen.append(event)
                if len(seen) == 4:
                    return

        reader = threading.Thread(target=follow)
        reader.start()
        time.sleep(0.3)
        second = db.put(prefix + b"b", b"2", ttl=0.5)
        db.put(b"elsewhere-" + uuid.uuid4().hex.encode(), b"x")  # outside the prefix
        reader.join(timeout=30)
        watch.close()
        assert not reader.is_alive()
    assert [(e.key, e.value, e.kind) for e in seen] == [
        (prefix + b"a", b"1", "put"), (prefix + b"a", None, "delete"), (prefix + b"b", b"2", "put"),
        (prefix + b"b", None, "expire"),
    ]
    assert seen[0].seq == first and seen[2].seq == second == seen[3].seq
    assert [e.version for e in seen[:3]] == sorted(e.version for e in seen[:3])


def test_a_watch_resumes_from_last_event_id(server: ServerProcess) -> None:
    prefix = b"resume-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        start = db.refresh() + 1
        seqs = [db.put(prefix + b"%d" % i, b"v") for i in range(3)]
        with db.watch(prefix, start=start) as watch:
            first = next(watch)
            resume_from = watch.next_version
        assert first.seq == seqs[0]
        with db.watch(prefix, start=resume_from, end=db.refresh()) as rest:
            assert [e.seq for e in rest] == seqs[1:]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    prefix_text = __import__("base64").urlsafe_b64encode(prefix).rstrip(b"=").decode()
    # Message ids are revisions: Last-Event-ID resumes right after the first event's commit.
    conn.request("GET", f"/kv/v1/watch?prefix={prefix_text}&end_revision={seqs[-1]}",
                 headers={"Last-Event-ID": f"r{first.seq}"})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    assert response.status == 200 and f"id: r{seqs[1]}\n" in body and f"id: r{seqs[2]}\n" in body
    assert f"id: r{first.seq}\n" not in body


def test_bad_watch_arguments_are_refused_by_the_client(server: ServerProcess) -> None:
    with kvstore.open(server.url) as db:
        with pytest.raises(TypeError):
            db.watch(start=-1)
        with pytest.raises(TypeError):
            db.watch("prefix")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            db.watch(start=5, end=2)


@pytest.mark.parametrize("query", ["start=x", "start=-1", "end=-2", "prefix=%%%", "since=3"])
def test_bad_watch_parameters_are_400(server: ServerProcess, query: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", f"/kv/v1/watch?{query}")
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.status == 400, query


def test_close_from_another_thread_ends_a_waiting_remote_watch(server: ServerProcess) -> None:
    with kvstore.open(server.url) as db:
        watch = db.watch(b"quiet-" + uuid.uuid4().hex.encode())
        done = threading.Event()

        def follow() -> None:
            for _ in watch:
                pass
            done.set()

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(0.3)
        watch.close()
        assert done.wait(10)


def test_a_start_retention_has_removed_is_a_410_before_any_stream(tmp_path: Path) -> None:
    store_dir = str(tmp_path / "store")
    gc_now = {"retention_window_s": 0.0, "gc_min_roots": 1, "gc_grace_s": 0.0, "background_maintenance": False}
    with kvstore.open(store_dir, **gc_now) as db:
        for i in range(5):
            db.put(b"kv/k%d" % i, b"v")
            db.flush()
        db.compact(full=True)
        gone = db.gc().deleted_roots
        assert gone
    server = ServerProcess(store_dir, tmp_path / "server.log").start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", f"/kv/v1/watch?start={gone[0]}")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        assert response.status == 410 and b"SnapshotTooOldError" in body
        with kvstore.open(server.url) as db, pytest.raises(kvstore.SnapshotTooOldError):
            next(iter(db.watch(start=gone[0])))
    finally:
        server.stop()


def test_a_bounded_watch_ends_when_its_last_versions_have_no_event_under_the_prefix(server: ServerProcess) -> None:
    prefix = b"bounded-" + uuid.uuid4().hex.encode() + b"/"
    with kvstore.open(server.url) as db:
        start = db.refresh() + 1
        seq = db.put(prefix + b"k", b"v")
        db.put(b"elsewhere-" + uuid.uuid4().hex.encode(), b"x")  # the last version: not under the prefix
        end = db.refresh()
        done = threading.Event()
        seen: list = []

        def follow() -> None:
            with db.watch(prefix, start=start, end=end) as watch:
                seen.extend(watch)
            done.set()

        threading.Thread(target=follow, daemon=True).start()
        assert done.wait(30), "the watch kept reconnecting past its end"
    assert [e.seq for e in seen] == [seq]
