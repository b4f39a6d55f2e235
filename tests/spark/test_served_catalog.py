"""A catalog served by ``lakekv serve`` (catalog option ``uri``), set up by ``catalog.spark.configure``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import catalog
from catalog.spark import configure
from catalog.spark.control import ControlPlane, data_root
from catalog.spark.plugin import catalog_conf
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


class ForgedRootControlPlane(ThreadingHTTPServer):
    """The ``uri`` protocol (``POST /lakekv/v1/spark-control``) over a real ControlPlane whose
    ``hello`` names ``data_root`` as its store root: a server whose disk this JVM does not share."""

    def __init__(self, plane: ControlPlane, data_root: str) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keep-alive, as lakekv serve speaks: with http.server's
            # default HTTP/1.0 every answer closes its connection, and the JDK
            # client could send the next request on that connection before it
            # saw the close ("header parser received no bytes", seen once in
            # a full run).
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = plane.handle(request)
                if request.get("op") == "hello" and answer["ok"]:
                    answer["result"]["data_root"] = outer.data_root
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
                return  # quiet: the test's assertions say what went wrong

        super().__init__(("127.0.0.1", 0), Handler)
        self.data_root = data_root

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.mark.parametrize("elsewhere", ["missing directory", "another store"])
def test_a_served_catalog_whose_store_this_jvm_does_not_reach_reads_through_the_python_source(
    spark: SparkSession, tmp_path: Path, elsewhere: str
) -> None:
    url = str(tmp_path / "lake")
    if elsewhere == "another store":
        catalog.open(str(tmp_path / "other"), create=True).close()  # a store, with another store id
        root = "file://" + str(tmp_path / "other")
    else:
        root = "file://" + str(tmp_path / "not-here")
    with catalog.open(url, create=True) as lake:
        plane = ControlPlane(lake, data_root(lake))
        server = ForgedRootControlPlane(plane, root)
        thread = threading.Thread(target=server.serve_forever, name="forged-control-plane", daemon=True)
        thread.start()
        name = "forged_" + elsewhere.replace(" ", "_")
        try:
            for key, value in catalog_conf(name, url, uri=server.url).items():
                spark.conf.set(key, value)
            spark.sql(f"CREATE NAMESPACE {name}.r")
            spark.sql(f"CREATE TABLE {name}.r.t (id BIGINT, p STRING) PARTITIONED BY (p)")
            spark.sql(f"INSERT INTO {name}.r.t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
            assert spark.sql(f"SELECT count(*), sum(id) FROM {name}.r.t WHERE p = 'a'").first()[:] == (2, 4)
            plan = spark.sql(f"EXPLAIN SELECT id FROM {name}.r.t WHERE p = 'a'").first()[0]
        finally:
            server.shutdown()
            thread.join()
            server.server_close()
    assert "InMemoryFileIndex" not in plan, plan  # not Spark's Parquet scan: the Python source's
    assert not (tmp_path / "other" / "data").exists() and not (tmp_path / "not-here").exists()
