"""Spark adapter for the lakehouse: the ``lakehouse`` PySpark data source.

Optional: importing it needs ``pyspark`` (the ``spark`` extra). Nothing in
``catalog`` imports this package, so the catalog works without Spark.
"""

from catalog.spark.types import check_writable, spark_arrow_schema, spark_schema

__all__ = ["check_writable", "spark_arrow_schema", "spark_schema"]
