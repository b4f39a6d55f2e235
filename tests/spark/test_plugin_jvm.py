"""The plugin's Java unit tests (a plain test main, no JUnit offline) and a bin/spark-sql smoke test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.spark import jar_path
from tests.spark.spark_shell import SPARK_HOME, run_spark_sql

TEST_JAR = Path(jar_path()).with_name("lakekv-spark-tests.jar")


def test_a_missing_javac_fails_the_build_naming_the_package_and_keeps_the_jar() -> None:
    root = Path(__file__).resolve().parents[2]
    jar = Path(jar_path())
    before = jar.stat().st_mtime_ns
    source = next((root / "catalog/spark/jvm/src").rglob("*.java"))
    # -o: the venv counts as installed; -W: a Java source counts as changed, so only the jar is remade.
    result = subprocess.run(
        ["make", "-o", ".venv/.lakekv-installed", "-W", str(source.relative_to(root)),
         str(jar.relative_to(root)), "JAVAC=lakekv-no-such-javac"],
        cwd=root, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "javac not found" in result.stderr and "openjdk-17-jdk-headless" in result.stderr
    assert jar.stat().st_mtime_ns == before


@pytest.mark.parametrize("test_class", ["FiltersTest", "ScanPlansTest", "FileCheckTest"])
def test_java_unit_tests_pass(test_class: str) -> None:
    classpath = os.pathsep.join([str(TEST_JAR), jar_path(), str(SPARK_HOME / "jars" / "*")])
    result = subprocess.run(
        ["java", "-cp", classpath, f"io.lakekv.spark.{test_class}"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all passed" in result.stdout


def test_reader_factories_are_shared_only_by_equal_settings(tmp_path: Path) -> None:
    """ParquetReaderFactoriesTest: a Java test main in a local Spark, run by spark-submit (Spark's JVM options)."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME))
    result = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master", "local[1]",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--jars", jar_path(),
            "--class", "io.lakekv.spark.ParquetReaderFactoriesTest",
            str(TEST_JAR), str(tmp_path),
        ],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "all passed" in result.stdout


def test_spark_sql_shell_runs_ddl_dml_and_time_travel(tmp_path: Path) -> None:
    """bin/spark-sql from the pyspark wheel, with only the jar and catalog options: no Python registration."""
    url = str(tmp_path / "lake")
    lines = run_spark_sql(
        tmp_path,
        url,
        [
            "CREATE NAMESPACE lake.shell",
            "CREATE TABLE lake.shell.t (id BIGINT, p STRING) PARTITIONED BY (p)",
            "INSERT INTO lake.shell.t VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO lake.shell.t VALUES (3, 'a')",
            "SELECT 'rows', count(*), sum(id) FROM lake.shell.t",
            "SELECT 'first', count(*) FROM lake.shell.t VERSION AS OF 3",
            "SELECT 'pruned', count(*) FROM lake.shell.t WHERE p = 'a'",
            # Incremental reads (SQL's table options) and the changelog procedure (catalog/changes.py).
            "SELECT 'appended', count(*) FROM lake.shell.t WITH ('start-version' = '3', 'end-version' = '4')",
            "DELETE FROM lake.shell.t WHERE id = 2",
            "CALL lake.system.table_changes('shell.t', 4, 5)",
        ],
    )
    assert ["rows", "3", "6"] in lines
    assert ["first", "2"] in lines
    assert ["pruned", "2"] in lines
    assert ["appended", "1"] in lines
    assert [line[:2] for line in lines if line[-3:-1] == ["delete", "5"]] == [["2", "b"]]


def test_catalog_through_a_shared_lakekv_serve(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Catalog option uri (+ token): the same requests go to lakekv serve (data: see test_served_catalog.py)."""
    from service.testing import ServerProcess

    server = ServerProcess(str(tmp_path / "lake"), tmp_path / "serve.log", token="s3cret-token-0123456789").start()
    try:
        spark.conf.set("spark.sql.catalog.served", "io.lakekv.spark.LakehouseCatalog")
        spark.conf.set("spark.sql.catalog.served.uri", server.url)
        spark.conf.set("spark.sql.catalog.served.token", "s3cret-token-0123456789")
        spark.sql("CREATE NAMESPACE served.remote")
        spark.sql("CREATE TABLE served.remote.t (id BIGINT, p STRING) PARTITIONED BY (p)")
        spark.sql("INSERT INTO served.remote.t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
        assert spark.sql("SELECT count(*), sum(id) FROM served.remote.t WHERE p = 'a'").collect()[0][:] == (2, 4)
        assert spark.sql("SELECT count(*) FROM served.remote.t VERSION AS OF 2").collect()[0][0] == 0  # created, empty
        described = str(spark.sql("DESCRIBE TABLE EXTENDED served.remote.t").collect())
        assert "s3cret-token-0123456789" not in described
    finally:
        server.stop()
