"""One Spark application (own JVM, local[1]) whose catalog ``srv`` is set up by
``catalog.spark.configure(builder, "srv", url, uri=..., token=...)`` against a
``lakekv serve``: what a user's own builder gets (a helper for
test_served_catalog.py, no tests).

Usage: python served_catalog_app.py SERVER_URI TOKEN LAKE_URL WAREHOUSE_DIR

Table ``srv.r.nanos`` (nanosecond timestamps, which Spark's Parquet reader
refuses) must exist; the app creates ``srv.r.t``. Prints one line of JSON:
each table's query results and the plan of a filtered read.
"""

from __future__ import annotations

import json
import sys

from catalog.spark.local import prepare_environment

prepare_environment()

from pyspark.sql import SparkSession  # noqa: E402

from catalog.spark import configure  # noqa: E402


def main() -> None:
    uri, token, url, warehouse = sys.argv[1:5]
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("lakekv-served-catalog")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.shuffle.partitions", "2")
    )
    spark = configure(builder, "srv", url, uri=uri, token=token).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, object] = {}
    spark.sql("CREATE TABLE srv.r.t (id BIGINT, p STRING) PARTITIONED BY (p)")
    spark.sql("INSERT INTO srv.r.t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
    out["t"] = list(spark.sql("SELECT count(*), sum(id) FROM srv.r.t WHERE p = 'a'").first())
    out["t_plan"] = spark.sql("EXPLAIN SELECT id FROM srv.r.t WHERE p = 'a'").first()[0]
    out["nanos"] = [r.id for r in spark.sql("SELECT id FROM srv.r.nanos WHERE id > 1 ORDER BY id").collect()]
    out["nanos_plan"] = spark.sql("EXPLAIN SELECT id FROM srv.r.nanos WHERE id > 1").first()[0]
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()
