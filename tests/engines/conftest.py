"""Fixtures for the engine tests: other engines pointed at ``lakekv serve``.

* ``jvm_iceberg`` (session): ONE JVM Iceberg engine (jvm_iceberg.py: Spark 4.1
  with Apache Iceberg's ``iceberg-spark-runtime``, fetched by
  ``make jvm-iceberg-engine``), started on first use and stopped at the end.
* ``lake_server`` (session): ``lakekv serve`` on a lakehouse in a temporary
  directory, with a bearer token, 127.0.0.1 on a free port, stopped by PID.
  The Iceberg warehouse is ``<lakehouse>/iceberg``, a local path that the
  server, pyiceberg and the JVM engine all reach. Tests share it: each uses
  namespaces of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jvm_iceberg import JvmIcebergEngine

from service.testing import ServerProcess

TOKEN = "engines-token-0123456789abcdef"


@pytest.fixture(scope="session")
def jvm_iceberg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmIcebergEngine]:
    log = tmp_path_factory.mktemp("jvm-iceberg") / "engine.log"
    with JvmIcebergEngine(log) as engine:
        yield engine


@pytest.fixture(scope="session")
def lake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("engines-server")
    process = ServerProcess(str(root / "lake"), root / "server.log", token=TOKEN).start()
    try:
        yield process
    finally:
        process.stop()
