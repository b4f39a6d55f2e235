"""A ``lakekv serve`` process for tests and benchmarks.

Binds 127.0.0.1 on a free port, waits until ``/healthz`` answers, and is
stopped by its PID (SIGTERM, or SIGKILL for crash tests), never by name.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

# Starting means: import the server, open the store, bind. Generous for a
# loaded 2-core machine.
_START_TIMEOUT_S = 90.0


# Where test servers' ports come from: below the kernel's ephemeral range.
# A port the kernel hands out for bind(("", 0)) comes from that range, and so
# does the source port of every outgoing connection (etcdctl, gRPC and HTTP
# clients): between the probe closing its socket and the server binding, a
# client's connection could take the port ("address already in use").
_LOW_PORT = 10000


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere the probe below still checks the port


def free_port() -> int:
    """A TCP port on 127.0.0.1, free a moment ago, outside the kernel's ephemeral range.

    Raises:
        RuntimeError: no free port in the range below the ephemeral ports.
    """
    top = _ephemeral_start()
    candidates = list(range(_LOW_PORT, top)) if top > _LOW_PORT + 100 else []
    random.shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken: by a server of another test, or anything else
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {_LOW_PORT}-{top - 1}")


class ServerProcess:
    """One ``lakekv serve URL`` subprocess; its output goes to ``log_path``."""

    def __init__(
        self, store_url: str, log_path: Path, token: str | None = None, port: int | None = None,
        extra_args: tuple[str, ...] = (), tls: bool = False,
    ) -> None:
        self.store_url = store_url
        self.log_path = log_path
        self.token = token
        self.port = port or free_port()
        self.extra_args = extra_args
        self.tls = tls  # the caller passes --tls-cert/--tls-key in extra_args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "server not started"
        return self.process.pid

    def start(self) -> ServerProcess:
        """Start the server and wait until it answers ``/healthz``.

        Raises:
            RuntimeError: it exited or did not become healthy in time (log attached).
        """
        env = dict(os.environ)
        env.pop("LAKEKV_TOKEN", None)
        if self.token is not None:
            env["LAKEKV_TOKEN"] = self.token
        command = [
            sys.executable, "-m", "kvstore.cli", "serve", self.store_url,
            "--host", "127.0.0.1", "--port", str(self.port), *self.extra_args,
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log_tail()}")
            if self.healthy():
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server not healthy after {_START_TIMEOUT_S}s:\n{self.log_tail()}")

    def healthy(self) -> bool:
        conn: http.client.HTTPConnection
        if self.tls:  # readiness only: the certificate is the test's to check
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=2, context=context)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            return response.status == 200 and json.loads(response.read()).get("status") == "ok"
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful: in-flight requests finish) and wait; return the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"server ignored SIGTERM for {timeout}s:\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL by PID: a crash, nothing flushed or closed."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"
