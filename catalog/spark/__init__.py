"""Spark and the lakehouse: the catalog plugin (the default) and the ``lakehouse`` Python data source.

>>> from catalog.spark import local_spark                          # doctest: +SKIP
>>> spark = local_spark(catalogs={"lake": "/data/lakehouse"})     # doctest: +SKIP
>>> spark.sql("SELECT count(*) FROM lake.sales.orders")           # doctest: +SKIP

The catalog plugin (:mod:`catalog.spark.plugin`, Java in ``jvm/``) gives
three-part names, DDL and time travel; the JVM asks the Python catalog
through :mod:`catalog.spark.control`. The Python data source
(``format("lakehouse")``, :func:`register`) stays for DataFrame users without
the jar.

Optional: importing it needs ``pyspark`` (the ``spark`` extra). Nothing in
``catalog`` imports this package, so the catalog works without Spark.
"""

from catalog.spark.errors import catalog_errors, conflict_from
from catalog.spark.local import local_spark, prepare_environment
from catalog.spark.options import SourceOptions, parse_options
from catalog.spark.plugin import CATALOG_CLASS, catalog_conf, configure, jar_path, s3a_jars, spark_jars
from catalog.spark.sql_names import Registration, register
from catalog.spark.source import LakehouseDataSource, open_lakehouse
from catalog.spark.types import check_writable, spark_arrow_schema, spark_schema

__all__ = [
    "CATALOG_CLASS",
    "catalog_conf",
    "configure",
    "jar_path",
    "LakehouseDataSource",
    "Registration",
    "SourceOptions",
    "catalog_errors",
    "check_writable",
    "conflict_from",
    "local_spark",
    "open_lakehouse",
    "parse_options",
    "prepare_environment",
    "register",
    "s3a_jars",
    "spark_jars",
    "spark_arrow_schema",
    "spark_schema",
]
