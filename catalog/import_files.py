"""``add_files``: import existing Parquet files into a native table in place, without copying them.

``source`` is a path inside the lakehouse's own storage (store-relative, or
an absolute path or ``file:`` URI under its root): one ``.parquet`` file, or
a directory of them, possibly Hive-style partitioned
(``day=2024-01-01/part-0.parquet``). Names starting with ``_`` or ``.``
(``_SUCCESS``, ``.crc`` files) are skipped. Files under the lakehouse's
``data/`` are refused: GC deletes unreferenced files there, so they are
never "existing files" of anyone.

Every file is checked before anything is committed, and the first problem
is a ``ValueError`` naming the file and the column: a column the table lacks,
a type that is not the table's (or a lossless widening of it), a required
column missing, a partition directory that is not the table's partitioning
or whose value does not parse. Each file is read whole once: its CRC32C is
computed over the bytes read (so every later read, verify and export checks
it), its page checksums, where the writer put them, are verified, and its
column statistics are computed from its rows, as for a file lakekv wrote.

The files usually carry no Parquet field ids, so each entry records the
file's column names against the table's field ids (``DataFile.column_ids``):
reads match columns by id from then on, and a later column rename still
reads them. Partition columns left out of a Hive-style file are filled from
the directory's value. Such files are read by the Python readers (the Spark
plugin sends their scans through its Python source, checking the whole
file's CRC32C); a ``rewrite_data_files`` turns them into native files.

One ``append`` commit adds them all. The files stay where they are: a later
rewrite or overwrite removes them like any data file, and GC then deletes
them once the removal is past retention.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.context import LakeContext
from catalog.datafiles import DataFile, column_stats, encode_value, imported_view, new_file_id
from catalog.schema import field_id, project
from catalog.transactions import LiveHost
from catalog.tree import DATA_PREFIX, LakeTree
from kvstore.format.checksum import crc32c

HIVE_NULL: Final = "__HIVE_DEFAULT_PARTITION__"


@dataclass
class ImportReport:
    """What :func:`add_files` committed: ``version`` None when ``source`` held no Parquet file."""

    table: str
    version: int | None = None
    added_files_count: int = 0
    added_rows_count: int = 0
    added_bytes_count: int = 0


def _store_relative(ctx: LakeContext, source: str) -> str:
    if not isinstance(source, str) or not source.strip():
        raise TypeError(f"source must be a path (str) inside the lakehouse's storage, not {source!r}")
    path = source.strip()
    if path.startswith("file:"):
        path = urllib.parse.urlparse(path).path
    root = str(getattr(ctx.objects, "url", ""))
    if root.startswith("file:"):
        root = urllib.parse.urlparse(root).path
    if os.path.isabs(path):
        root = os.path.abspath(root).rstrip("/") + "/"
        if not root or not path.startswith(root):
            raise ValueError(
                f"source {source!r} is not inside the lakehouse's storage ({root}): add_files imports files "
                "in place and never copies; put them under the lakehouse's root first"
            )
        path = path[len(root):]
    elif "://" in path:
        raise ValueError(f"source {source!r}: give a path inside the lakehouse's storage, not another store's URL")
    path = path.strip("/")
    if not path:
        raise ValueError(f"source {source!r} is the lakehouse's root; name the directory or file to import")
    if path == DATA_PREFIX or path.startswith(DATA_PREFIX + "/"):
        raise ValueError(f"source {source!r} lies under the lakehouse's {DATA_PREFIX}/, whose unreferenced files GC deletes")
    return path


def _listing(ctx: LakeContext, path: str) -> list[str]:
    try:
        ctx.objects.head(path)
        single = True
    except FileNotFoundError:
        single = False
    if single:
        if not path.endswith(".parquet"):
            raise ValueError(f"source {path!r} is not a .parquet file")
        return [path]
    found = sorted(
        m.path for m in ctx.objects.list(path + "/")
        if m.path.endswith(".parquet") and not any(p.startswith(("_", ".")) for p in m.path[len(path) + 1 :].split("/"))
    )
    if not found:
        raise ValueError(f"source {path!r} holds no .parquet file")
    return found


def _hive_values(path: str, base: str, partition_by: list[str]) -> dict[str, str | None]:
    dirs = path[len(base) + 1 :].split("/")[:-1] if path != base else []
    values: dict[str, str | None] = {}
    for d in dirs:
        if "=" not in d:
            raise ValueError(f"{path}: directory {d!r} is not a Hive partition directory (column=value)")
        key, _, raw = d.partition("=")
        value = urllib.parse.unquote(raw)
        values[key] = None if value == HIVE_NULL else value
    if values and sorted(values) != sorted(partition_by):
        raise ValueError(
            f"{path}: its partition directories name {', '.join(values)}, the table is partitioned by "
            f"{', '.join(partition_by) or 'nothing'}"
        )
    return values


def _widens(have: pa.DataType, want: pa.DataType) -> bool:
    if have == want:
        return True
    if pa.types.is_signed_integer(have) and pa.types.is_signed_integer(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return bool(have.bit_width <= want.bit_width)
    return bool(
        (pa.types.is_string(have) and pa.types.is_large_string(want))
        or (pa.types.is_large_string(have) and pa.types.is_string(want))
    )


def _entry(ctx: LakeContext, path: str, base: str, schema: pa.Schema, partition_by: list[str]) -> DataFile:
    body = ctx.objects.get(path)
    try:
        data = pq.read_table(pa.BufferReader(body), page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ValueError(f"{path} cannot be read as Parquet: {exc}") from exc
    by_name = {f.name: f for f in schema}
    column_ids: dict[str, str] = {}
    for f in data.schema:
        want = by_name.get(f.name)
        if want is None:
            raise ValueError(f"{path}: column {f.name!r} is not in the table (it has {', '.join(schema.names)})")
        if not _widens(f.type, want.type):
            raise ValueError(f"{path}: column {f.name!r} is {f.type}, the table's is {want.type}")
        column_ids[f.name] = str(field_id(want))
    hive = _hive_values(path, base, partition_by)
    if partition_by and not hive and not all(c in column_ids for c in partition_by):
        raise ValueError(f"{path}: the table is partitioned by {', '.join(partition_by)}; the file is not under "
                         "column=value directories and lacks a partition column")
    partition: dict[str, Any] = {}
    for name, raw in hive.items():
        f = by_name[name]
        if name in column_ids:
            raise ValueError(f"{path}: partition column {name!r} is both in the file and in its directory")
        try:
            value = pa.scalar(raw, pa.string()).cast(f.type) if raw is not None else pa.scalar(None, f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"{path}: partition value {raw!r} of column {name!r} is not a {f.type}: {exc}") from None
        partition[str(field_id(f))] = encode_value(value)
    entry = DataFile(
        id=new_file_id(), path=path, size=len(body), rows=data.num_rows, partition=partition,
        crc32c=crc32c(body), parquet_field_ids=False, column_ids=column_ids,
    )
    view = project(imported_view(data, entry, schema), schema)
    for f in schema:
        if not f.nullable and view.column(f.name).null_count:
            raise ValueError(f"{path}: column {f.name!r} is required (NOT NULL) and the file lacks it or holds nulls")
    for name in partition_by:
        fid = str(field_id(by_name[name]))
        if fid not in partition:  # a partition column inside the file: one value per file
            stats = column_stats(view.column(name))
            if stats[2] == view.num_rows:
                partition[fid] = None
            elif stats[2] == 0 and stats[0] is not None and stats[0] == stats[1]:
                partition[fid] = stats[0]
            else:
                raise ValueError(f"{path}: holds more than one value of partition column {name!r}")
    entry.stats = {str(field_id(f)): column_stats(view.column(f.name)) for f in schema}
    return entry


def add_files(ctx: LakeContext, name: str, source: str) -> ImportReport:
    """Import the Parquet files at ``source`` into table ``name`` in place (see the module docstring); one commit.

    Raises:
        TypeError: ``source`` is not a str.
        ValueError: ``source`` is outside the lakehouse's storage or under its ``data/``, holds no
            Parquet file, or a file does not fit the table (naming the file and the column);
            the table is not a native table.
        NoSuchTableError: no such table.
    """
    base = _store_relative(ctx, source)
    ctx.store.refresh()
    table = LakeTree(LiveHost(ctx)).load_table(name)
    if table.format != "parquet":
        raise ValueError(f"add_files: {table.name!r} is an {table.format} table; only native tables import files here")
    paths = _listing(ctx, base)
    entries = [_entry(ctx, p, base, table.schema, list(table.partition_by)) for p in paths]
    report = ImportReport(table.name)
    report.version = table.commit_files(entries, mode="append")
    report.added_files_count = len(entries)
    report.added_rows_count = sum(e.rows for e in entries)
    report.added_bytes_count = sum(e.size for e in entries)
    return report
