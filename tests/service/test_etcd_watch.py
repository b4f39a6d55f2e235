"""etcd's Watch API on ``lakekv serve --etcd-listen``: the real ``etcdctl watch``, and a gRPC client for the
options etcdctl has no flag for (filters, progress, cancel)."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.api.mvccpb import kv_pb2
from tests.service.etcd_peers import LakekvEtcd, distro_binary, etcdctl, etcdctl_json

# How long a test waits for one expected watch response before failing.
EVENT_TIMEOUT_S = 60.0


class EtcdctlWatch:
    """``etcdctl watch ... -w json`` in the background; :meth:`events` takes the next events it printed."""

    def __init__(self, endpoint: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(distro_binary("etcdctl")), "--endpoints", endpoint, "watch", *args, "-w", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def events(self, count: int) -> list[tuple[str, str, str | None, str | None]]:
        """The next ``count`` events as ``(type, key, value, prev value)``."""
        found: list[tuple[str, str, str | None, str | None]] = []
        while len(found) < count:
            line = self._lines.get(timeout=EVENT_TIMEOUT_S)
            assert line is not None, "etcdctl watch exited"
            if not line.startswith("{"):
                continue
            for event in json.loads(line).get("Events") or []:
                kind = "DELETE" if event.get("type") == 1 else "PUT"
                value = base64.b64decode(event["kv"]["value"]).decode() if "value" in event["kv"] else None
                prev = event.get("prev_kv")
                prev_value = base64.b64decode(prev.get("value", "")).decode() if prev else None
                found.append((kind, base64.b64decode(event["kv"]["key"]).decode(), value, prev_value))
        return found

    def stop(self) -> None:
        self.process.kill()  # by its own PID
        self.process.wait()


@pytest.fixture()
def lakekv(tmp_path: Path) -> Iterator[LakekvEtcd]:
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        yield server
    finally:
        server.kill()


def test_watch_replays_from_a_revision_with_prev_kv_then_follows(lakekv: LakekvEtcd) -> None:
    first = etcdctl_json(lakekv.endpoint, "put", "cfg/a", "1")["header"]["revision"]
    etcdctl(lakekv.endpoint, "put", "cfg/a", "2")
    etcdctl(lakekv.endpoint, "put", "other", "x")
    etcdctl(lakekv.endpoint, "del", "cfg/a")
    watch = EtcdctlWatch(lakekv.endpoint, "--prefix", "cfg/", "--rev", str(first), "--prev-kv")
    try:
        assert watch.events(3) == [
            ("PUT", "cfg/a", "1", None), ("PUT", "cfg/a", "2", "1"), ("DELETE", "cfg/a", None, "2"),
        ]
        etcdctl(lakekv.endpoint, "put", "cfg/b", "3")
        assert watch.events(1) == [("PUT", "cfg/b", "3", None)]
    finally:
        watch.stop()


def test_watch_goes_on_across_a_server_kill_9_and_restart(lakekv: LakekvEtcd) -> None:
    start = etcdctl_json(lakekv.endpoint, "put", "jobs/1", "a")["header"]["revision"]
    watch = EtcdctlWatch(lakekv.endpoint, "--prefix", "jobs/", "--rev", str(start))
    try:
        assert watch.events(1) == [("PUT", "jobs/1", "a", None)]
        etcdctl(lakekv.endpoint, "put", "jobs/2", "b")
        assert watch.events(1) == [("PUT", "jobs/2", "b", None)]
        lakekv.kill()
        lakekv.restart()  # same ports: etcdctl's client reconnects and resumes after the last revision it saw
        etcdctl(lakekv.endpoint, "put", "jobs/3", "c")
        assert watch.events(1) == [("PUT", "jobs/3", "c", None)]  # nothing lost, nothing repeated
    finally:
        watch.stop()


@pytest.fixture()
def stub(lakekv: LakekvEtcd) -> Iterator[Any]:
    channel = grpc.insecure_channel(lakekv.endpoint)
    try:
        yield rpc_pb2_grpc.WatchStub(channel), rpc_pb2_grpc.KVStub(channel)
    finally:
        channel.close()


class Stream:
    """A Watch call whose requests the test sends one by one."""

    def __init__(self, watch_stub: Any) -> None:
        self._requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
        self._responses = watch_stub.Watch(iter(self._requests.get, None), timeout=120)

    def send(self, request: pb.WatchRequest) -> None:
        self._requests.put(request)

    def next(self) -> pb.WatchResponse:
        return next(self._responses)

    def close(self) -> None:
        self._requests.put(None)
        self._responses.cancel()


def test_filters_cancel_and_progress_requests(stub: Any) -> None:
    watch_stub, kv = stub
    stream = Stream(watch_stub)
    try:
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(
            key=b"f/", range_end=b"f0", filters=[pb.WatchCreateRequest.NOPUT])))
        created = stream.next()
        assert created.created and created.watch_id == 0
        kv.Put(pb.PutRequest(key=b"f/1", value=b"x"))
        deleted = kv.DeleteRange(pb.DeleteRangeRequest(key=b"f/1"))
        events = stream.next()
        assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events.events] == [
            (kv_pb2.Event.DELETE, b"f/1", deleted.header.revision)
        ]
        stream.send(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))
        progress = stream.next()
        assert progress.watch_id == -1 and not progress.events and progress.header.revision == deleted.header.revision
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"g", watch_id=7)))
        assert stream.next().watch_id == 7
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"g", watch_id=7)))
        duplicate = stream.next()
        assert duplicate.canceled and "duplicate watch ID" in duplicate.cancel_reason
        stream.send(pb.WatchRequest(cancel_request=pb.WatchCancelRequest(watch_id=7)))
        canceled = stream.next()
        assert canceled.canceled and canceled.watch_id == 7
        kv.Put(pb.PutRequest(key=b"g", value=b"unseen"))
        kv.Put(pb.PutRequest(key=b"f/2", value=b"put: filtered"))
        kv.DeleteRange(pb.DeleteRangeRequest(key=b"f/2"))
        after = stream.next()  # watch 0 sees the delete only; the cancelled watch 7 sees nothing
        assert after.watch_id == 0 and [e.kv.key for e in after.events] == [b"f/2"]
    finally:
        stream.close()


def test_progress_notify_tells_an_idle_watcher_the_revision(tmp_path: Path) -> None:
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log",
                        extra_args=("--etcd-progress-interval", "0.2")).start()
    channel = grpc.insecure_channel(server.endpoint)
    stream = Stream(rpc_pb2_grpc.WatchStub(channel))
    try:
        revision = rpc_pb2_grpc.KVStub(channel).Put(pb.PutRequest(key=b"elsewhere", value=b"x")).header.revision
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"quiet", progress_notify=True)))
        assert stream.next().created
        progress = stream.next()  # no event under "quiet": the next response is a progress notification
        assert progress.watch_id == 0 and not progress.events and progress.header.revision == revision
    finally:
        stream.close()
        channel.close()
        server.stop()


def test_a_graceful_stop_ends_watch_streams_with_server_stopped(lakekv: LakekvEtcd) -> None:
    channel = grpc.insecure_channel(lakekv.endpoint)
    stream = Stream(rpc_pb2_grpc.WatchStub(channel))
    try:
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"k")))
        assert stream.next().created
        assert lakekv.server.stop() == 0  # SIGTERM: the open watch must not hold the stop for its grace period
        with pytest.raises(grpc.RpcError) as ended:
            stream.next()
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert ended.value.details() == "etcdserver: server stopped"  # clients retry it, on another server
    finally:
        stream.close()
        channel.close()


def test_a_start_below_the_compaction_is_answered_with_compact_revision(stub: Any) -> None:
    watch_stub, kv = stub
    first = kv.Put(pb.PutRequest(key=b"c", value=b"1")).header.revision
    last = kv.Put(pb.PutRequest(key=b"c", value=b"2")).header.revision
    kv.Compact(pb.CompactionRequest(revision=last))
    stream = Stream(watch_stub)
    try:
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"c", start_revision=first)))
        assert stream.next().created
        refused = stream.next()
        assert refused.canceled and refused.compact_revision == last
    finally:
        stream.close()


def test_fragment_splits_a_large_response(stub: Any) -> None:
    watch_stub, kv = stub
    value = b"v" * (400 * 1024)  # each put under etcd's 1.5 MiB request limit; a replay of all five is over it
    revision = kv.Put(pb.PutRequest(key=b"big/0", value=value)).header.revision
    for i in range(1, 5):
        kv.Put(pb.PutRequest(key=b"big/%d" % i, value=value))
    stream = Stream(watch_stub)
    try:
        stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(
            key=b"big/", range_end=b"big0", start_revision=revision, fragment=True)))
        assert stream.next().created
        parts = [stream.next()]
        while parts[-1].fragment:
            parts.append(stream.next())
        assert len(parts) > 1
        assert [e.kv.key for part in parts for e in part.events] == [b"big/%d" % i for i in range(5)]
    finally:
        stream.close()


class ExpiringLeases:
    """A lease hook giving lease 5's keys a row expiry (as a Lease service may), here long past: the row
    is expired from its commit on."""

    def check(self, txn: Any, lease: int) -> None:
        if lease != 5:
            from service.etcd import errors

            raise errors.LEASE_NOT_FOUND

    def on_put(self, txn: Any, key: bytes, old_lease: int, new_lease: int) -> int | None:
        return 1 if new_lease == 5 else None  # 1 ms after the epoch

    def on_delete(self, txn: Any, key: bytes, old_lease: int) -> None:
        return None

    def live(self, lease: int) -> bool:
        return True


def test_a_row_expiry_is_no_watch_event(tmp_path: Path) -> None:
    """Only commits make events: an expiring row would otherwise be reported with an old revision."""
    import asyncio

    import kvstore
    from service.config import ServerConfig
    from service.etcd import server as etcd_server
    from service.testing import free_port

    port = free_port()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with kvstore.open(str(tmp_path / "store")) as db:
        config = ServerConfig(url=str(tmp_path / "store"), etcd_listen=f"127.0.0.1:{port}")
        running = asyncio.run_coroutine_threadsafe(etcd_server.start(config, db), loop).result(60)
        running.context.keyspace.leases = ExpiringLeases()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stream = Stream(rpc_pb2_grpc.WatchStub(channel))
        try:
            kv = rpc_pb2_grpc.KVStub(channel)
            stream.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=b"w/", range_end=b"w0")))
            assert stream.next().created
            leased = kv.Put(pb.PutRequest(key=b"w/leased", value=b"x", lease=5)).header.revision
            assert [e.kv.mod_revision for e in stream.next().events] == [leased]
            assert kv.Range(pb.RangeRequest(key=b"w/leased")).count == 0  # expired
            later = kv.Put(pb.PutRequest(key=b"w/later", value=b"y")).header.revision
            assert [(e.kv.key, e.kv.mod_revision) for e in stream.next().events] == [(b"w/later", later)]
        finally:
            stream.close()
            channel.close()
            asyncio.run_coroutine_threadsafe(running.stop(5), loop).result(60)
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
