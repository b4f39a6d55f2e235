"""A Spark driver on a standalone cluster using lakehouse catalog ``lake`` on S3; for test_cluster.

Usage: python cluster_app.py RESULTS_JSON < settings.json

settings: ``master`` (spark://...), ``url`` (s3://...), ``storage`` (endpoint_url,
key, secret, region: given only as catalog options). The driver runs CTAS,
INSERT, UPDATE, a pruned SELECT, ``VERSION AS OF``, a full scan with one data
file's footer damaged (then put back) and DROP through SQL, reads the table
with the Python reader too, and prints to RESULTS_JSON one JSON object with
every answer and the plans, descriptions and errors it saw.
"""

from __future__ import annotations

import json
import sys
import time

import catalog
from catalog.spark import local_spark

EXECUTOR_TIMEOUT_S = 120


def plain(row: object) -> list[object]:
    """A row as JSON values (decimals as their text)."""
    return [v if isinstance(v, (int, str, type(None))) else str(v) for v in row]  # type: ignore[attr-defined]


def rows(spark, sql: str) -> list[list[object]]:  # type: ignore[no-untyped-def]
    return [plain(row) for row in spark.sql(sql).collect()]


def rows_and_scanned(spark, sql: str) -> tuple[list[list[object]], int]:  # type: ignore[no-untyped-def]
    """The query's rows, and how many rows its scan produced (Spark filters them again after the scan)."""
    df = spark.sql(sql)
    answer = [plain(row) for row in df.collect()]
    scan = df._jdf.queryExecution().executedPlan().collectLeaves().apply(0)  # internals: PySpark has no public handle on a plan's metrics
    return answer, int(scan.metrics().apply("numOutputRows").value())


def main() -> int:
    settings = json.load(sys.stdin)
    url, storage = settings["url"], settings["storage"]
    spark = local_spark(settings["master"], app_name="lakekv-cluster-test", catalogs={"lake": url}, **storage)
    # Both workers' executors are up before any job, so tasks land on both.
    deadline = time.monotonic() + EXECUTOR_TIMEOUT_S
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # internals: PySpark has no public handle on the executors (the driver + 2)
        if time.monotonic() > deadline:
            raise RuntimeError("the cluster's two executors did not register")
        time.sleep(0.2)
    out: dict[str, object] = {}
    spark.sql("CREATE NAMESPACE lake.dist")
    spark.sql(
        "CREATE TABLE lake.dist.orders PARTITIONED BY (region) AS "
        "SELECT id, CAST(id % 97 AS DECIMAL(10, 2)) AS amount, "
        "element_at(array('us', 'eu', 'apac'), CAST(id % 3 AS INT) + 1) AS region FROM range(0, 3000, 1, 6)"
    )
    with catalog.open(url, background=False, **storage) as lake:
        out["version_after_ctas"] = lake.version
    spark.sql(
        "INSERT INTO lake.dist.orders SELECT id, CAST(id % 97 AS DECIMAL(10, 2)), "
        "element_at(array('us', 'eu', 'apac'), CAST(id % 3 AS INT) + 1) FROM range(3000, 4000, 1, 4)"
    )
    # Only Spark's own Parquet writer rewrites files (the Python data path refuses UPDATE).
    with catalog.open(url, background=False, **storage) as lake:
        before_update = {entry.path for entry in lake.load_table("dist.orders").files()}
    spark.sql("UPDATE lake.dist.orders SET amount = amount + 1000 WHERE id % 1000 = 0")
    with catalog.open(url, background=False, **storage) as lake:
        out["replaced_by_update"] = sorted(before_update - {entry.path for entry in lake.load_table("dist.orders").files()})
    pruned = "SELECT id, amount, region FROM lake.dist.orders WHERE region = 'eu'"
    out["all"], out["all_scan_rows"] = rows_and_scanned(spark, "SELECT id, amount, region FROM lake.dist.orders")
    out["pruned"], out["pruned_scan_rows"] = rows_and_scanned(spark, pruned)
    out["as_of_ctas"] = rows(spark, f"SELECT id FROM lake.dist.orders VERSION AS OF {out['version_after_ctas']}")
    out["explain"] = spark.sql(f"EXPLAIN EXTENDED {pruned}").collect()[0][0]
    out["describe"] = rows(spark, "DESCRIBE TABLE EXTENDED lake.dist.orders")
    out["namespace"] = rows(spark, "DESCRIBE NAMESPACE EXTENDED lake.dist")
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # internals: PySpark has no public handle on the executors
    with catalog.open(url, background=False, **storage) as lake:
        # The Python reader checks each file against the CRC32C its writing task computed.
        data = lake.load_table("dist.orders").scan().to_arrow()
        out["python_read"] = [plain(row) for row in zip(*(data[c].to_pylist() for c in ("id", "amount", "region")))]
        entry = lake.load_table("dist.orders").files()[0]
        good = lake.objects.get(entry.path)
        damaged = bytearray(good)
        damaged[-12] ^= 0xFF  # inside the footer (its last 8 bytes are the footer's length and the magic)
        lake.objects.put(entry.path, bytes(damaged))
        try:
            rows(spark, "SELECT id, amount, region FROM lake.dist.orders")
            out["damaged_error"] = None
        except Exception as exc:  # the executors' check of the file against its entry: the report names it
            out["damaged_error"] = f"{exc}\n{getattr(exc, 'java_exception', '')}"
        finally:
            lake.objects.put(entry.path, good)
        out["damaged_path"] = entry.path
    spark.sql("DROP TABLE lake.dist.orders PURGE")
    out["tables_after_drop"] = rows(spark, "SHOW TABLES IN lake.dist")
    spark.stop()
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
