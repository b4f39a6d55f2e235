"""docs/engines.md's examples run as written, in order, against one live server.

The server serves a lakehouse in a temporary directory without a token; the
test puts its address in place of the page's ``http://127.0.0.1:8181`` and
its directory in place of ``/data/lake``. Each python block runs in its own
process; they build on each other (pyiceberg creates ``shop.orders``, the
others read and add to it; the last reads the plugin's native table as
Iceberg), as the page says. The block that uses Apache
Iceberg's Spark runtime runs on the cached Spark 4.1 (jvm_iceberg.py) with
the cached runtime jar in ``spark.jars`` in place of the page's
``spark.jars.packages`` (which would download it at start).
tests/test_docs.py leaves this page to this test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from jvm_iceberg import engine_home

from service.testing import ServerProcess

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engines.md"
PAGE_URL = "http://127.0.0.1:8181"
PAGE_LAKE = "/data/lake"
PACKAGES = '.config("spark.jars.packages", "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0")'
# The two Spark blocks start their own JVMs: C1 only and the serial GC start
# faster on 2 cores (tests/spark's QUICK_JVM; an environment setting, the code is as written).
QUICK_JVM = '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'


def iceberg_runtime_run(block: str) -> tuple[str, dict[str, str]]:
    """The Spark-with-Iceberg block as this machine runs it: cached jar, cached pyspark 4.1."""
    home = engine_home()
    jars = ",".join(sorted(str(p) for p in (home / "jars").glob("*.jar")))
    assert PACKAGES in block, "the page's Spark + Iceberg block no longer names the runtime this test provides"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    env.update(PYTHONPATH=str(home / "python"), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return block.replace(PACKAGES, f'.config("spark.jars", "{jars}")'), env


def test_the_examples_run_in_order_against_a_server(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 6, "pyiceberg, DuckDB, Polars, Spark + Iceberg, Spark + lakekv plugin, native tables"
    assert all(PAGE_URL in block for block in blocks)
    lake = tmp_path / "lake"
    server = ServerProcess(str(lake), tmp_path / "server.log").start()
    try:
        for number, block in enumerate(blocks, 1):
            code = block.replace(PAGE_URL, server.url).replace(PAGE_LAKE, str(lake))
            env = dict(os.environ, PYSPARK_SUBMIT_ARGS=QUICK_JVM)
            if "iceberg-spark-runtime" in code:
                code, env = iceberg_runtime_run(code)
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
            )
            assert result.returncode == 0, f"docs/engines.md python block {number}:\n{result.stderr[-3000:]}"
    finally:
        server.stop()
