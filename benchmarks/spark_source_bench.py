"""The ``lakehouse`` Spark source against plain Parquet, in the same session, on the same data.

Measures (best of ``--repeat`` runs, the two sides of a comparison in turns; rows/s and the ratio lakehouse/Parquet):

* write: ``df.write.format("lakehouse")`` (tasks write Parquet through the
  catalog, one commit) vs ``df.write.parquet(dir)``; the DataFrame is cached
  first, so both measure writing only;
* read: a full scan of every column into Spark's ``noop`` sink (so neither
  side can skip columns or rows) of ``format("lakehouse").load`` vs
  ``spark.read.parquet``;
* pruning: a selective filter on the sort key over the lakehouse table,
  through the catalog plugin's per-scan source (``CatalogScanSource``, which
  prunes files) and the public one (which opens every file): files opened and
  time.

Data: TPC-H ``lineitem`` (DuckDB tpch extension) at ``--scale``.
Run: ``.venv/bin/python benchmarks/spark_source_bench.py [--scale 0.05] [--repeat 5]``.
Goals (issue 12): reads >= 0.8x and writes >= 0.7x plain Parquet.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def best_of_alternating(repeat: int, first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
    """Best times of two actions run in turns (first, second, first, ...).

    Measuring one side ``repeat`` times and then the other lets the JVM's
    warm-up and any change in machine load fall on one side only; in turns,
    both sides see the same conditions, so their ratio is steadier.
    """
    first_times, second_times = [], []
    for _ in range(repeat):
        for action, times in ((first, first_times), (second, second_times)):
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
    return min(first_times), min(second_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.05, help="TPC-H scale factor of lineitem (default 0.05)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement, the two sides in turns; the best counts (default 5)")
    args = parser.parse_args()

    import catalog
    from catalog.spark import local_spark, spark_schema
    from catalog.spark.source import CatalogScanSource
    from catalog.spark.tpch import generate

    work = tempfile.mkdtemp(prefix="lakekv-spark-bench-")
    spark = local_spark("local[2]", app_name="lakekv-spark-bench")
    try:
        lineitem = generate(args.scale, ("lineitem",))["lineitem"]
        rows = lineitem.num_rows
        # Range-partitioned and sorted on the key, as a table usually is: file
        # min/max statistics on l_orderkey are then narrow enough to prune.
        df = spark.createDataFrame(lineitem).repartitionByRange(2, "l_orderkey").sortWithinPartitions("l_orderkey").cache()
        df.count()
        url = os.path.join(work, "lake")
        with catalog.open(url) as lake:
            lake.create_namespace("bench")
        parquet_dir = os.path.join(work, "parquet")

        def write_parquet() -> None:
            df.write.mode("overwrite").parquet(parquet_dir)

        def write_lakehouse() -> None:
            # 8 MiB files: several per task, so the pruning run below has files to skip.
            df.write.format("lakehouse").option("lakehouse", url).option("createIfMissing", "true").option(
                "targetFileBytes", str(8 << 20)
            ).mode("overwrite").save("bench.lineitem")

        def scan(reader: object) -> None:
            reader.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]

        def lake_reader(**options: str) -> object:
            r = spark.read.format("lakehouse").option("lakehouse", url)
            for k, v in options.items():
                r = r.option(k, v)
            return r.load("bench.lineitem")

        spark.dataSource.register(CatalogScanSource)

        def pruning_reader(**options: str) -> object:
            # What the catalog plugin builds for each scan: the table's schema and version given.
            with catalog.open(url) as lake:
                version = lake.version
                schema = spark_schema(lake.load_table("bench.lineitem").schema)
            r = spark.read.format(CatalogScanSource.name()).schema(schema).option("lakehouse", url)
            for k, v in {"versionAsOf": str(version), **options}.items():
                r = r.option(k, v)
            return r.load("bench.lineitem")

        t_write_parquet, t_write_lake = best_of_alternating(args.repeat, write_parquet, write_lakehouse)
        t_read_parquet, t_read_lake = best_of_alternating(
            args.repeat, lambda: scan(spark.read.parquet(parquet_dir)), lambda: scan(lake_reader())
        )

        with catalog.open(url) as lake:
            files = lake.load_table("bench.lineitem").files()
        max_key = lineitem.column("l_orderkey").to_pylist()[-1]
        cutoff = max_key // 10
        where = f"l_orderkey < {cutoff}"
        pruned_parts = pruning_reader(partitionBytes="1").where(where).rdd.getNumPartitions()  # type: ignore[attr-defined]
        t_pruned = best_of(args.repeat, lambda: scan(pruning_reader().where(where)))  # type: ignore[attr-defined]
        t_unpruned = best_of(args.repeat, lambda: scan(lake_reader().where(where)))  # type: ignore[attr-defined]

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        print(f"# Spark source benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(
            f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.python_version()}, "
            f"pyspark {spark.version}, local[2], commit {commit}"
        )
        print(f"data: TPC-H lineitem scale {args.scale}: {rows} rows, {lineitem.num_columns} columns; best of {args.repeat}")
        print()
        print("| operation | lakehouse rows/s | parquet rows/s | ratio (goal) |")
        print("|---|---:|---:|---:|")
        print(
            f"| write | {rows / t_write_lake:,.0f} | {rows / t_write_parquet:,.0f} | "
            f"{t_write_parquet / t_write_lake:.2f}x (>= 0.7) |"
        )
        print(
            f"| full read | {rows / t_read_lake:,.0f} | {rows / t_read_parquet:,.0f} | "
            f"{t_read_parquet / t_read_lake:.2f}x (>= 0.8) |"
        )
        print()
        print(
            f"pruning `{where}` (~10% of rows): {pruned_parts} of {len(files)} files opened by the pruning source, "
            f"{t_pruned:.2f}s vs {t_unpruned:.2f}s without ({t_unpruned / t_pruned:.1f}x faster)"
        )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
