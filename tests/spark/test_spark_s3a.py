"""Spark's S3 file system for the plugin: the jars ``make install`` fetched, the ``s3a:`` store root, and the fallback.

``make install`` fetches hadoop-aws and the AWS SDK modules it uses
(``catalog.spark.s3a_jars``), and ``spark_jars`` puts them in ``spark.jars``
beside the plugin: a lakehouse on S3 is then read and written by Spark's
own Parquet reader and writer over ``s3a:`` paths, which the loopback
cluster test runs (``test_cluster.py``: CTAS, INSERT, UPDATE, pruned reads,
a damaged footer, all on the executors). Where this JVM's Hadoop has no S3
file system, the catalog falls back to the Python data source (here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import catalog
from catalog.spark import jar_path, s3a_jars
from catalog.spark.control import data_root
from catalog.spark.plugin import catalog_conf
from kvstore.testing.seaweed import SeaweedServer
from tests.spark.spark_shell import SPARK_HOME

pytestmark = pytest.mark.s3

TEST_JAR = Path(jar_path()).with_name("lakekv-spark-tests.jar")


def test_the_jars_are_hadoop_aws_for_pysparks_hadoop_and_sdk_modules() -> None:
    import pyspark

    jars = [Path(jar).name for jar in s3a_jars()]
    (client,) = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    hadoop = client.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    assert f"hadoop-aws-{hadoop}.jar" in jars  # make install fetched them
    assert any(name.startswith("s3-2.") for name in jars) and not any(name.startswith("bundle-") for name in jars)
    # Netty, SLF4J and the Apache HTTP client are pyspark's own: no second version of them.
    others = [name for name in jars if name.startswith(("netty-", "slf4j-", "httpclient-", "httpcore-"))]
    assert others == [f"netty-nio-client-{name.removeprefix('netty-nio-client-')}" for name in others
                      if name.startswith("netty-nio-client-")]  # the SDK's client module over pyspark's Netty


def test_the_data_root_of_an_s3_lakehouse_is_its_s3a_url(seaweedfs: SeaweedServer) -> None:
    url, storage = seaweedfs.new_url()
    with catalog.open(url, background=False, **storage) as lake:
        assert data_root(lake) == "s3a://" + url.removeprefix("s3://")


def test_without_hadoop_aws_an_s3a_root_does_not_open() -> None:
    """HadoopStorageTest (a Java test main) on pyspark's jars alone: S3 data then goes through the Python source.

    The S3A settings it makes from storage options are checked there too. With
    hadoop-aws (``with-s3a``) the same main passes; the cluster test runs that path.
    """
    classpath = os.pathsep.join([str(TEST_JAR), jar_path(), str(SPARK_HOME / "jars" / "*")])
    result = subprocess.run(
        ["java", "-cp", classpath, "io.lakekv.spark.HadoopStorageTest", "without-s3a"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all passed" in result.stdout


def test_where_hadoop_has_no_s3_file_system_the_python_source_reads_and_writes(
    spark: SparkSession, seaweedfs: SeaweedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fallback: a catalog whose store root this JVM's Hadoop cannot open sends its data through the Python source.

    Without the hadoop-aws jars Hadoop has no ``s3a`` file system (the Java test
    above); here ``fs.s3a.impl`` names no class while the catalog first loads its
    tables, which Hadoop answers the same way, without a second JVM.
    """
    url, storage = seaweedfs.new_url()
    spark.conf.set("fs.s3a.impl", "io.lakekv.NoSuchFileSystem")
    try:
        for key, value in catalog_conf("s3py", url, python=sys.executable, **storage).items():
            spark.conf.set(key, value)
        spark.sql("CREATE NAMESPACE s3py.fallback")
        spark.sql("CREATE TABLE s3py.fallback.t (id BIGINT, p STRING) PARTITIONED BY (p)")
        spark.sql("INSERT INTO s3py.fallback.t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
        pruned = spark.sql("SELECT id, p FROM s3py.fallback.t WHERE p = 'a'")
        assert sorted(tuple(row) for row in pruned.collect()) == [(1, "a"), (3, "a")]
        pruned.explain()  # the plan the query ran (no second planning, which would start Python again)
        plan = capsys.readouterr().out
        assert "BatchScan" in plan and "InMemoryFileIndex" not in plan and "s3a://" not in plan, plan
        # Before: Spark planned the rewrite's scan first and failed inside it (a NullPointerException).
        with pytest.raises(Exception, match="hadoop-aws") as refused:
            spark.sql("UPDATE s3py.fallback.t SET id = 4 WHERE id = 3")
        assert "Nothing was changed" in str(refused.value)
        spark.sql("DELETE FROM s3py.fallback.t WHERE p = 'b'")  # an exact condition: one control-plane commit
        with catalog.open(url, background=False, **storage) as lake:
            table = lake.load_table("fallback.t").scan().to_arrow()
        assert sorted(zip(table["id"].to_pylist(), table["p"].to_pylist())) == [(1, "a"), (3, "a")]
    finally:
        spark.conf.unset("fs.s3a.impl")
