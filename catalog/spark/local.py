"""A local SparkSession set up for the lakehouse (tests, the ``make run`` pipeline, benchmarks).

PySpark starts its Python workers with ``PYSPARK_PYTHON`` (default
``python3`` from ``PATH``, which does not have lakekv), so we point it at the
running interpreter; ``SPARK_LOCAL_IP`` keeps the driver on the loopback
address on machines whose hostname does not resolve. Both are set only when
the caller has not set them.
"""

from __future__ import annotations

import os
import sys
import tempfile

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from catalog.spark.plugin import JAR, configure, spark_jars

__all__ = ["local_spark", "prepare_environment"]


def prepare_environment() -> None:
    """Set ``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` unless already set."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def local_spark(
    master: str = "local[2]",
    app_name: str = "lakekv",
    warehouse_dir: str | None = None,
    catalogs: Mapping[str, object] | None = None,
    **catalog_options: Any,
) -> SparkSession:
    """A SparkSession on this machine with the settings the lakehouse wants.

    Args:
        master: ``local[N]``; each application is its own JVM.
        app_name: shown in Spark's logs.
        warehouse_dir: where Spark puts its own (non-lakehouse) tables; a
            temporary directory by default, so nothing lands in the cwd.
        catalogs: lakehouse catalogs to set up, name -> URL or Lakehouse
            (``{"lake": url}`` gives ``lake.ns.table`` in SQL); see
            :func:`catalog.spark.plugin.configure`.
        **catalog_options: catalog options given to every catalog (e.g. S3
            ``endpoint_url``/``key``/``secret``).
    """
    prepare_environment()
    warehouse = warehouse_dir or tempfile.mkdtemp(prefix="lakekv-spark-warehouse-")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        # Small local jobs: the default 200 shuffle partitions would be 200
        # Python-free but still scheduled tasks per aggregation.
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if catalogs:
        for name, url in catalogs.items():
            builder = configure(builder, name, url, **catalog_options)
    elif JAR.is_file():
        # The plugin loaded even with no catalog yet, so catalogs can be
        # added later with spark.conf.set (they are created on first use).
        builder = builder.config("spark.jars", spark_jars()).config("spark.sql.parquet.fieldId.read.enabled", "true")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from catalog.spark.source import LakehouseDataSource

    spark.dataSource.register(LakehouseDataSource)
    return spark
