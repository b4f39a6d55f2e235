"""A catalog served by ``lakekv serve`` (catalog option ``uri``), set up by ``catalog.spark.configure``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

import catalog
from catalog.spark import configure
from service.testing import ServerProcess
from tests.spark.test_spark_concurrency import QUICK_JVM

APP = Path(__file__).with_name("served_catalog_app.py")
TOKEN = "served-token-0123456789abcdef"


class RecordingBuilder:
    """A ``SparkSession.Builder`` stand-in that records the settings ``configure`` makes."""

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}

    def config(self, key: str, value: str) -> RecordingBuilder:
        self.settings[key] = value
        return self


def test_configure_lets_spark_push_filters_into_the_python_source() -> None:
    """Reads through the Python source fail with DATA_SOURCE_PUSHDOWN_DISABLED without it."""
    settings = configure(RecordingBuilder(), "srv", "/data/lake", uri="http://127.0.0.1:1").settings
    assert settings["spark.sql.python.filterPushdown.enabled"] == "true"
    assert settings["spark.sql.catalog.srv.uri"] == "http://127.0.0.1:1"


def run_app(server: ServerProcess, url: str, work: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(APP), server.url, TOKEN, url, str(work / "warehouse")],
        capture_output=True, text=True, timeout=600, cwd=work,
        env=dict(os.environ, PYSPARK_SUBMIT_ARGS=QUICK_JVM),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_configured_served_catalog_reads_and_writes_with_sparks_parquet_where_it_shares_the_disk(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    server = ServerProcess(url, tmp_path / "serve.log", token=TOKEN).start()
    try:
        # A table only the Python source reads (Spark's reader refuses nanosecond timestamps).
        with catalog.open(url) as lake:
            lake.create_namespace("r")
            schema = pa.schema([pa.field("id", pa.int64()), pa.field("at", pa.timestamp("ns"))])
            nanos = lake.create_table("r.nanos", schema)
            at = pa.array([datetime(2026, 1, 1)] * 3, pa.timestamp("ns"))
            nanos.append(pa.table({"id": [1, 2, 3], "at": at}, schema=schema))
        out = run_app(server, url, tmp_path)
    finally:
        server.stop()
    assert out["t"] == [2, 4]
    # The server's store is a directory this JVM reaches at the same path: Spark's Parquet scan
    # over the planned files (not the Python data source), as with a local control plane.
    assert "InMemoryFileIndex(1 paths)" in out["t_plan"] and "PythonScan" not in out["t_plan"], out["t_plan"]
    # The Python source still reads what Spark's reader cannot; it needs filter pushdown enabled.
    assert out["nanos"] == [2, 3]
    assert "InMemoryFileIndex" not in out["nanos_plan"], out["nanos_plan"]
