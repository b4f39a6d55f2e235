"""``make run``: an end-to-end Spark SQL job on an embedded lakehouse, through the catalog plugin.

The lakehouse is Spark's catalog ``lake``; every step below but two is SQL
over three-part names (each printed with its time):

1. a SparkSession with catalog ``lake`` on the given directory; a previous
   run's ``lake.tpch`` is dropped (``DROP NAMESPACE ... CASCADE``), so the
   job can run again;
2. ``CREATE NAMESPACE lake.tpch`` with properties, and ``lake.tpch.reports``;
3. TPC-H data at a small scale factor (DuckDB's tpch extension), as Spark
   temporary views;
4. loads: ``CREATE TABLE ... AS SELECT`` for nation, customer and orders
   (each atomic: nothing is visible if its query fails), and for lineitem a
   ``CREATE TABLE ... PARTITIONED BY`` then ``INSERT INTO``;
5. a catalog view ``lake.tpch.reports.top_nations`` (revenue per nation:
   customer ⋈ orders ⋈ lineitem ⋈ nation) and a query of it;
6. more business with ``INSERT INTO ... SELECT`` from the tables themselves;
7. Python API, for what SQL cannot say yet: cancelling orders removes them
   from ``orders`` and their lines from ``lineitem`` in ONE durable
   transaction, one lakehouse version (no reader sees one without the other);
8. the view again (the answer changed), and the same query ``VERSION AS OF``
   the load version: it returns the earlier answer; ``lake.history()``.

Run: ``python -m catalog.spark.pipeline ./data/lakehouse [--scale 0.01]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

NAMESPACE = "lake.tpch"
LOADED = ("nation", "customer", "orders", "lineitem")
CANCELLED = 5  # the newest orders, cancelled in step 7

REVENUE_SQL = """
SELECT n.n_name AS nation, CAST(sum(l.l_extendedprice * (1 - l.l_discount)) AS DECIMAL(18, 2)) AS revenue
FROM {lineitem} l
JOIN {orders} o ON l.l_orderkey = o.o_orderkey
JOIN {customer} c ON o.o_custkey = c.c_custkey
JOIN {nation} n ON c.c_nationkey = n.n_nationkey
GROUP BY n.n_name
ORDER BY revenue DESC, nation
LIMIT 5
"""

LINEITEM_DDL = """
CREATE TABLE lake.tpch.lineitem (
    l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, l_linenumber INT,
    l_quantity DECIMAL(15, 2), l_extendedprice DECIMAL(15, 2), l_discount DECIMAL(15, 2), l_tax DECIMAL(15, 2),
    l_returnflag STRING, l_linestatus STRING, l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE,
    l_shipinstruct STRING, l_shipmode STRING, l_comment STRING)
PARTITIONED BY (l_returnflag)
TBLPROPERTIES ('source' = 'TPC-H lineitem')
"""


def _step(title: str, action: Callable[[], T]) -> T:
    started = time.perf_counter()
    result = action()
    print(f"  [{time.perf_counter() - started:6.1f}s] {title}", flush=True)
    return result


def run(url: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on the lakehouse at ``url``; returns the figures it printed.

    Once the lakehouse is open, the handle is closed and the Spark session
    stopped whatever happens.

    Raises:
        RuntimeError: the closing check failed (lineitem changed before the
            transaction's commit, a cancelled order is left, the ``VERSION AS OF``
            answer is not the earlier one, or the current one did not change);
            or the duckdb-ext-tpch wheel has no extensions directory.
        ValueError: ``scale`` is not positive, or ``url`` is a bad lakehouse URL.
        ModuleNotFoundError: duckdb or duckdb-ext-tpch is not installed.
        FileNotFoundError: the Spark plugin jar is not built (``make install``).
        TypeError, StoreError: ``url`` is not a str, or the lakehouse cannot be opened.
        PySparkException: a SQL statement failed (e.g. ``AnalysisException``).
        CatalogError: a catalog call failed, e.g. another writer made the
            cancellation's durable transaction conflict (``LockConflictError``,
            ``RetryableConflictError``).
    """
    import pyarrow.compute as pc

    import catalog
    from catalog.spark import local_spark
    from catalog.spark.tpch import generate

    started = time.perf_counter()
    print(f"lakekv Spark SQL pipeline on {url} (TPC-H scale {scale})", flush=True)
    spark = _step("Spark session (local[2]) with catalog lake", lambda: local_spark("local[2]", app_name="lakekv-pipeline", catalogs={"lake": url}))
    lake = catalog.open(url)
    try:

        def sql(statement: str) -> list[Any]:
            return spark.sql(statement).collect()

        _step(f"DROP NAMESPACE IF EXISTS {NAMESPACE} CASCADE", lambda: sql(f"DROP NAMESPACE IF EXISTS {NAMESPACE} CASCADE"))
        sql(f"CREATE NAMESPACE {NAMESPACE} WITH DBPROPERTIES ('source' = 'TPC-H via duckdb')")
        sql(f"CREATE NAMESPACE {NAMESPACE}.reports")
        print(f"  namespaces in lake: {[r[0] for r in sql('SHOW NAMESPACES IN lake')]}")
        data = _step("generate TPC-H", lambda: generate(scale, LOADED))
        for name in LOADED:
            spark.createDataFrame(data[name]).createOrReplaceTempView(f"staging_{name}")

        for name in ("nation", "customer", "orders"):
            ctas = f"CREATE TABLE {NAMESPACE}.{name} AS SELECT * FROM staging_{name}"
            _step(f"CREATE TABLE {NAMESPACE}.{name} AS SELECT ({data[name].num_rows} rows)", lambda: sql(ctas))
        sql(LINEITEM_DDL)
        _step(f"INSERT INTO {NAMESPACE}.lineitem ({data['lineitem'].num_rows} rows, partitioned by l_returnflag)",
              lambda: sql(f"INSERT INTO {NAMESPACE}.lineitem SELECT * FROM staging_lineitem"))
        load_version = int(dict(sql(f"SHOW TBLPROPERTIES {NAMESPACE}.lineitem"))["lakekv.version"])
        print(f"  tables: {[r[1] for r in sql(f'SHOW TABLES IN {NAMESPACE}')]}; loaded at lakehouse version {load_version}")

        names = {n: f"{NAMESPACE}.{n}" for n in LOADED}
        sql(f"CREATE VIEW {NAMESPACE}.reports.top_nations AS {REVENUE_SQL.format(**names)}")
        view = f"{NAMESPACE}.reports.top_nations"
        before = _step(f"SELECT * FROM {view}", lambda: sql(f"SELECT * FROM {view}"))
        for row in before:
            print(f"    {row.nation:<16} {row.revenue:>16}")

        # More business: every 1998 order again under new keys, with its lines.
        offset = 10_000_000
        _step(f"INSERT INTO {NAMESPACE}.orders SELECT ... FROM itself", lambda: sql(
            f"INSERT INTO {names['orders']} SELECT o_orderkey + {offset}, o_custkey, o_orderstatus, "
            f"o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment "
            f"FROM {names['orders']} WHERE o_orderdate >= DATE'1998-01-01'"))
        _step(f"INSERT INTO {NAMESPACE}.lineitem SELECT ... FROM itself", lambda: sql(
            f"INSERT INTO {names['lineitem']} SELECT l.l_orderkey + {offset}, l.l_partkey, l.l_suppkey, "
            f"l.l_linenumber, l.l_quantity, l.l_extendedprice, l.l_discount, l.l_tax, l.l_returnflag, "
            f"l.l_linestatus, l.l_shipdate, l.l_commitdate, l.l_receiptdate, l.l_shipinstruct, "
            f"l.l_shipmode, l.l_comment FROM {names['lineitem']} l JOIN {names['orders']} o "
            f"ON l.l_orderkey = o.o_orderkey WHERE o.o_orderdate >= DATE'1998-01-01'"))

        # Python API: two tables change in one durable transaction (SQL has no BEGIN ... COMMIT here yet).
        cancelled = [r[0] for r in sql(f"SELECT o_orderkey FROM {names['orders']} ORDER BY o_orderkey DESC LIMIT {CANCELLED}")]
        lines_before = sql(f"SELECT count(*) FROM {names['lineitem']}")[0][0]
        tx = lake.begin_durable(timeout=600, title="cancel orders")
        tx.load_table("tpch.lineitem").delete(pc.field("l_orderkey").isin(cancelled))
        tx.load_table("tpch.orders").delete(pc.field("o_orderkey").isin(cancelled))
        unchanged = sql(f"SELECT count(*) FROM {names['lineitem']}")[0][0] == lines_before
        _step(f"cancel {CANCELLED} orders and their lines in one transaction", tx.commit)
        cancel_version = lake.refresh()
        left = sql(f"SELECT count(*) FROM {names['orders']} WHERE o_orderkey IN ({', '.join(map(str, cancelled))})")[0][0]
        print(f"  lineitem unchanged until the commit: {unchanged}; committed as version {cancel_version}; "
              f"cancelled orders left: {left}")

        after = _step(f"SELECT * FROM {view} again", lambda: sql(f"SELECT * FROM {view}"))
        past = {n: f"{names[n]} VERSION AS OF {load_version}" for n in LOADED}
        as_of = _step(f"the same query VERSION AS OF {load_version}", lambda: sql(REVENUE_SQL.format(**past)))

        print("  history (newest first):")
        lake.refresh()
        for entry in lake.history(limit=6):
            kinds = ", ".join(f"{op.get('kind')} {op.get('object', '')}".strip() for op in entry.operations)
            print(f"    v{entry.version:<5} {time.strftime('%H:%M:%S', time.gmtime(entry.timestamp))}  {kinds}")

        counts = {n: sql(f"SELECT count(*) FROM {names[n]}")[0][0] for n in LOADED}
        same_as_before = [tuple(r) for r in as_of] == [tuple(r) for r in before]
        changed_now = [tuple(r) for r in after] != [tuple(r) for r in before]
        print("report:")
        print(f"  rows now: {counts}")
        print(f"  top nation before: {before[0].nation} {before[0].revenue}; now: {after[0].nation} {after[0].revenue}")
        print(f"  VERSION AS OF answer equals the earlier answer: {same_as_before}; current answer changed: {changed_now}")
        print(f"  total {time.perf_counter() - started:.1f}s")
        if not (unchanged and left == 0 and same_as_before and changed_now):
            raise RuntimeError("pipeline check failed: see the report above")
        return {"load_version": load_version, "counts": counts, "seconds": time.perf_counter() - started}
    finally:
        lake.close()
        spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m catalog.spark.pipeline URL [--scale S]``: parse ``argv`` (default: sys.argv), run, return 0.

    Raises:
        SystemExit: ``--help`` (status 0), or bad arguments or a non-positive
            ``--scale`` (status 2, with argparse's usage message).
        Anything :func:`run` raises.
    """
    parser = argparse.ArgumentParser(prog="python -m catalog.spark.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="lakehouse URL or directory (make run: ./data/lakehouse)")
    parser.add_argument("--scale", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error("--scale must be positive")
    run(args.url, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
