"""The Spark catalog plugin against plain Parquet, in one session, on the same rows and file layout.

Measures, best of ``--repeat`` runs with the two sides in turns:

* full-scan aggregation (TPC-H Q1's aggregates over every row) through
  ``lake.tpch.lineitem`` vs the same SQL over ``spark.read.parquet(dir)`` of
  the same rows in the same number of files, made for each query: it lists
  the directory and reads a footer, so, like the catalog's plan, it sees
  the files as they are at the query; goal >= 0.9x. This is the catalog's
  JVM data path (Spark's vectorized Parquet reader over the planned files);
* a selective query (``l_orderkey`` below the 5th percentile, ~5% of the
  rows) the same two ways: the catalog prunes files at planning, Parquet
  skips row groups of every file; goal >= 2x;
* both also against a ``spark.read.parquet`` DataFrame made once, whose file
  list Spark keeps (it would not see a file added later), and the floor:
  Spark reading only the file the catalog plans;
* load and plan latency, p50/p99 over ``--plans`` runs, as the JVM sees
  them: ``LakehouseCatalog.loadTable`` (one control-plane request) and
  ``loadTable`` + ``newScanBuilder().build()`` with a pushed filter never
  planned before (the ``plan_scan`` request and Spark's Parquet scan over
  the planned files); goal <= 20 ms each at p50. Also the same with a
  filter planned before at the same version, which reuses the kept plan. For context, ``spark.sql(q)`` to its executed plan for the
  catalog table, and for the Parquet files through Spark's own V2 and V1
  file sources;
* writes, after the reads: ``INSERT OVERWRITE lake.tpch.lineitem SELECT * FROM`` the
  Parquet rows (Spark's own Parquet writer in the tasks, one catalog commit
  with entries from the footers) vs ``df.write.mode("overwrite").parquet``
  of the same DataFrame; goal >= 0.85x;
* MERGE of 1% of the rows (every 100th order, scattered over every file)
  into ``lake.tpch.lineitem`` vs plain Spark's own rewrite of the affected
  files (all of them): the same join, written with ``df.write.parquet``;
* write ordering: the same rows in random order written (``--files`` tasks)
  into a table with ``TBLPROPERTIES ('write.ordered-by' = 'l_orderkey')``
  and into one without; the selective query on each: files planned (of the
  table's files) and time. The ordered write range-distributes and sorts
  on the key, so its files hold disjoint key ranges (``--write-order-only``
  runs just this);
* on SeaweedFS S3 (``--s3-only`` runs just this): the same rows written by
  the same 16 tasks into a second catalog on S3 and, as plain Parquet, to
  ``s3a:`` files (``df.write.parquet``); the full-scan aggregation through
  the catalog (Spark's own Parquet reader over the ``s3a:`` files it plans,
  the S3 endpoint and keys given only as catalog options) vs
  ``spark.read.parquet`` of the ``s3a:`` directory, made for each query and
  read once, the three in turns (each first in turn), ``--repeat`` rounds;
  goal >= 0.9x. Reported with the spread of the per-round ratios;
* compaction (``--compaction-only`` runs just this): a table of
  ``--small-files`` small files written by 200 appends, its file count and
  full-scan time before and after ``CALL lake.system.rewrite_data_files``,
  which runs while another process keeps appending (the rows are checked:
  nothing lost; the appends it made meanwhile are counted).

Data: TPC-H ``lineitem`` (DuckDB tpch extension) at ``--scale`` (default
0.2), range-partitioned on ``l_orderkey`` into ``--files`` tasks.
Run: ``.venv/bin/python benchmarks/spark_bench.py [--scale 0.2] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FULL_SCAN = """
SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
       sum(l_extendedprice * (1 - l_discount)), avg(l_discount), count(*)
FROM {table} GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2
"""
SELECTIVE = "SELECT count(*), sum(l_extendedprice * l_discount) FROM {table} WHERE l_orderkey < {cutoff}"


def best_of_alternating(repeat: int, first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
    """Best times of two actions run in turns, so JVM warm-up and load changes fall on both sides."""
    first_times, second_times = [], []
    for _ in range(repeat):
        for action, times in ((first, first_times), (second, second_times)):
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
    return min(first_times), min(second_times)


def latencies(action: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def to_executed_plan(spark: object, sql: str) -> Callable[[], object]:
    """``spark.sql(sql)`` to its executed plan: analysis loads tables, planning plans scans."""
    return lambda: spark.sql(sql)._jdf.queryExecution().executedPlan()  # type: ignore[attr-defined]


def catalog_calls(spark: object, catalog_name: str, namespace: str, table: str, cutoff: int) -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    """Load the table; plan a scan of it with ``l_orderkey < cutoff`` pushed (the same filter each time,
    so from the second time on the plugin reuses the plan it kept for that version); and plan one with
    a filter never planned before (a ``plan_scan`` request each time): all through the plugin's JVM API."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    parts = gateway.new_array(jvm.java.lang.String, 1)
    parts[0] = namespace
    ident = jvm.org.apache.spark.sql.connector.catalog.Identifier.of(parts, table)
    plugin = spark._jsparkSession.sessionState().catalogManager().catalog(catalog_name)  # type: ignore[attr-defined]
    empty = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap.empty()
    new_cutoffs = itertools.count(cutoff + 1)

    def plan(value: int) -> object:
        filters = gateway.new_array(jvm.org.apache.spark.sql.sources.Filter, 1)
        filters[0] = jvm.org.apache.spark.sql.sources.LessThan("l_orderkey", value)
        builder = plugin.loadTable(ident).newScanBuilder(empty)
        builder.pushFilters(filters)
        return builder.build()

    return (lambda: plugin.loadTable(ident)), (lambda: plan(cutoff)), (lambda: plan(next(new_cutoffs)))


def writes(spark: Any, parquet_out: str, repeat: int) -> tuple[float, float]:
    """Best INSERT OVERWRITE into the catalog vs ``df.write.parquet`` of the same DataFrame."""
    df = spark.table("parquet_lineitem")

    def lake() -> None:
        spark.sql("INSERT OVERWRITE lake.tpch.lineitem SELECT * FROM parquet_lineitem")

    def plain() -> None:
        df.write.mode("overwrite").parquet(parquet_out)

    t_lake, t_plain = best_of_alternating(repeat, lake, plain)
    count = "SELECT count(*), sum(l_quantity) FROM {}"
    assert spark.sql(count.format("lake.tpch.lineitem")).collect() == spark.sql(count.format("parquet_lineitem")).collect()
    return t_lake, t_plain


MERGE_SOURCE = """
SELECT l_orderkey, l_linenumber, l_quantity + 1 AS l_quantity FROM parquet_lineitem WHERE l_orderkey % 100 = 0
"""


def merges(spark: Any, parquet_out: str, repeat: int) -> tuple[float, float, int]:
    """Best MERGE of 1% of the rows into the catalog vs Spark's own rewrite of the same files.

    The MERGE sets absolute values, so running it again leaves the same rows.
    """
    spark.sql(MERGE_SOURCE).cache().createOrReplaceTempView("merge_source")
    merged = spark.table("merge_source").count()
    columns = list(spark.table("parquet_lineitem").columns)
    rewrite = ", ".join(f"coalesce(s.{c}, t.{c}) AS {c}" if c == "l_quantity" else f"t.{c}" for c in columns)

    def lake() -> None:
        spark.sql(
            "MERGE INTO lake.tpch.lineitem t USING merge_source s "
            "ON t.l_orderkey = s.l_orderkey AND t.l_linenumber = s.l_linenumber "
            "WHEN MATCHED THEN UPDATE SET l_quantity = s.l_quantity"
        )

    def plain() -> None:
        spark.sql(
            f"SELECT {rewrite} FROM parquet_lineitem t LEFT JOIN merge_source s "
            "ON t.l_orderkey = s.l_orderkey AND t.l_linenumber = s.l_linenumber"
        ).write.mode("overwrite").parquet(parquet_out)

    t_lake, t_plain = best_of_alternating(repeat, lake, plain)
    check = "SELECT count(*), sum(l_quantity) FROM {}"
    lake_sums = spark.sql(check.format("lake.tpch.lineitem")).collect()
    assert lake_sums == spark.read.parquet(parquet_out).selectExpr("count(*)", "sum(l_quantity)").collect()
    return t_lake, t_plain, merged


def ordered_vs_plain(spark: Any, work: str, files: int, repeat: int, cutoff: int) -> list[str]:
    """The selective query on a table written with ``write.ordered-by`` vs the same rows written unordered: table rows."""
    import pyarrow.compute as pc

    import catalog

    shuffled = spark.table("parquet_lineitem").repartition(files)  # round robin: every task gets every key range
    saved = {key: spark.conf.get(key) for key in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.coalescePartitions.enabled")}
    spark.conf.set("spark.sql.shuffle.partitions", str(files))  # as many files on both sides
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        for name, props in (("li_ordered", "TBLPROPERTIES ('write.ordered-by' = 'l_orderkey')"), ("li_plain", "")):
            columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in shuffled.schema)
            spark.sql(f"CREATE TABLE lake.tpch.{name} ({columns}) {props}")
            shuffled.writeTo(f"lake.tpch.{name}").append()
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    ordered_sql = SELECTIVE.format(table="lake.tpch.li_ordered", cutoff=cutoff)
    plain_sql = SELECTIVE.format(table="lake.tpch.li_plain", cutoff=cutoff)
    assert spark.sql(ordered_sql).collect() == spark.sql(plain_sql).collect(), "the two sides disagree"  # also the warm-up
    times = [best_of_alternating(1, lambda: spark.sql(ordered_sql).collect(), lambda: spark.sql(plain_sql).collect()) for _ in range(repeat)]
    with catalog.open(os.path.join(work, "lake")) as lake:
        counts = {}
        for name in ("li_ordered", "li_plain"):
            table = lake.load_table(f"tpch.{name}")
            counts[name] = (len(table.files(filter=pc.field("l_orderkey") < cutoff)), len(table.files()))
    ordered_times, plain_times = sorted(t[0] for t in times), sorted(t[1] for t in times)
    ratios = sorted(pt / ot for ot, pt in times)
    (o_read, o_all), (p_read, p_all) = counts["li_ordered"], counts["li_plain"]
    return [
        f"| selective ~5%, table with write.ordered-by = 'l_orderkey' ({o_read} of {o_all} files read) vs written unordered "
        f"({p_read} of {p_all} files read) | {ordered_times[0]:.3f} | {plain_times[0]:.3f} | {plain_times[0] / ordered_times[0]:.2f}x "
        f"(per-run ratios {ratios[0]:.2f}-{ratios[-1]:.2f}) | (reported) |",
    ]


def s3_scans(spark: Any, source: Any, seaweed: Any, repeat: int) -> list[str]:
    """The full-scan aggregation on S3: the catalog vs ``spark.read.parquet`` of ``s3a:`` files; table rows.

    ``source`` (the 16 range-partitioned, sorted tasks) writes both sides: the
    catalog's table (CTAS, Spark's writer through the catalog) and plain
    Parquet under ``s3a://<bucket>/<prefix>-parquet``. Plain Spark reaches S3
    through the session's Hadoop settings (S3A's per-bucket endpoint and keys,
    which a user of plain Spark sets); the catalog is given them only as
    catalog options. Both share Hadoop's one S3 client per bucket.
    """
    from catalog.spark.plugin import catalog_conf, s3a_jars

    if not s3a_jars():
        raise SystemExit("no hadoop-aws jars (make hadoop-aws): the S3 comparison needs Spark's S3 file system")
    url, storage = seaweed.new_url()
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    for key, value in (("endpoint", storage["endpoint_url"]), ("path.style.access", "true"),
                       ("endpoint.region", storage["region"]), ("access.key", storage["key"]),
                       ("secret.key", storage["secret"])):
        hadoop.set(f"fs.s3a.bucket.{bucket}.{key}", value)
    parquet_dir = "s3a://" + url.removeprefix("s3://") + "-parquet"
    source.write.parquet(parquet_dir)
    for key, value in catalog_conf("s3lake", url, **storage).items():
        spark.conf.set(key, value)
    spark.sql("CREATE NAMESPACE s3lake.tpch")
    source.createOrReplaceTempView("source_lineitem")
    spark.sql("CREATE TABLE s3lake.tpch.lineitem AS SELECT * FROM source_lineitem")
    spark.read.parquet(parquet_dir).createOrReplaceTempView("s3_parquet_lineitem")
    lake_full = FULL_SCAN.format(table="s3lake.tpch.lineitem")
    kept_full = FULL_SCAN.format(table="s3_parquet_lineitem")

    def fresh() -> object:
        spark.read.parquet(parquet_dir).createOrReplaceTempView("s3_fresh_lineitem")
        return spark.sql(FULL_SCAN.format(table="s3_fresh_lineitem")).collect()

    explain = spark.sql(f"EXPLAIN {lake_full}").collect()[0][0]
    assert "InMemoryFileIndex" in explain and "s3a://" in explain, "the catalog did not read through Spark's reader"
    assert spark.sql(lake_full).collect() == spark.sql(kept_full).collect() == fresh(), "the two sides disagree"
    sides = {"lake": lambda: spark.sql(lake_full).collect(), "fresh": fresh,
             "kept": lambda: spark.sql(kept_full).collect()}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(repeat):
        names = list(sides)
        for name in names[round_ % 3:] + names[: round_ % 3]:  # each side first in turn
            started = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - started)
    lines = []
    for other, label in (("fresh", "spark.read.parquet made for each query (lists the s3a: directory)"),
                         ("kept", "spark.read.parquet read once (its file list kept)")):
        ratios = sorted(o / t for t, o in zip(times["lake"], times[other]))
        lines.append(
            f"| full-scan aggregation on S3 (JVM reader, s3a:) vs {label} | {min(times['lake']):.3f} | "
            f"{min(times[other]):.3f} | {min(times[other]) / min(times['lake']):.2f}x best of {repeat}; per-round ratios "
            f"{ratios[0]:.2f}-{ratios[-1]:.2f}, median {ratios[len(ratios) // 2]:.2f} | >= 0.9x |"
        )
    return lines


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.2, help="TPC-H scale factor of lineitem (default 0.2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, the two sides in turns; the best counts")
    parser.add_argument("--files", type=int, default=16, help="files (write tasks) the rows are split into (default 16)")
    parser.add_argument("--plans", type=int, default=100, help="queries planned for the latency figures (default 100)")
    parser.add_argument("--no-s3", action="store_true", help="skip the scans on SeaweedFS S3")
    parser.add_argument("--s3-only", action="store_true", help="run only the scans on SeaweedFS S3")
    parser.add_argument("--write-order-only", action="store_true", help="run only the write ordering comparison")
    parser.add_argument("--small-files", type=int, default=2000, help="files of the compaction table (200 appends)")
    parser.add_argument("--compaction-only", action="store_true", help="run only the compaction measurement")
    args = parser.parse_args()
    if args.compaction_only:
        return compaction_main(args)

    from catalog.spark import local_spark
    from catalog.spark.tpch import generate

    work = tempfile.mkdtemp(prefix="lakekv-spark-bench-")
    seaweed = None
    spark = local_spark("local[2]", app_name="lakekv-spark-bench", catalogs={"lake": os.path.join(work, "lake")})
    try:
        lineitem = generate(args.scale, ("lineitem",))["lineitem"]
        rows = lineitem.num_rows
        parquet_dir = os.path.join(work, "parquet")
        # The same rows in the same layout on both sides: range-partitioned and
        # sorted on the key, as a table usually is.
        source = spark.createDataFrame(lineitem).repartitionByRange(args.files, "l_orderkey").sortWithinPartitions("l_orderkey")
        source.write.parquet(parquet_dir)
        spark.read.parquet(parquet_dir).createOrReplaceTempView("parquet_lineitem")
        if args.s3_only:
            from kvstore.testing.seaweed import SeaweedServer

            seaweed = SeaweedServer(os.path.join(work, "seaweed")).start()
            print(f"data: TPC-H lineitem scale {args.scale}: {rows:,} rows in {args.files} files; {args.repeat} runs, the two sides in turns")
            print("| query | s3lake.tpch.lineitem s | spark.read.parquet(s3a: dir) s | speed ratio | goal |")
            print("|---|---:|---:|---:|---:|")
            print("\n".join(s3_scans(spark, source, seaweed, args.repeat)))
            return 0
        spark.sql("CREATE NAMESPACE lake.tpch")
        source.createOrReplaceTempView("source_lineitem")  # the same 16 tasks write the table's files
        spark.sql("CREATE TABLE lake.tpch.lineitem AS SELECT * FROM source_lineitem")
        files_parquet = len([f for f in os.listdir(parquet_dir) if f.endswith(".parquet")])
        cutoff = sorted(lineitem.column("l_orderkey").to_pylist())[rows // 20]
        if args.write_order_only:
            print(f"data: TPC-H lineitem scale {args.scale}: {rows:,} rows; best of {args.repeat}")
            print("| query | ordered s | unordered s | speed ratio | goal |")
            print("|---|---:|---:|---:|---:|")
            print("\n".join(ordered_vs_plain(spark, work, args.files, args.repeat, cutoff)))
            return 0

        def run(sql: str) -> Callable[[], object]:
            return lambda: spark.sql(sql).collect()

        lake_full, pq_full = FULL_SCAN.format(table="lake.tpch.lineitem"), FULL_SCAN.format(table="parquet_lineitem")
        assert spark.sql(lake_full).collect() == spark.sql(pq_full).collect(), "the two sides disagree"
        lake_sel = SELECTIVE.format(table="lake.tpch.lineitem", cutoff=cutoff)
        pq_sel = SELECTIVE.format(table="parquet_lineitem", cutoff=cutoff)
        assert spark.sql(lake_sel).collect() == spark.sql(pq_sel).collect(), "the two sides disagree"

        def fresh_parquet(sql: str) -> Callable[[], object]:
            """``spark.read.parquet(dir)`` made for the query: it lists the directory and reads a footer,
            so it sees the files as they are now, as the catalog's plan does."""

            def query() -> object:
                spark.read.parquet(parquet_dir).createOrReplaceTempView("fresh_lineitem")
                return spark.sql(sql.format(table="fresh_lineitem", cutoff=cutoff)).collect()

            return query

        t_full_lake, t_full_fresh = best_of_alternating(args.repeat, run(lake_full), fresh_parquet(FULL_SCAN))
        t_full_lake2, t_full_pq = best_of_alternating(args.repeat, run(lake_full), run(pq_full))
        t_sel_lake, t_sel_fresh = best_of_alternating(args.repeat, run(lake_sel), fresh_parquet(SELECTIVE))
        t_sel_lake2, t_sel_pq = best_of_alternating(args.repeat, run(lake_sel), run(pq_sel))
        first_file = sorted(f for f in os.listdir(parquet_dir) if f.endswith(".parquet"))[0]  # the lowest keys
        spark.read.parquet(os.path.join(parquet_dir, first_file)).createOrReplaceTempView("one_file_lineitem")
        one_sel = SELECTIVE.format(table="one_file_lineitem", cutoff=cutoff)
        assert spark.sql(one_sel).collect() == spark.sql(pq_sel).collect(), "the keys are not all in the first file"
        t_sel_lake3, t_sel_floor = best_of_alternating(args.repeat, run(lake_sel), run(one_sel))
        load, plan, plan_new = catalog_calls(spark, "lake", "tpch", "lineitem", cutoff)
        load_times, plan_times = latencies(load, args.plans), latencies(plan, args.plans)
        plan_new_times = latencies(plan_new, args.plans)
        lake_plans = latencies(to_executed_plan(spark, lake_sel), args.plans)
        pq_plans = latencies(to_executed_plan(spark, pq_sel), args.plans)
        spark.conf.set("spark.sql.sources.useV1SourceList", "")  # spark.read.parquet through Spark's V2 file source
        spark.read.parquet(parquet_dir).createOrReplaceTempView("parquet_v2_lineitem")
        spark.conf.unset("spark.sql.sources.useV1SourceList")
        pq_v2_plans = latencies(to_executed_plan(spark, SELECTIVE.format(table="parquet_v2_lineitem", cutoff=cutoff)), args.plans)
        import catalog

        with catalog.open(os.path.join(work, "lake")) as lake:
            table = lake.load_table("tpch.lineitem")
            files_lake = len(table.files())
        explain = spark.sql(f"EXPLAIN {lake_sel}").collect()[0][0]
        planned = explain.split("InMemoryFileIndex(", 1)[1].split(" ", 1)[0] if "InMemoryFileIndex(" in explain else "?"
        write_order_lines = ordered_vs_plain(spark, work, args.files, args.repeat, cutoff)
        # The writes come last: they replace lake.tpch.lineitem's files (with the same rows).
        t_write_lake, t_write_pq = writes(spark, os.path.join(work, "written"), args.repeat)
        t_merge_lake, t_merge_pq, merged_rows = merges(spark, os.path.join(work, "merged"), args.repeat)
        compaction_lines = compaction(spark, os.path.join(work, "lake"), work, args.small_files, args.repeat)

        s3_lines = ["skipped (--no-s3)"]
        if not args.no_s3:
            from kvstore.testing.seaweed import SeaweedServer

            seaweed = SeaweedServer(os.path.join(work, "seaweed")).start()
            s3_lines = s3_scans(spark, source, seaweed, args.repeat)

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        print(f"# Spark catalog benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"pyspark {spark.version}, local[2], commit {commit}")
        print(f"data: TPC-H lineitem scale {args.scale}: {rows:,} rows, {lineitem.num_columns} columns, "
              f"{files_lake} lakehouse files / {files_parquet} Parquet files; best of {args.repeat}")
        print()
        print("| query | lake.tpch.lineitem s | spark.read.parquet(dir) s | speed ratio | goal |")
        print("|---|---:|---:|---:|---:|")
        print(f"| full-scan aggregation (JVM reader) | {t_full_lake:.3f} | {t_full_fresh:.3f} | "
              f"{t_full_fresh / t_full_lake:.2f}x | >= 0.9x |")
        print(f"| the same, vs a DataFrame read once (its file list kept) | {t_full_lake2:.3f} | {t_full_pq:.3f} | "
              f"{t_full_pq / t_full_lake2:.2f}x | |")
        print(f"| selective, ~5% of rows ({planned} of {files_lake} files planned) | {t_sel_lake:.3f} | {t_sel_fresh:.3f} | "
              f"{t_sel_fresh / t_sel_lake:.2f}x | >= 2x |")
        print(f"| the same, vs a DataFrame read once (its file list kept) | {t_sel_lake2:.3f} | {t_sel_pq:.3f} | "
              f"{t_sel_pq / t_sel_lake2:.2f}x | |")
        print(f"| floor: Spark's Parquet reader over only the planned file | {t_sel_lake3:.3f} | {t_sel_floor:.3f} | "
              f"{t_sel_floor / t_sel_lake3:.2f}x | |")
        print(f"| write: INSERT OVERWRITE (Spark's Parquet writer) vs df.write.parquet | {t_write_lake:.3f} | "
              f"{t_write_pq:.3f} | {t_write_pq / t_write_lake:.2f}x | >= 0.85x |")
        print(f"| MERGE of {merged_rows:,} rows (1%) vs Spark's own rewrite of the affected files | {t_merge_lake:.3f} | "
              f"{t_merge_pq:.3f} | {t_merge_pq / t_merge_lake:.2f}x | (reported) |")
        print("\n".join(write_order_lines))
        if not args.no_s3:
            print("\n".join(s3_lines))
        print()
        print(f"| latency, {args.plans} runs | p50 ms | p99 ms | goal |")
        print("|---|---:|---:|---:|")
        for label, times, goal in (
            ("LakehouseCatalog.loadTable", load_times, "<= 20 ms p50"),
            ("loadTable + newScanBuilder + pushFilters + build, a new filter (plan_scan)", plan_new_times, "<= 20 ms p50"),
            ("the same, a filter planned before at this version (kept plan)", plan_times, ""),
            ("spark.sql to executed plan: lake.tpch.lineitem", lake_plans, ""),
            ("the same: spark.read.parquet, V2 file source", pq_v2_plans, ""),
            ("the same: spark.read.parquet, V1 file source (default)", pq_plans, ""),
        ):
            print(f"| {label} | {1000 * p(times, 0.5):.1f} | {1000 * p(times, 0.99):.1f} | {goal} |")
        print()
        for line in compaction_lines:
            print(line)
    finally:
        spark.stop()
        if seaweed is not None:
            seaweed.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


COMPACTION_SCAN = "SELECT day, count(*), sum(v), sum(id) FROM lake.bench.small GROUP BY day ORDER BY day"
APPENDER = """
import pathlib, sys, pyarrow as pa, catalog
stop, url = pathlib.Path(sys.argv[1]), sys.argv[2]
schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64())])
with catalog.open(url) as lake:
    t = lake.load_table("bench.small")
    i = 10_000_000
    while not stop.exists():
        t.append(pa.table({"id": [i], "day": ["d0"], "v": [1.0]}, schema=schema))
        print(i, flush=True)
        i += 1
"""


def compaction(spark: Any, url: str, work: str, small_files: int, repeat: int) -> list[str]:
    """The compaction lines of the report: see the module docstring."""
    import pyarrow as pa

    import catalog

    appends, partitions = 200, max(1, small_files // 200)
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64())])
    with catalog.open(url) as lake:
        lake.create_namespace("bench")
        table = lake.create_table("bench.small", schema, partition_by=["day"])
        n = 0
        for _ in range(appends):  # each append: one small file per partition
            ids = list(range(n, n + 50 * partitions))
            n += len(ids)
            table.append(pa.table({"id": ids, "day": [f"d{i % partitions}" for i in ids], "v": [i * 0.5 for i in ids]},
                                  schema=schema))
        files_before = len(lake.load_table("bench.small").files())
    expected = spark.sql(COMPACTION_SCAN).collect()
    scan_before = min(latencies(lambda: spark.sql(COMPACTION_SCAN).collect(), repeat))
    stop = os.path.join(work, "stop-appending")
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, stop, url], stdout=subprocess.PIPE, text=True)
    try:
        assert appender.stdout is not None
        appender.stdout.readline()  # it is committing
        started = time.perf_counter()
        answer = spark.sql("CALL lake.system.rewrite_data_files(table => 'bench.small')").first()
        rewrite_s = time.perf_counter() - started
        with catalog.open(url) as lake:
            during = sum(1 for e in lake.history(limit=None, table="bench.small")
                         if e.version < answer.version and any(op["kind"] == "append" for op in e.operations)) - appends
        open(stop, "w").close()
        out, _ = appender.communicate(timeout=300)
    finally:
        open(stop, "w").close()
        if appender.poll() is None:
            appender.kill()
    assert appender.returncode == 0, f"the appending process failed (exit {appender.returncode})"
    appended = 1 + len(out.split())
    with catalog.open(url) as lake:
        live = lake.load_table("bench.small")
        files_after = len(live.files())
        data = live.scan().to_arrow()
        assert data.num_rows == n + appended, f"rows lost: {data.num_rows} != {n} + {appended}"
        assert sorted(data.column("id").to_pylist())[-appended:] == list(range(10_000_000, 10_000_000 + appended))
    got = spark.sql(COMPACTION_SCAN).collect()
    d0 = [r for r in got if r[0] == "d0"][0]
    assert [r for r in got if r[0] != "d0"] == [r for r in expected if r[0] != "d0"], "the rewrite changed rows"
    assert d0[1] == [r for r in expected if r[0] == "d0"][0][1] + appended, "the rewrite changed rows"
    scan_after = min(latencies(lambda: spark.sql(COMPACTION_SCAN).collect(), repeat))
    return [
        "| compaction: CALL lake.system.rewrite_data_files | before | after | ratio |",
        "|---|---:|---:|---:|",
        f"| data files ({appends} appends x {partitions} partitions) | {files_before} | {files_after} | "
        f"{files_before / max(1, files_after):.0f}x fewer |",
        f"| full-scan aggregation s (best of {repeat}) | {scan_before:.3f} | {scan_after:.3f} | "
        f"{scan_before / scan_after:.2f}x |",
        f"| the rewrite: {rewrite_s:.2f} s, {answer.rewritten_data_files_count} files in, "
        f"{answer.added_data_files_count} out, attempt {answer.attempts}; another process committed "
        f"{max(0, during)} appends before its commit (after the 200), {appended} in all, none lost; "
        f"'after' counts the files appended since its plan | | | |",
    ]


def compaction_main(args: argparse.Namespace) -> int:
    from catalog.spark import local_spark

    work = tempfile.mkdtemp(prefix="lakekv-spark-compaction-")
    url = os.path.join(work, "lake")
    spark = local_spark("local[2]", app_name="lakekv-spark-compaction", catalogs={"lake": url})
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        print(f"# Spark compaction benchmark  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"machine: {platform.machine()} {os.cpu_count()} cores, pyspark {spark.version}, local[2], commit {commit}")
        print()
        for line in compaction(spark, url, work, args.small_files, args.repeat):
            print(line)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
