"""The Spark catalog plugin from Python: where its jar is, and the Spark settings that load it.

>>> from catalog.spark import configure, local_spark        # doctest: +SKIP
>>> spark = local_spark(catalogs={"lake": "/data/lakehouse"})  # doctest: +SKIP
>>> spark.sql("SELECT count(*) FROM lake.sales.orders")    # doctest: +SKIP

The plugin (``io.lakekv.spark.LakehouseCatalog``, Java sources in
``catalog/spark/jvm/src``) is compiled by ``make install`` against the jars of
the installed pyspark and shipped inside this package. It talks to the Python
catalog through the control plane (:mod:`catalog.spark.control`).

``make install`` also fetches Spark's S3 file system (``hadoop-aws`` for
pyspark's Hadoop and the AWS SDK modules it uses) into ``.cache/hadoop-aws``:
:func:`spark_jars` adds it beside the plugin, and a lakehouse on S3 is then
read and written by Spark's own Parquet reader and writer (``s3a:``). Without
it, S3 lakehouses go through the Python data source.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Final

__all__ = ["CATALOG_CLASS", "catalog_conf", "configure", "jar_path", "s3a_jars", "spark_jars"]

CATALOG_CLASS: Final = "io.lakekv.spark.LakehouseCatalog"
JAR: Final = Path(__file__).resolve().parent / "jvm" / "lakekv-spark.jar"
# Where `make hadoop-aws` copies hadoop-aws and its AWS SDK jars (the checkout's ignored .cache/).
S3A_DIR: Final = Path(__file__).resolve().parents[2] / ".cache" / "hadoop-aws"


def jar_path() -> str:
    """The plugin jar inside the package.

    Raises:
        FileNotFoundError: the jar was not built (``make install`` builds it; it needs ``javac``).
    """
    if not JAR.is_file():
        raise FileNotFoundError(
            f"the lakekv Spark plugin jar is missing ({JAR}); `make install` builds it with javac "
            "(Debian: apt install openjdk-17-jdk-headless)"
        )
    return str(JAR)


def s3a_jars() -> list[str]:
    """The jars of Spark's S3 file system that ``make install`` fetched, or ``[]``.

    ``[]`` when they were not fetched (or the fetch did not finish), or when
    they are for another Hadoop than the installed pyspark's (pyspark was
    upgraded since): S3 lakehouses then go through the Python data source.
    """
    if not (S3A_DIR / ".complete").is_file():
        return []
    jars = sorted(str(path) for path in S3A_DIR.glob("*.jar"))
    hadoop = _pyspark_hadoop_version()
    if hadoop is None or str(S3A_DIR / f"hadoop-aws-{hadoop}.jar") not in jars:
        return []
    return jars


def _pyspark_hadoop_version() -> str | None:
    """The version of the Hadoop client inside the installed pyspark (its ``hadoop-client-api`` jar)."""
    import pyspark

    for path in (Path(pyspark.__file__).resolve().parent / "jars").glob("hadoop-client-api-*.jar"):
        return path.name[len("hadoop-client-api-"):-len(".jar")]
    return None


def spark_jars() -> str:
    """``spark.jars`` (and ``--jars``) for the plugin: its jar, then :func:`s3a_jars`, comma-separated.

    Raises:
        FileNotFoundError: the plugin jar was not built (see :func:`jar_path`).
    """
    return ",".join([jar_path(), *s3a_jars()])


def catalog_conf(name: str, url: object, **options: Any) -> dict[str, str]:
    """The Spark settings of one lakehouse catalog ``name`` (without ``spark.jars``).

    Args:
        name: the catalog name in SQL (``lake`` in ``lake.ns.t``).
        url: the lakehouse URL, or an open :class:`catalog.Lakehouse` (its URL is used).
        **options: catalog options: storage options (``endpoint_url``, ``key``,
            ``secret``, ``session_token``, ``region``, ``fsync``,
            ``commit_store``), ``uri`` and ``token`` for a shared ``lakekv
            serve``, ``python``.

    Raises:
        ValueError: ``name`` is not a str that is a Python identifier.
        TypeError: ``url`` (or, for a Lakehouse, its ``url``) is not a non-empty
            str or os.PathLike.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"catalog name must be an identifier, got {name!r}")
    url_text = getattr(url, "url", url)
    if isinstance(url_text, os.PathLike):
        url_text = os.fspath(url_text)
    if not isinstance(url_text, str) or not url_text:
        raise TypeError(f"url must be a lakehouse URL (str) or a Lakehouse, not {type(url).__name__}")
    prefix = f"spark.sql.catalog.{name}"
    conf = {prefix: CATALOG_CLASS, f"{prefix}.url": url_text, f"{prefix}.python": sys.executable}
    for key, value in options.items():
        if value is None:
            continue
        conf[f"{prefix}.{key}"] = str(value)
    return conf


def configure(builder: Any, name: str, url: object, **options: Any) -> Any:
    """Set ``builder`` (a ``SparkSession.Builder``) up with lakehouse catalog ``name``; returns it.

    Adds the plugin jar and Spark's S3 file system (:func:`spark_jars`) to
    ``spark.jars``, reads Parquet columns by field
    id (``spark.sql.parquet.fieldId.read.enabled``), which is how the plugin
    keeps renamed and re-added columns apart, and lets Spark push filters
    into Python data sources (``spark.sql.python.filterPushdown.enabled``),
    which the plugin's reads through the Python source need (storage the
    JVM cannot open, a ``lakekv serve`` whose disk it does not share). See
    :func:`catalog_conf` for the options.
    """
    builder = builder.config("spark.jars", spark_jars())
    builder = builder.config("spark.sql.parquet.fieldId.read.enabled", "true")
    builder = builder.config("spark.sql.python.filterPushdown.enabled", "true")
    for key, value in catalog_conf(name, url, **options).items():
        builder = builder.config(key, value)
    return builder
