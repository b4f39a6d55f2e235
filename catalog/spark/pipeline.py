"""``make run``: an end-to-end PySpark job on an embedded lakehouse.

Steps (each printed with its time):

1. open (or create) the lakehouse at the given directory; a previous run's
   ``tpch`` namespace is dropped with its files, so the job can run again;
2. generate TPC-H data at a small scale factor (DuckDB's tpch extension);
3. load four tables in ONE durable multi-table transaction: Spark writes each
   with ``.option("transaction", id)`` and nothing is visible until the
   transaction commits, as one lakehouse version;
4. register the tables and a catalog view with Spark and run SQL over them by
   name (revenue per nation: customer ⋈ orders ⋈ lineitem ⋈ nation);
5. append more orders and line items with ``INSERT INTO``;
6. show ``lake.history()`` and re-run the query as of the load version
   (``versionAsOf``): it returns the earlier answer.

Run: ``python -m catalog.spark.pipeline ./data/lakehouse [--scale 0.01]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

NAMESPACE = "tpch"
LOADED = ("nation", "customer", "orders", "lineitem")

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


def _step(title: str, action: Callable[[], T]) -> T:
    started = time.perf_counter()
    result = action()
    print(f"  [{time.perf_counter() - started:6.1f}s] {title}", flush=True)
    return result


def _stage_write(spark: Any, url: str, txid: str, name: str, data: Any) -> Callable[[], None]:
    """A Spark write of ``data`` into ``tpch.<name>``, staged in durable transaction ``txid``."""

    def write() -> None:
        spark.createDataFrame(data).write.format("lakehouse").option("lakehouse", url).option(
            "transaction", txid
        ).option("createIfMissing", "true").mode("append").save(f"{NAMESPACE}.{name}")

    return write


def run(url: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on the lakehouse at ``url``; returns the figures it printed."""
    import catalog
    from catalog.spark import local_spark, register
    from catalog.spark.sql_names import quote_identifier
    from catalog.spark.tpch import generate

    started = time.perf_counter()
    print(f"lakekv Spark pipeline on {url} (TPC-H scale {scale})", flush=True)
    spark = _step("Spark session (local[2])", lambda: local_spark("local[2]", app_name="lakekv-pipeline"))
    lake = catalog.open(url)
    try:
        if lake.namespace_exists(NAMESPACE):
            _step("drop the previous run's namespace", lambda: lake.drop_namespace(NAMESPACE, cascade=True))
        lake.create_namespace(NAMESPACE, properties={"source": "TPC-H via duckdb"})
        lake.create_namespace(f"{NAMESPACE}.reports")
        data = _step("generate TPC-H", lambda: generate(scale, LOADED))

        # Generous timeout: a loaded machine can take minutes per Spark job; we
        # also ping before each write so the transaction stays alive throughout.
        tx = lake.begin(timeout=600, title="load TPC-H")
        for name in LOADED:
            tx.ping()
            title = f"stage {name} ({data[name].num_rows} rows) in transaction {tx.id[:8]}"
            _step(title, _stage_write(spark, lake.url, tx.id, name, data[name]))
        lake.refresh()
        visible_before = [n for n in LOADED if lake.table_exists(f"{NAMESPACE}.{n}")]
        _step("commit the transaction", tx.commit)
        lake.refresh()
        load_version = lake.version
        print(f"  tables visible before commit: {visible_before or 'none'}; after: lakehouse version {load_version}")

        names = {n: quote_identifier(f"{NAMESPACE}.{n}") for n in LOADED}
        lake.create_view(f"{NAMESPACE}.reports.top_nations", REVENUE_SQL.format(**names))
        _step("register tables and views with Spark", lambda: register(spark, lake))
        view = quote_identifier(f"{NAMESPACE}.reports.top_nations")
        before = _step("SQL: top nations by revenue", lambda: spark.sql(f"SELECT * FROM {view}").collect())
        for row in before:
            print(f"    {row.nation:<16} {row.revenue:>16}")

        # More business: every 1998 order again under new keys, with its lines.
        offset = 10_000_000
        _step(
            "INSERT INTO orders",
            lambda: spark.sql(
                f"INSERT INTO {names['orders']} SELECT o_orderkey + {offset}, o_custkey, o_orderstatus, "
                f"o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment "
                f"FROM {names['orders']} WHERE o_orderdate >= DATE'1998-01-01'"
            ),
        )
        _step(
            "INSERT INTO lineitem",
            lambda: spark.sql(
                f"INSERT INTO {names['lineitem']} SELECT l.l_orderkey + {offset}, l.l_partkey, l.l_suppkey, "
                f"l.l_linenumber, l.l_quantity, l.l_extendedprice, l.l_discount, l.l_tax, l.l_returnflag, "
                f"l.l_linestatus, l.l_shipdate, l.l_commitdate, l.l_receiptdate, l.l_shipinstruct, "
                f"l.l_shipmode, l.l_comment FROM {names['lineitem']} l JOIN {names['orders']} o "
                f"ON l.l_orderkey = o.o_orderkey WHERE o.o_orderdate >= DATE'1998-01-01'"
            ),
        )
        lake.refresh()
        register(spark, lake)  # views show a table as of their first query: re-register to see the appends
        after = _step("SQL again after the appends", lambda: spark.sql(f"SELECT * FROM {view}").collect())

        def past(name: str) -> Any:
            df = (
                spark.read.format("lakehouse")
                .option("lakehouse", lake.url)
                .option("versionAsOf", str(load_version))
                .load(f"{NAMESPACE}.{name}")
            )
            df.createOrReplaceTempView(f"past_{name}")
            return df

        for name in LOADED:
            past(name)
        as_of = _step(
            f"time travel: the query as of version {load_version}",
            lambda: spark.sql(REVENUE_SQL.format(**{n: f"past_{n}" for n in LOADED})).collect(),
        )

        print("  history (newest first):")
        for entry in lake.history(limit=6):
            kinds = ", ".join(f"{op.get('kind')} {op.get('object', '')}".strip() for op in entry.operations)
            print(f"    v{entry.version:<5} {time.strftime('%H:%M:%S', time.gmtime(entry.timestamp))}  {kinds}")

        counts = {n: lake.load_table(f"{NAMESPACE}.{n}").scan().count() for n in LOADED}
        same_as_before = [tuple(r) for r in as_of] == [tuple(r) for r in before]
        changed_now = [tuple(r) for r in after] != [tuple(r) for r in before]
        print("report:")
        print(f"  rows now: {counts}")
        print(f"  top nation before appends: {before[0].nation} {before[0].revenue}; now: {after[0].nation} {after[0].revenue}")
        print(f"  time-travel answer equals the earlier answer: {same_as_before}; current answer changed: {changed_now}")
        print(f"  total {time.perf_counter() - started:.1f}s")
        if visible_before or not same_as_before or not changed_now:
            raise RuntimeError("pipeline check failed: see the report above")
        return {"load_version": load_version, "counts": counts, "seconds": time.perf_counter() - started}
    finally:
        lake.close()
        spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
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
