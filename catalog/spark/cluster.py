"""A Spark standalone cluster on the loopback address, from the pyspark wheel (tests, benchmarks).

A master and ``workers`` workers are started with the wheel's
``bin/spark-class``, each in its own process group, bound to 127.0.0.1 on
free ports, and are stopped by their PIDs. Each worker offers ``cores``
cores; executors start Python workers with the driver's ``PYSPARK_PYTHON``.

>>> with StandaloneCluster(workers=2) as cluster:          # doctest: +SKIP
...     spark = local_spark(cluster.master_url)

Processes started here get ``env`` as their whole environment (by default
this process's, without any ``AWS_*`` variable: storage credentials reach
executors only as catalog or source options).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["StandaloneCluster", "spark_class", "clean_environment"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> str:
    """The ``spark-class`` launcher inside the installed pyspark wheel.

    Raises:
        ModuleNotFoundError: pyspark is not installed.
        FileNotFoundError: the wheel has no ``bin/spark-class``.
    """
    import pyspark

    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
    if not path.is_file():
        raise FileNotFoundError(f"pyspark has no bin/spark-class at {path}")
    return str(path)


def clean_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without ``AWS_*`` variables, on the loopback address."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("AWS_")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive_workers(state: dict[str, object] | None) -> int:
    alive = (state or {}).get("aliveworkers")
    return alive if isinstance(alive, int) else 0


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, on 127.0.0.1."""

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "2g",
        base_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers must be a positive int, got {workers!r}")
        if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
            raise ValueError(f"cores must be a positive int, got {cores!r}")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="lakekv-spark-cluster-"))
        self.env = dict(env) if env is not None else clean_environment()
        self.startup_timeout = startup_timeout
        self.master_url = ""
        self.master_ui = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def pids(self) -> list[int]:
        """The PIDs of the master and workers this handle started and has not stopped (each leads a process group)."""
        return [proc.pid for proc in self._procs]

    @property
    def log_dir(self) -> Path:
        """Where the master's, the workers' and (under ``work/``) the executors' output goes."""
        return self.base_dir

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return when every worker is registered.

        On any failure the processes already started are stopped (the log
        directory is kept) before the exception propagates.

        Raises:
            ModuleNotFoundError: pyspark is not installed.
            FileNotFoundError: the pyspark wheel has no ``bin/spark-class``.
            RuntimeError: a Spark process exited, or the master's web UI or every
                worker was not up within ``startup_timeout``; the message ends with
                the tail of each log.
            OSError: a log file could not be opened or a process not started.
        """
        launcher = spark_class()
        port, ui_port = _free_port(), _free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self.master_ui = f"http://127.0.0.1:{ui_port}"
        try:
            self._launch("master", [launcher, _MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)])
            self._wait(lambda state: state is not None, "the master's web UI")
            for n in range(self.workers):
                work = self.base_dir / "work" / f"worker-{n}"
                work.mkdir(parents=True, exist_ok=True)
                self._launch(
                    f"worker-{n}",
                    [launcher, _WORKER, "--host", "127.0.0.1", "--webui-port", "0", "--cores", str(self.cores),
                     "--memory", self.memory, "--work-dir", str(work), self.master_url],
                )
            self._wait(lambda state: _alive_workers(state) >= self.workers, f"{self.workers} alive workers")
        except BaseException:
            self.stop(remove_dir=False)
            raise
        return self

    def _launch(self, name: str, args: list[str]) -> None:
        with open(self.base_dir / f"{name}.out", "wb") as out:
            self._procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=self.env, cwd=self.base_dir, start_new_session=True))

    def state(self) -> dict[str, object] | None:
        """The master's JSON status (workers, applications), or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.master_ui + "/json/", timeout=5) as response:
                state: dict[str, object] = json.load(response)
                return state
        except OSError:
            return None

    def _wait(self, ready: Callable[[dict[str, object] | None], bool], what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark process exited with code {proc.returncode} while waiting for {what}:\n"
                                       + self.log_tail())
            if ready(self.state()):
                return
            time.sleep(0.5)
        raise RuntimeError(f"Spark standalone cluster: no {what} after {self.startup_timeout}s:\n{self.log_tail()}")

    def logs(self) -> str:
        """Every log the cluster wrote: master, workers, and each executor's stdout/stderr."""
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.base_dir.rglob("*"))
                         if path.is_file() and (path.suffix == ".out" or path.name in ("stdout", "stderr")))

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the master's and each worker's ``.out`` log, under a header per file."""
        chunks = []
        for path in sorted(self.base_dir.glob("*.out")):
            chunks.append(f"--- {path.name} ---\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(chunks) or "(no Spark output)"

    def stop(self, *, remove_dir: bool = True, grace: float = 30.0) -> None:
        """SIGTERM each process group (workers first: they stop their executors), SIGKILL after ``grace``; idempotent."""
        procs, self._procs = self._procs, []
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        if remove_dir and self._owns_dir:
            shutil.rmtree(self.base_dir)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
