"""Which data files a filter needs: pruning by the statistics the catalog keeps per file.

Every data file entry records, per column, its min, max and null count
(:mod:`catalog.datafiles`). :func:`prune` keeps the files whose statistics
say they may hold a matching row, :func:`whole_matches` finds those whose
statistics prove every row matches (a delete can drop them unread), and
:func:`matches` evaluates the filter on rows that were read. The statistics
arrays of recent plans are cached, so planning the same table again costs
no JSON decoding.

:func:`plan_files` is the plan itself: on a table with a planning index
(:mod:`catalog.file_index`) a filter reads only the partitions it fixes, or
only the groups whose summaries may match, then prunes their files as
above; the answer is the same list of files the linear plan gives
(tests/catalog/test_planning.py checks it against random tables).
:func:`plan_table` is the same plan in columns (:mod:`catalog.file_columns`):
for a caller that takes every file, without a ``DataFile`` per file. With
no filter it reads the file groups' packs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Final

import pyarrow as pa
import pyarrow.compute as pc

from catalog import file_columns, file_index, keys
from catalog.access import FILE_CACHE, CatalogReader
from catalog.datafiles import DataFile, decode_values, encode_value, has_stats
from catalog.predicates import And, ColumnBounds, Compare, IsIn, IsNull, Pred, from_expression, may_match, must_match
from catalog.schema import field_id

# A filter fixing the partition columns to more value combinations than this
# is planned through the group summaries instead (one prefix read per combination).
_MAX_PARTITIONS: Final = 256


class _BoundsCache:
    """Statistics arrays of recent plans, keyed by (column, type, the exact file ids).

    Building them decodes one JSON value per file and column; planning the
    same table again (the common case: nothing or little changed) reuses them.
    """

    def __init__(self, entries: int = 64) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[Any, ...], ColumnBounds | None] = OrderedDict()
        self._entries = entries

    def get(self, key: tuple[Any, ...], build: Callable[[], ColumnBounds | None]) -> ColumnBounds | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._entries:
                self._items.popitem(last=False)
        return value


_BOUNDS = _BoundsCache()


def bounds_for(files: list[DataFile], schema: pa.Schema) -> Any:
    """A ``column -> ColumnBounds`` function over ``files`` for :func:`may_match`."""
    fields = {f.name: f for f in schema}
    ids: tuple[str, ...] | None = None

    def build(f: pa.Field) -> ColumnBounds | None:
        if not has_stats(f.type):
            return None
        fid = str(field_id(f))
        stats = [e.stats.get(fid) for e in files]
        try:
            return ColumnBounds(
                mins=decode_values([None if s is None else s[0] for s in stats], f.type),
                maxs=decode_values([None if s is None else s[1] for s in stats], f.type),
                nulls=pa.array([None if s is None else s[2] for s in stats], pa.int64()),
                rows=pa.array([e.rows for e in files], pa.int64()),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
            return None  # statistics of an older type: prune nothing on this column

    def bounds(column: str) -> ColumnBounds | None:
        nonlocal ids
        f = fields.get(column)
        if f is None:
            return None
        if ids is None:
            ids = tuple(e.id for e in files)
        return _BOUNDS.get((field_id(f), str(f.type), ids), lambda: build(f))

    return bounds


def prune(files: list[DataFile], schema: pa.Schema, expr: pc.Expression | None) -> list[DataFile]:
    """The files that may hold rows matching ``expr`` (all of them for None)."""
    if expr is None or not files:
        return files
    mask = may_match(from_expression(expr), len(files), bounds_for(files, schema))
    return [f for f, keep in zip(files, mask.to_pylist()) if keep]


def whole_matches(files: list[DataFile], schema: pa.Schema, expr: pc.Expression) -> list[bool]:
    """Per file: True when its statistics prove every row matches ``expr`` (it can go without a read)."""
    if not files:
        return []
    return must_match(from_expression(expr), len(files), bounds_for(files, schema)).to_pylist()  # type: ignore[no-any-return]


def matches(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    """True where a row matches ``expr`` (null counts as no match, as in a filter)."""
    import pyarrow.dataset as ds

    mask = ds.dataset(table).to_table(columns={"m": expr}).column("m")
    return pc.fill_null(mask, False)


def plan_files(
    reader: CatalogReader, table_id: str, schema: pa.Schema, partition_by: list[str], expr: pc.Expression | None
) -> list[DataFile]:
    """The live files of the table a scan with ``expr`` reads, in file-key order.

    With no filter, or on a table without a planning index, or where the
    reader records what it reads (a multi-table transaction, whose reads
    must cover every file), every entry is read and pruned. Otherwise only
    the index keys that can match are read (see :mod:`catalog.file_index`).
    """
    if expr is None or reader.recorded is not None or not file_index.indexed(reader.kv, table_id):
        return prune(reader.live_files(table_id), schema, expr)
    pred = from_expression(expr)
    tokens = _partition_tokens(pred, schema, partition_by)
    if tokens is not None:
        fids = [
            key.rsplit(b"/", 1)[1]
            for token in sorted(tokens)
            for key, _ in reader.kv.scan(prefix=keys.partition_index(table_id, token))
        ]
    else:
        fids = [
            key.rsplit(b"/", 1)[1]
            for group in _matching_groups(reader, table_id, schema, pred)
            for key, _ in reader.kv.scan(prefix=keys.group_files(table_id, group))
        ]
    fids.sort()  # file-key order, as the linear plan lists them
    return prune(_entries(reader, table_id, fids), schema, expr)


def plan_table(
    reader: CatalogReader, table_id: str, schema: pa.Schema, partition_by: list[str], expr: pc.Expression | None
) -> pa.Table:
    """The files :func:`plan_files` gives, as a plan table (:data:`catalog.file_columns.SCHEMA`), in no set order.

    With no filter, on a table whose groups are all packed (layout
    :data:`~catalog.file_index.PACKED`) and a reader that does not record
    its reads, this is :func:`catalog.file_index.live_table`: the groups'
    summaries and packs, no per-file object. Otherwise it is
    :func:`plan_files` in columns.
    """
    if expr is None and reader.recorded is None and file_index.layout(reader.kv, table_id) >= file_index.PACKED:
        return file_index.live_table(reader.kv, table_id)
    return file_columns.from_entries(plan_files(reader, table_id, schema, partition_by, expr))


def _entries(reader: CatalogReader, table_id: str, fids: list[bytes]) -> list[DataFile]:
    """The entries of live files ``fids`` (their index keys at this view prove them live)."""
    prefix = keys.table_files(table_id)
    cached = FILE_CACHE.entries.get
    out = []
    for fid in fids:
        key = prefix + fid
        entry = cached(key)
        if entry is None:
            raw = reader.kv.get(key)
            if raw is None:
                continue  # not live after all: an index key without its file would be a bug, never a file
            entry = FILE_CACHE.get(key, raw)
        out.append(entry)
    return out


def _partition_tokens(pred: Pred, schema: pa.Schema, partition_by: list[str]) -> set[str] | None:
    """The tokens of every partition ``pred`` can match, or None when it does not fix every partition column."""
    if not partition_by:
        return None
    conjuncts = list(pred.children) if isinstance(pred, And) else [pred]
    choices: dict[str, list[Any]] = {}
    for name in partition_by:
        f = schema.field(name) if name in schema.names else None
        if f is None:
            return None
        values = None
        for c in conjuncts:
            found = _fixed_values(c, f)
            if found is not None:
                values = found if values is None else [v for v in values if v in found]
        if values is None:
            return None
        choices[str(field_id(f))] = values
    combos: list[dict[str, Any]] = [{}]
    for fid, values in choices.items():
        combos = [{**combo, fid: v} for combo in combos for v in values]
        if len(combos) > _MAX_PARTITIONS:
            return None
    return {file_index.partition_token(combo) for combo in combos}


def _fixed_values(pred: Pred, f: pa.Field) -> list[Any] | None:
    """The encoded values ``pred`` allows column ``f``, if it is ``f == v``, ``f IN (...)`` or ``f IS NULL``; else None."""
    try:
        if isinstance(pred, Compare) and pred.column == f.name and pred.op == "==":
            if not pred.value.is_valid:
                return []  # x = NULL matches no row
            return [encode_value(pred.value.cast(f.type))]
        if isinstance(pred, IsIn) and pred.column == f.name:
            values = pred.values.drop_null().cast(f.type)
            return list(dict.fromkeys(encode_value(v) for v in values))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, ValueError):
        return None  # a value the column cannot hold exactly: let the statistics decide
    if isinstance(pred, IsNull) and pred.column == f.name:
        return [None]
    return None


def _matching_groups(reader: CatalogReader, table_id: str, schema: pa.Schema, pred: Pred) -> list[str]:
    """The ids of the table's groups whose summaries say they may hold rows matching ``pred``."""
    prefix = keys.file_groups(table_id)
    groups: list[str] = []
    summaries: list[dict[str, Any]] = []
    for key, raw in reader.kv.scan(prefix=prefix):
        groups.append(key[len(prefix) :].decode())
        summaries.append(file_index.decode_summary(raw))
    if not groups:
        return []
    fields = {f.name: f for f in schema}
    rows = pa.array([s["rows"] for s in summaries], pa.int64())

    def bounds(column: str) -> ColumnBounds | None:
        f = fields.get(column)
        if f is None or not has_stats(f.type):
            return None
        fid = str(field_id(f))
        stats = [s["stats"].get(fid) for s in summaries]
        try:
            return ColumnBounds(
                mins=decode_values([None if s is None else s[0] for s in stats], f.type),
                maxs=decode_values([None if s is None else s[1] for s in stats], f.type),
                nulls=pa.array([None if s is None else s[2] for s in stats], pa.int64()),
                rows=rows,
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
            return None

    mask = may_match(pred, len(groups), bounds)
    return [g for g, keep in zip(groups, mask.to_pylist()) if keep]
