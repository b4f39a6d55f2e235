"""Run several Spark applications (catalog_writer_app.py, one process and JVM each) at once (a helper module, no tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from catalog.spark.local import prepare_environment
from tests.spark.test_spark_concurrency import QUICK_JVM

APP = Path(__file__).with_name("catalog_writer_app.py")


def run_writer_apps(work: Path, url: str, statements: dict[str, list[str]]) -> dict[str, Any]:
    """Start one application per name, let them all write once every JVM is up, and return each one's JSON result.

    Each runs its statements in turn against catalog ``lake`` (``url``, which
    must hold table ``c.t``), retrying a statement that raises
    RetryableConflictError; an application that fails fails the test with its stderr.
    """
    prepare_environment()
    go = work / "go"
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(APP), url, name, str(work / f"ready-{name}"), str(go), *sql],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYSPARK_SUBMIT_ARGS=QUICK_JVM),
        )
        for name, sql in statements.items()
    }
    try:
        deadline = time.monotonic() + 900
        while not all((work / f"ready-{name}").exists() for name in procs):
            assert all(p.poll() is None for p in procs.values()), "an application exited before it was ready"
            assert time.monotonic() < deadline, "applications did not start in time"
            time.sleep(0.2)
        go.write_text("go")
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=1200)
            assert proc.returncode == 0, f"{name} failed:\n{err[-3000:]}"
            results[name] = json.loads(out.strip().splitlines()[-1])
        return results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
