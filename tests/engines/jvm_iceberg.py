"""A JVM Iceberg engine for tests: Spark 4.1.1 with Apache Iceberg's own
``iceberg-spark-runtime-4.1_2.13``, pointed at ``lakekv serve`` as an Iceberg
REST catalog.

Both come from the registries into a cache outside the repository
(``make jvm-iceberg-engine``: pyspark 4.1.1 from PyPI, the runtime jar from
Maven Central; ``LAKEKV_JVM_ICEBERG_HOME`` names the folder). Why this engine
and not Trino: it is the smaller download (455 MB + 48 MB against Trino 476's
821 MB server + 19 MB CLI) and it starts in seconds. Why not the project's
pyspark 4.3: Iceberg 1.12 ships runtimes for Spark 3.5, 4.0 and 4.1 only,
and the 4.1 runtime does not load on 4.3.

The engine is one separate process (jvm_iceberg_worker.py under the cached
pyspark), started once and reused: ``run_sql(catalog_uri, statements)`` runs
the statements in a Spark catalog configured for that REST endpoint
(``type=rest``, ``uri``, optional ``warehouse`` and ``token``, catalog caching
off so every statement loads the table afresh) and returns the last
statement's rows as tuples of plain Python values.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any

# Keep in step with the Makefile's JVM_ICEBERG_HOME (it exports this variable to pytest).
DEFAULT_HOME = Path.home() / ".cache" / "lakekv" / "engines" / "spark-4.1.1-iceberg-1.12.0"
WORKER = Path(__file__).with_name("jvm_iceberg_worker.py")
# Starting means: a JVM, Spark's context and the runtime jar on a loaded
# 2-core machine (about 5 s when idle).
_START_TIMEOUT_S = 180.0


class JvmEngineError(RuntimeError):
    """A statement failed inside the JVM engine; ``java_type`` is the Python-side exception's type name."""

    def __init__(self, java_type: str, message: str) -> None:
        super().__init__(f"{java_type}: {message}")
        self.java_type = java_type
        self.message = message


def engine_home() -> Path:
    """The cached engine: ``python/`` (pyspark 4.1.1) and ``jars/`` (the Iceberg runtime).

    Raises:
        FileNotFoundError: not fetched yet, naming the make target that fetches it.
    """
    home = Path(os.environ.get("LAKEKV_JVM_ICEBERG_HOME") or DEFAULT_HOME)
    if not (home / ".complete").exists():
        raise FileNotFoundError(
            f"the JVM Iceberg engine is not in {home}: run `make jvm-iceberg-engine` "
            "(make test does it first), or set LAKEKV_JVM_ICEBERG_HOME"
        )
    return home


class JvmIcebergEngine:
    """One Spark-with-Iceberg process; use as a context manager or call ``start``/``stop``."""

    def __init__(self, log_path: Path, home: Path | None = None) -> None:
        self.home = home or engine_home()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.spark_version = ""

    def start(self) -> JvmIcebergEngine:
        """Start the worker and wait for its ``ready``.

        Raises:
            FileNotFoundError: the cached engine has no jars.
            RuntimeError: the worker exited or did not answer in time (its log attached).
        """
        jars = sorted(str(p) for p in (self.home / "jars").glob("*.jar"))
        if not jars:
            raise FileNotFoundError(f"no jars in {self.home / 'jars'}")
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
        # Only the cached pyspark: the project's 4.3 must not be importable there.
        env["PYTHONPATH"] = str(self.home / "python")
        env["PYSPARK_PYTHON"] = sys.executable
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["TZ"] = "UTC"  # timestamps come back as naive UTC datetimes
        # Short queries on 2 cores: the C1 compiler alone and the serial GC
        # start faster (as tests/spark's QUICK_JVM).
        env["PYSPARK_SUBMIT_ARGS"] = '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'
        # A socket pair, not stdin/stdout: the JVM inherits the worker's
        # standard streams and may print on them.
        ours, theirs = Pipe(duplex=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKER), str(theirs.fileno()), ",".join(jars)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                pass_fds=(theirs.fileno(),),
            )
        theirs.close()
        self.conn = ours
        waited = 0.0
        while not ours.poll(1.0):
            waited += 1.0
            if self.process.poll() is not None:
                raise RuntimeError(f"JVM engine exited with {self.process.returncode}:\n{self.log_tail()}")
            if waited >= _START_TIMEOUT_S:
                self.process.kill()
                self.process.wait()
                raise RuntimeError(f"JVM engine not ready after {_START_TIMEOUT_S}s:\n{self.log_tail()}")
        kind, version = self._receive()
        if kind != "ready":
            raise RuntimeError(f"JVM engine said {kind!r} before ready:\n{self.log_tail()}")
        self.spark_version = version
        return self

    def _receive(self) -> Any:
        assert self.conn is not None, "engine not started"
        try:
            return self.conn.recv()
        except EOFError:
            raise RuntimeError(f"JVM engine died:\n{self.log_tail()}") from None

    def run_sql(
        self, catalog_uri: str, statements: str | Sequence[str], *,
        warehouse: str | None = None, token: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """Run ``statements`` in order in a REST catalog at ``catalog_uri``; the last one's rows.

        Tables are named ``ns.table`` (the statements run inside that catalog).

        Raises:
            ValueError: no statement, or a statement that is not a string.
            JvmEngineError: a statement failed (the engine stays usable).
        """
        batch = [statements] if isinstance(statements, str) else list(statements)
        if not batch or not all(isinstance(s, str) and s.strip() for s in batch):
            raise ValueError(f"statements must be one or more non-empty SQL strings, got {statements!r}")
        properties = {"type": "rest", "uri": catalog_uri, "cache-enabled": "false"}
        if warehouse is not None:
            properties["warehouse"] = warehouse
        if token is not None:
            properties["token"] = token
        assert self.conn is not None, "engine not started"
        self.conn.send(("sql", properties, batch))
        reply = self._receive()
        if reply[0] == "error":
            raise JvmEngineError(reply[1], reply[2])
        return [tuple(row) for row in reply[2]]

    def stop(self) -> None:
        """Close the connection (the worker stops Spark and exits), then wait; SIGKILL by PID if it hangs."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"

    def __enter__(self) -> JvmIcebergEngine:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
