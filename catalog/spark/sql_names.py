"""Make a lakehouse's tables and views queryable by name from ``spark.sql``.

Each table (native or iceberg) becomes a Spark temporary view of the catalog plugin's
table when the plugin jar is in the session (``local_spark`` and
``configure`` put it there): a hidden catalog ``lakekv_<hash of the URL>`` is
configured on the lakehouse, and the view is
``spark.table("lakekv_<hash>.sales.orders")``. Spark 4.3 loads a catalog
table in a temporary view again for every query, so every query reads the
latest version, and ``INSERT INTO`` / ``INSERT OVERWRITE`` reach the table. A
view whose table's columns changed since is refused by Spark: call
:func:`register` again (also to see tables created since).

Without the jar, a table becomes a temporary view over the data source::

    CREATE OR REPLACE TEMPORARY VIEW `sales.orders`
    USING lakehouse OPTIONS (lakehouse '<url>', path 'sales.orders')

which takes inserts too, but PySpark 4.3 plans its read once and reuses that
plan for queries without pushed filters (see catalog.spark.options), so the
source pins the version: such a view reads the table as of :func:`register`,
and every file of it (the source never prunes).

Spark temporary views have one-part names, so a namespaced table keeps its
full dotted name as ONE identifier and is written in backquotes:
``SELECT * FROM `sales.orders```. Unquoted, ``sales.orders`` would mean
table ``orders`` in Spark database ``sales``.

Catalog views with dialect ``spark`` become Spark temporary views of their SQL,
which therefore names tables in the same backquoted way. Views are created
after tables and retried until no more succeed, so a view may use another
view whatever their order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from catalog.spark.plugin import JAR, catalog_conf
from catalog.spark.source import FORMAT_NAME, LakehouseDataSource

__all__ = ["register", "Registration", "quote_identifier", "sql_string"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier for ``name``, dots and all kept in one part.

    >>> quote_identifier("sales.orders")
    '`sales.orders`'
    >>> quote_identifier("odd`name")
    '`odd``name`'
    """
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    r"""A Spark SQL string literal for ``value``.

    >>> sql_string("it's C:\\data")
    "'it\\'s C:\\\\data'"
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Registration:
    """What :func:`register` made visible to Spark, by lakehouse name."""

    tables: list[str] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    # Objects left out, with the reason (Iceberg tables, non-Spark views, views that fail).
    skipped: dict[str, str] = field(default_factory=dict)


def _plugin_catalog(spark: SparkSession, lake: catalog.Lakehouse) -> str | None:
    """The name of a catalog-plugin catalog on ``lake`` in this session (set up here), or None without the jar.

    Views over the plugin's tables plan every query afresh; views ``USING
    lakehouse`` reuse a read plan (module docstring).
    """
    if JAR.name not in (spark.conf.get("spark.jars", "") or ""):
        return None
    name = "lakekv_" + hashlib.sha1(lake.url.encode()).hexdigest()[:12]
    for key, value in catalog_conf(name, lake.url).items():
        if spark.conf.get(key, None) != value:
            spark.conf.set(key, value)
    return name


def register(spark: SparkSession, lake: catalog.Lakehouse, namespace: str | None = None) -> Registration:
    """Register the ``lakehouse`` format and expose ``lake``'s tables and views to ``spark.sql``.

    Also switches on Python filter pushdown for the session (PySpark refuses
    to plan a source that implements ``pushFilters`` without it). Call again
    after creating tables or views to expose them too; it replaces the
    earlier registrations.

    Args:
        spark: the session.
        lake: an open lakehouse; its ``url`` is what Spark workers open.
        namespace: only this namespace and those below it (default: all).

    Returns:
        The names registered and skipped.

    Raises:
        TypeError: ``spark`` is not a SparkSession, or ``lake`` not a catalog.Lakehouse.
        ValueError: ``namespace`` is a malformed name.
        NoSuchNamespaceError: ``namespace`` does not exist.
        PySparkException: Spark refuses a table's temporary view (a view whose SQL
            fails is skipped instead, with the reason).
        StoreError: the lakehouse could not be refreshed or read.
    """
    if not isinstance(spark, SparkSession):
        raise TypeError(f"spark must be a SparkSession, not {type(spark).__name__}")
    if not isinstance(lake, catalog.Lakehouse):
        raise TypeError(f"lake must be a catalog.Lakehouse, not {type(lake).__name__}")
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(LakehouseDataSource)
    lake.refresh()
    plugin = _plugin_catalog(spark, lake)

    namespaces = [namespace] if namespace is not None else []
    namespaces += lake.list_namespaces(namespace, recursive=True)
    result = Registration()
    views: list[catalog.View] = []
    for ns in namespaces:
        for name in lake.list_tables(ns):
            # Every table kind reads through the source and the plugin (iceberg ones through pyiceberg).
            if plugin is not None:
                relation = f"{plugin}.{'.'.join(quote_identifier(part) for part in name.split('.'))}"
                # Spark 4.3 loads a catalog table in a temporary view again for
                # every query (and refuses one whose columns changed), so the
                # view reads the latest version and takes INSERT INTO.
                spark.table(relation).createOrReplaceTempView(quote_identifier(name))
            else:
                spark.sql(
                    f"CREATE OR REPLACE TEMPORARY VIEW {quote_identifier(name)} USING {FORMAT_NAME} "
                    f"OPTIONS (lakehouse {sql_string(lake.url)}, path {sql_string(name)})"
                )
            result.tables.append(name)
        for name in lake.list_views(ns):
            view = lake.load_view(name)
            if view.dialect.lower() != "spark":
                result.skipped[name] = f"dialect {view.dialect}, not spark"
                continue
            views.append(view)

    # A view may use a view registered later in this loop: retry the failures
    # until a round makes no progress; what still fails is reported.
    while views:
        failed: list[catalog.View] = []
        errors: dict[str, str] = {}
        for view in views:
            try:
                spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {quote_identifier(view.name)} AS {view.sql}")
            except PySparkException as exc:
                failed.append(view)
                errors[view.name] = str(exc).splitlines()[0]
            else:
                result.views.append(view.name)
        if len(failed) == len(views):
            result.skipped.update(errors)
            break
        views = failed
    return result
