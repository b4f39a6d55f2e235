"""``rewrite_data_files``: compaction of a table's data files, selected by a SQL condition, bin-packed or sorted.

Iceberg's ``rewrite_data_files`` for native tables. The files to rewrite are
those that may hold rows matching ``where`` (a SQL boolean expression over
the table's columns, evaluated by DuckDB on each candidate file's rows after
pruning nothing: a file is selected if any of its rows matches; None selects
every file). Then, per partition:

* ``binpack``: the selected files smaller than 3/4 of the target are grouped
  (by id, up to the target size each) and each group of two or more is
  written again as files of about ``target_file_bytes``;
* ``sort``: every selected file of the partition is read, sorted by
  ``sort_order`` (``"a, b DESC NULLS FIRST"``) and written again as files of
  about ``target_file_bytes``: a later selective query prunes more.

The commit is one :class:`~catalog.ops.Compact` operation: same rows, other
files. By :mod:`catalog.conflicts` it rebases over concurrent appends,
deletes and compactions that did not touch its inputs; when a concurrent
commit removed one of its inputs (at any time after the plan read them:
before its commit began, too) it is retryable, and this module redoes
the whole rewrite on the new version, up to ``retries`` times: never are
rows another compaction already rewrote added a second time. An append
is never held up or refused by it (an append never conflicts with a compaction).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from catalog.context import LakeContext
from catalog.datafiles import DataFile, read_file, write_files
from catalog.errors import RetryableConflictError
from catalog.ops import Compact
from catalog.table import Table
from catalog.transactions import LiveHost, commit_ops
from catalog.tree import LakeTree

STRATEGIES: Final = ("binpack", "sort")
DEFAULT_RETRIES: Final = 3
_SORT_TERM: Final = re.compile(r"^\s*(?P<col>`[^`]+`|[^\s,`]+)(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?\s*$", re.I)


@dataclass
class RewriteReport:
    """What :func:`rewrite_data_files` did (Iceberg's result columns, plus the version and attempts).

    ``version`` is None when nothing needed rewriting.
    """

    table: str
    rewritten_data_files_count: int = 0
    added_data_files_count: int = 0
    rewritten_bytes_count: int = 0
    added_bytes_count: int = 0
    version: int | None = None
    attempts: int = 1


def parse_sort_order(sort_order: str, schema: pa.Schema) -> list[tuple[str, str, str]]:
    """``"a, b DESC NULLS FIRST"`` as ``[(column, "ascending"|"descending", "at_start"|"at_end")]``.

    Nulls go first for ascending and last for descending unless said (Spark's default).

    Raises:
        TypeError: ``sort_order`` is not a str.
        ValueError: it is empty, a term is malformed, or names a column the table lacks.
    """
    if not isinstance(sort_order, str):
        raise TypeError(f"sort_order must be a str like 'a, b DESC', not {type(sort_order).__name__}")
    terms = [t for t in sort_order.split(",")]
    if not sort_order.strip() or any(not t.strip() for t in terms):
        raise ValueError(f"sort_order {sort_order!r} is empty or has an empty term; give 'column [ASC|DESC] [NULLS FIRST|LAST], ...'")
    out = []
    for term in terms:
        m = _SORT_TERM.match(term)
        if m is None:
            raise ValueError(f"sort_order term {term.strip()!r} is not 'column [ASC|DESC] [NULLS FIRST|LAST]'")
        col = m["col"].strip("`")
        if col not in schema.names:
            raise ValueError(f"sort_order names column {col!r}, which the table does not have (it has {', '.join(schema.names)})")
        descending = (m["dir"] or "ASC").upper() == "DESC"
        nulls = (m["nulls"] or ("LAST" if descending else "FIRST")).upper()
        out.append((col, "descending" if descending else "ascending", "at_start" if nulls == "FIRST" else "at_end"))
    return out


def check_where(where: str, schema: pa.Schema) -> None:
    """Refuse a ``where`` DuckDB cannot evaluate over an empty table of ``schema``.

    Raises:
        TypeError: ``where`` is not a str.
        ValueError: it does not parse, names an unknown column, or is not a boolean condition.
    """
    if not isinstance(where, str):
        raise TypeError(f"where must be a SQL condition (str), not {type(where).__name__}")
    _matching_rows(schema.empty_table(), where)


def _matching_rows(data: pa.Table, where: str) -> int:
    import duckdb  # on first use: only a rewrite with a condition needs it

    con = duckdb.connect(config={"enable_external_access": False})
    try:
        con.register("candidate", data)
        try:
            row = con.execute(f"SELECT count(*) FROM candidate WHERE ({where})").fetchone()
        except duckdb.Error as exc:
            raise ValueError(f"where {where!r} is not a condition over the table's columns: {exc}") from None
    finally:
        con.close()
    return 0 if row is None else int(row[0])


def _groups(files: list[DataFile], target: int, strategy: str) -> list[list[DataFile]]:
    by_partition: dict[str, list[DataFile]] = {}
    for f in files:
        if strategy == "binpack" and f.size >= target * 3 // 4:
            continue  # already big enough
        by_partition.setdefault(json.dumps(f.partition, sort_keys=True), []).append(f)
    groups: list[list[DataFile]] = []
    for part in by_partition.values():
        part.sort(key=lambda f: f.id)
        if strategy == "sort":
            groups.append(part)
            continue
        current: list[DataFile] = []
        size = 0
        for f in part:
            if current and size + f.size > target:
                groups.append(current)
                current, size = [], 0
            current.append(f)
            size += f.size
        groups.append(current)
    return [g for g in groups if len(g) > 1 or (strategy == "sort" and g)]


def _attempt(
    ctx: LakeContext, table: Table, where: str | None, target: int, strategy: str, order: list[tuple[str, str, str]]
) -> RewriteReport:
    report = RewriteReport(table.name)
    files = table.files()
    if where is not None:
        files = [f for f in files if _matching_rows(read_file(ctx.objects, f, table.schema, table=table.name), where) > 0]
    removed: list[DataFile] = []
    added: list[DataFile] = []
    for group in _groups(files, target, strategy):
        data = pa.concat_tables([read_file(ctx.objects, f, table.schema, table=table.name) for f in group])
        if order:
            data = data.take(pc.sort_indices(data, sort_keys=order))
        added.extend(write_files(ctx.objects, table.location, data, table.schema, table.partition_by, target))
        removed.extend(group)
    if not removed:
        return report
    op = Compact(table=table.name, table_id=table.id, removed=removed, added=added, observed=[f.id for f in removed])
    report.version = commit_ops(ctx, [op]).version
    report.rewritten_data_files_count, report.added_data_files_count = len(removed), len(added)
    report.rewritten_bytes_count = sum(f.size for f in removed)
    report.added_bytes_count = sum(f.size for f in added)
    return report


def rewrite_data_files(
    ctx: LakeContext,
    name: str,
    where: str | None,
    target_file_bytes: int,
    strategy: str,
    sort_order: str | None,
    retries: int = DEFAULT_RETRIES,
) -> RewriteReport:
    """Rewrite table ``name``'s files (see the module docstring) in one commit; redo it if an input went meanwhile.

    Every argument is checked before anything is written.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: ``target_file_bytes`` below 1024, an unknown ``strategy``, ``sort_order``
            missing for ``sort`` or given for ``binpack``, a bad ``sort_order`` or ``where``,
            or a table that is not a native parquet table.
        NoSuchTableError: no such table.
        RetryableConflictError: concurrent commits removed an input on every attempt.
    """
    if isinstance(target_file_bytes, bool) or not isinstance(target_file_bytes, int):
        raise TypeError(f"target_file_bytes must be an int, not {type(target_file_bytes).__name__}")
    if target_file_bytes < 1024:
        raise ValueError(f"target_file_bytes must be at least 1024, got {target_file_bytes}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if strategy == "sort" and sort_order is None:
        raise ValueError("strategy 'sort' needs sort_order, e.g. 'day, id DESC'")
    if strategy == "binpack" and sort_order is not None:
        raise ValueError("sort_order goes with strategy 'sort' only")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")
    attempt = 0
    while True:
        attempt += 1
        ctx.store.refresh()
        table = LakeTree(LiveHost(ctx)).load_table(name)
        if table.format != "parquet":
            raise ValueError(f"rewrite_data_files: {table.name!r} is an {table.format} table; only native tables are rewritten here")
        order = parse_sort_order(sort_order, table.schema) if sort_order is not None else []
        if where is not None:
            check_where(where, table.schema)
        try:
            report = _attempt(ctx, table, where, target_file_bytes, strategy, order)
        except RetryableConflictError:
            if attempt > retries:
                raise
            continue
        report.attempts = attempt
        return report
