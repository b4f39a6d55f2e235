"""The JVM Iceberg engine's own process: Spark 4.1 with Apache Iceberg's
``iceberg-spark-runtime``, answering SQL requests from jvm_iceberg.py.

Runs under the Spark that ``make jvm-iceberg-engine`` fetched (pyspark 4.1.1
on ``PYTHONPATH``), never the project's pyspark 4.3: Iceberg's runtime
supports Spark 4.1 and fails to load on 4.3 (``SparkView`` implements a
class that 4.3 turned into an interface). It imports nothing from lakekv, so
what it reads and writes goes through Iceberg's Java REST client alone.

Protocol: a ``multiprocessing`` connection over a socket pair whose file
descriptor is ``argv[1]`` (the parent made the pair), the jars in ``argv[2]``
(comma-separated). The worker sends ``("ready", spark_version)``, then answers each
``("sql", catalog_properties, statements)`` with
``("rows", column_names, rows)`` for the last statement, or
``("error", exception_type, message)`` for the first that failed. EOF ends it.
"""

from __future__ import annotations

import datetime
import decimal
import sys
from multiprocessing.connection import Connection
from typing import Any

from pyspark.sql import Row, SparkSession


def plain(value: Any) -> Any:
    """A result value as plain Python (tuples, lists, dicts, scalars): no pyspark class crosses the pipe."""
    if isinstance(value, Row):
        return tuple(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(
        value, (bool, int, float, str, bytes, bytearray, decimal.Decimal, datetime.date, datetime.datetime,
                datetime.timedelta)
    ):
        return value
    raise TypeError(f"no plain form for a result value of type {type(value).__name__}")


def without_stack(message: str) -> str:
    """A Java error's message without its stack trace (the frames start at the first tab-indented ``at``)."""
    return message.split("\n\tat ", 1)[0].strip()


class Catalogs:
    """One Spark catalog name per distinct set of REST catalog properties, registered on first use."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.names: dict[tuple[tuple[str, str], ...], str] = {}

    def name_for(self, properties: dict[str, str]) -> str:
        key = tuple(sorted(properties.items()))
        if key not in self.names:
            name = f"lake{len(self.names) + 1}"
            self.spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
            for option, value in properties.items():
                self.spark.conf.set(f"spark.sql.catalog.{name}.{option}", value)
            self.names[key] = name
        return self.names[key]


def start_spark(jars: str) -> SparkSession:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("lakekv-jvm-iceberg-engine")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    fd, jars = int(sys.argv[1]), sys.argv[2]
    spark = start_spark(jars)
    catalogs = Catalogs(spark)
    with Connection(fd) as conn:
        conn.send(("ready", spark.version))
        while True:
            try:
                kind, properties, statements = conn.recv()
            except EOFError:
                break
            if kind != "sql":
                conn.send(("error", "ValueError", f"unknown request kind {kind!r}"))
                continue
            try:
                # Each call starts in its catalog, so statements name tables ns.t.
                spark.sql(f"USE {catalogs.name_for(properties)}")
                frame = None
                for statement in statements:
                    frame = spark.sql(statement)
                assert frame is not None, "the parent sends at least one statement"
                rows = [plain(row) for row in frame.collect()]
                conn.send(("rows", list(frame.columns), rows))
            except Exception as error:  # noqa: BLE001 - every failure goes back to the test, typed
                conn.send(("error", type(error).__name__, without_stack(str(error))))
    spark.stop()


if __name__ == "__main__":
    main()
