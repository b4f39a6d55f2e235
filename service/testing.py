"""A ``lakekv serve`` process for tests and benchmarks.

Binds 127.0.0.1 on a free port, waits until ``/healthz`` answers, and is
stopped by its PID (SIGTERM, or SIGKILL for crash tests), never by name.
"""

from __future__ import annotations

import http.client
import json
import os
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
