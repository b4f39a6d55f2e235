"""Fixtures for the Spark adapter tests.

``spark`` (session): ONE local[2] SparkSession for the whole test run; a JVM
start costs tens of seconds on a shared 2-core machine, so every Spark test
shares it. Tests that use it get the ``spark`` marker automatically, so
``pytest -m "not spark"`` skips them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.spark.cluster import StandaloneCluster
from catalog.spark.local import prepare_environment

prepare_environment()  # before pyspark starts any JVM or worker

from pyspark.sql import SparkSession  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from catalog.spark.local import local_spark

    session = local_spark("local[2]", app_name="lakekv-tests", warehouse_dir=str(tmp_path_factory.mktemp("warehouse")))
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """ONE loopback Spark standalone cluster (a master, two 1-core workers) for the whole test run."""
    cluster = StandaloneCluster(workers=2, base_dir=tmp_path_factory.mktemp("spark-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def lake_url(tmp_path: Path) -> str:
    """URL of a fresh, empty lakehouse directory."""
    return str(tmp_path / "lake")


@pytest.fixture(scope="session")
def lake_catalog(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of ONE lakehouse served to ``spark`` as catalog ``lake`` (each test uses its own namespace).

    One catalog for the run: each catalog starts one control-plane Python
    process that lives as long as the JVM.
    """
    import sys

    from catalog.spark.plugin import catalog_conf

    url = str(tmp_path_factory.mktemp("catalog") / "lake")
    for key, value in catalog_conf("lake", url, python=sys.executable).items():
        spark.conf.set(key, value)
    return url


@pytest.fixture
def ns(request: pytest.FixtureRequest, lake_catalog: str, spark: SparkSession) -> str:
    """A fresh namespace ``lake.<test name>`` in the shared catalog."""
    import re

    import hashlib

    # Truncated names of parametrized tests can collide: a hash of the whole name keeps them apart.
    digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50] + "_" + digest
    spark.sql(f"CREATE NAMESPACE lake.{name}")
    return f"lake.{name}"
