"""Long-running etcd clients for the lease, lock and election tests: ``etcdctl lock``/``elect`` in the
background with their output read line by line, and a gRPC watch that hands over events as they come.

Waiting is on the client's own output or on watch events (each with a generous timeout that only a broken
server reaches), never on a sleep.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import grpc

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.api.mvccpb import kv_pb2
from tests.service.etcd_peers import distro_binary

# How long a test waits for an expected line or event before failing (a loaded 2-core machine is slow).
WAIT_S = 60.0


class Etcdctl:
    """``etcdctl --endpoints E args...`` running in the background; :meth:`line` takes its next output line."""

    def __init__(self, endpoint: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(distro_binary("etcdctl")), "--endpoints", endpoint, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "ETCDCTL_API": "3"},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self, timeout: float = WAIT_S) -> str:
        """The next line it prints (fails the test if it exits first or prints nothing in time)."""
        line = self._lines.get(timeout=timeout)
        assert line is not None, f"etcdctl exited with {self.process.wait()}"
        return line

    def printed_nothing_yet(self) -> bool:
        return self._lines.empty() and self.process.poll() is None

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()


class GrpcWatch:
    """A gRPC watch of ``key`` (to ``range_end``, etcd's way) from ``start_revision``; :meth:`next_event` blocks."""

    def __init__(self, channel: grpc.Channel, key: bytes, start_revision: int, range_end: bytes = b"") -> None:
        self._requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
        create = pb.WatchCreateRequest(key=key, range_end=range_end, start_revision=start_revision)
        self._requests.put(pb.WatchRequest(create_request=create))
        self._call = rpc_pb2_grpc.WatchStub(channel).Watch(self._request_stream())
        self._events: queue.Queue[kv_pb2.Event | BaseException] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _request_stream(self) -> Iterator[pb.WatchRequest]:
        while (request := self._requests.get()) is not None:
            yield request

    def _pump(self) -> None:
        try:
            for response in self._call:
                for event in response.events:
                    self._events.put(event)
        except grpc.RpcError as exc:
            self._events.put(exc)

    def next_event(self, timeout: float = WAIT_S) -> kv_pb2.Event:
        event = self._events.get(timeout=timeout)
        if isinstance(event, BaseException):
            raise event
        return event

    def close(self) -> None:
        self._requests.put(None)
        self._call.cancel()


def stubs(channel: grpc.Channel) -> Any:
    """The KV and Lease stubs of a channel, as attributes ``kv`` and ``lease``."""

    class Stubs:
        kv = rpc_pb2_grpc.KVStub(channel)
        lease = rpc_pb2_grpc.LeaseStub(channel)

    return Stubs
