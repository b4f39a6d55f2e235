"""Run SQL through pyspark's own ``bin/spark-sql`` with the plugin as catalog ``lake``: a new JVM, the jar and
the catalog options only (no Python registration), as a user's shell would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from catalog.spark import jar_path

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def run_spark_sql(workdir: Path, lake_url: str, statements: list[str], conf: tuple[str, ...] = ()) -> list[list[str]]:
    """Run ``statements`` in one ``spark-sql -e`` (in ``workdir``); its output lines split at tabs.

    ``conf`` adds ``--conf`` settings (``key=value``). Fails the test, with
    the end of spark-sql's stderr, when it exits non-zero.
    """
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    extra = [arg for setting in conf for arg in ("--conf", setting)]
    result = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-sql"),
            "--master", "local[1]",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", f"spark.sql.warehouse.dir={workdir / 'warehouse'}",
            "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={workdir}",
            "--jars", jar_path(),
            "--conf", "spark.sql.catalog.lake=io.lakekv.spark.LakehouseCatalog",
            "--conf", f"spark.sql.catalog.lake.url={lake_url}",
            "--conf", f"spark.sql.catalog.lake.python={sys.executable}",
            *extra,
            "-e", ";".join(statements),
        ],
        capture_output=True, text=True, timeout=300, env=env, cwd=workdir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [line.split("\t") for line in result.stdout.splitlines()]
