"""Which data files a filter needs: pruning by the statistics the catalog keeps per file.

Every data file entry records, per column, its min, max and null count
(:mod:`catalog.datafiles`). :func:`prune` keeps the files whose statistics
say they may hold a matching row, :func:`whole_matches` finds those whose
statistics prove every row matches (a delete can drop them unread), and
:func:`matches` evaluates the filter on rows that were read. The statistics
arrays of recent plans are cached, so planning the same table again costs
no JSON decoding.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from catalog.datafiles import DataFile, decode_values, has_stats
from catalog.predicates import ColumnBounds, from_expression, may_match, must_match
from catalog.schema import field_id


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
