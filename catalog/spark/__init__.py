"""Spark adapter for the lakehouse: the ``lakehouse`` PySpark data source.

>>> from catalog.spark import local_spark, register    # doctest: +SKIP
>>> spark = local_spark()                               # doctest: +SKIP
>>> register(spark, lake)                               # doctest: +SKIP
>>> spark.sql("SELECT count(*) FROM `sales.orders`")    # doctest: +SKIP

Optional: importing it needs ``pyspark`` (the ``spark`` extra). Nothing in
``catalog`` imports this package, so the catalog works without Spark.
"""

from catalog.spark.errors import catalog_errors, conflict_from
from catalog.spark.local import local_spark, prepare_environment
from catalog.spark.options import SourceOptions, parse_options
from catalog.spark.sql_names import Registration, register
from catalog.spark.source import LakehouseDataSource, open_lakehouse
from catalog.spark.types import check_writable, spark_arrow_schema, spark_schema

__all__ = [
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
    "spark_arrow_schema",
    "spark_schema",
]
