"""The rows every system receives: one schema, the small append batches and the
contents of the planned table's files.

File ``i`` of the planned table holds ids ``[i * rows_per_file, (i + 1) *
rows_per_file)``, so min/max statistics on ``id`` separate the files exactly
and a selective filter (:func:`selective_range`) matches exactly one file.
"""

from __future__ import annotations

import random

import pyarrow as pa

NAMESPACE = "bench"
APPEND_ONE = f"{NAMESPACE}.appends_1w"     # (a) single writer
APPEND_MANY = f"{NAMESPACE}.appends_nw"    # (a) concurrent writers
PLANNED = f"{NAMESPACE}.files"             # (b), (c)
LISTED_NAMESPACE = "listed"                # (d)

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("amount", pa.float64()),
    pa.field("tag", pa.string()),
])


def rows(first_id: int, count: int, rng: random.Random) -> pa.Table:
    """``count`` rows with ids ``first_id ..``; amounts and tags are random so
    no system can compress a file to nothing."""
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + count), pa.int64()),
            "amount": pa.array([rng.random() * 1000 for _ in range(count)], pa.float64()),
            "tag": pa.array([f"t{rng.randrange(100)}" for _ in range(count)], pa.string()),
        },
        schema=SCHEMA,
    )


def file_contents(file_index: int, rows_per_file: int, seed: int) -> pa.Table:
    """The rows of file ``file_index`` of the planned table (the same for every system)."""
    return rows(file_index * rows_per_file, rows_per_file, random.Random(seed * 1_000_003 + file_index))


def selective_range(file_index: int, rows_per_file: int) -> tuple[int, int]:
    """An inclusive id range that lies inside file ``file_index`` only."""
    first = file_index * rows_per_file
    return first + 1, first + rows_per_file - 2 if rows_per_file > 2 else first


def table_names(count: int) -> list[str]:
    """The names of the (d) tables, in the listed namespace."""
    width = len(str(count - 1))
    return [f"{LISTED_NAMESPACE}.t{i:0{width}d}" for i in range(count)]


def split(name: str) -> tuple[str, str]:
    """``"ns.table"`` -> ``("ns", "table")``."""
    namespace, _, table = name.rpartition(".")
    if not namespace or not table:
        raise ValueError(f"table name must be 'namespace.table', got {name!r}")
    return namespace, table
