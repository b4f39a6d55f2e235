"""TPC-H data for the Spark pipeline, generated offline with DuckDB's tpch extension.

The extension comes from the ``duckdb-ext-tpch`` wheel (pinned to the DuckDB
build it was compiled for), which unpacks it under
``site-packages/duckdb_ext/extensions/``; we point DuckDB at that directory
and forbid it to download anything.
"""

from __future__ import annotations

import os
from typing import Final

import pyarrow as pa

__all__ = ["TPCH_TABLES", "generate"]

TPCH_TABLES: Final = ("region", "nation", "customer", "supplier", "part", "partsupp", "orders", "lineitem")


def _extension_directory() -> str:
    import duckdb_ext  # namespace package installed by duckdb-ext-tpch

    for root in duckdb_ext.__path__:
        candidate = os.path.join(root, "extensions")
        if os.path.isdir(candidate):
            return candidate
    raise RuntimeError("duckdb-ext-tpch is installed but has no extensions/ directory; reinstall it (make install)")


def generate(scale_factor: float, tables: tuple[str, ...] = TPCH_TABLES) -> dict[str, pa.Table]:
    """TPC-H tables at ``scale_factor`` (0.01 is ~87k rows in all) as Arrow tables.

    Raises:
        ValueError: a non-positive scale factor or an unknown table name.
    """
    if not scale_factor > 0:
        raise ValueError(f"scale_factor must be positive, got {scale_factor!r}")
    unknown = [t for t in tables if t not in TPCH_TABLES]
    if unknown:
        raise ValueError(f"unknown TPC-H table {unknown[0]!r}; known: {', '.join(TPCH_TABLES)}")
    import duckdb

    con = duckdb.connect(config={"extension_directory": _extension_directory(), "autoinstall_known_extensions": False})
    try:
        con.execute("LOAD tpch")
        con.execute("CALL dbgen(sf = ?)", [scale_factor])
        return {name: con.execute(f"SELECT * FROM {name}").fetch_arrow_table() for name in tables}
    finally:
        con.close()
