"""What changed in one table between two lakehouse versions: its changelog and its appended rows.

A range is ``(start, end]``, as Iceberg's ``start-snapshot-id`` (exclusive)
and ``end-snapshot-id`` (inclusive): the changes made by the commits after
version ``start`` up to and including version ``end``. The table is the one
named ``table`` at ``end`` (by its id, so a rename inside the range is no
break); at ``start`` it may not exist yet (then it starts empty).

The commits that touched the table are found in the lakehouse's history
(every data op records its table id), and each one's change is the
difference of the table's live files before and after it. Copy-on-write
makes that difference coarse: an UPDATE of one row replaces a whole file
whose other rows are unchanged. So the rows of the removed and of the added
files are compared as multisets: a row in both is a carried-over row, not a
change (Iceberg's changelog view drops these "carry-over" rows likewise). A
row deleted and the same row inserted by one commit therefore cancel out:
the changelog shows each commit's net change.

Changelog rows carry ``_change_type`` (``insert``, ``delete``,
``update_preimage``, ``update_postimage``), ``_commit_version`` and
``_commit_timestamp`` (the commit's storage time), as Delta's change data
feed. Updates need identifier columns (as Iceberg's changelog view): a
commit's delete and insert with the same identifier values are its update's
pre- and post-image, when that identifier is deleted once and inserted once
in it; without identifier columns (or for an identifier seen more often),
an update is a delete and an insert. Rows are shown in the table's schema
at ``end``.

The appended rows (:func:`appended_files`) are those of the commits that
only added files; a commit that removed files but changed no row (a
compaction, or a rewrite that changed nothing) adds nothing; any other
commit in the range (a DELETE, UPDATE, MERGE or overwrite) is refused with
:class:`NonAppendVersionError` naming it, unless ``skip`` names its kind,
because its rows are not "appended" (Iceberg refuses overwrites in an
incremental append scan too).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import pyarrow as pa

from catalog import retention
from catalog.datafiles import DataFile, read_file
from catalog.errors import NonAppendVersionError

if TYPE_CHECKING:
    from catalog.context import LakeContext
    from catalog.timetravel import PastLakehouse


class LakeHandle(Protocol):
    """What this module needs of a lakehouse (:class:`catalog.Lakehouse` is one): it never imports the facade."""

    context: LakeContext

    def refresh(self) -> int:
        """Catch up with the store; return the latest version."""

    def at(self, version: int | None = None, timestamp: float | None = None) -> PastLakehouse:
        """The lakehouse as of a version."""

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "NonAppendVersionError",
    "TableVersion",
    "appended",
    "appended_files",
    "table_changes",
    "table_versions",
    "touching_versions",
]

CHANGE_TYPE: Final = "_change_type"
COMMIT_VERSION: Final = "_commit_version"
COMMIT_TIMESTAMP: Final = "_commit_timestamp"
INSERT: Final = "insert"
DELETE: Final = "delete"
UPDATE_PREIMAGE: Final = "update_preimage"
UPDATE_POSTIMAGE: Final = "update_postimage"
# How a non-append commit is classified for ``skip``: only deletes, or anything else that changed rows.
DELETES: Final = "delete"
OVERWRITES: Final = "overwrite"
# Op kinds that never change a row: their versions add nothing to an append read and no changelog row.
_ROW_PRESERVING: Final = frozenset({"compact"})
_HISTORY_PAGE: Final = 256


@dataclass(frozen=True)
class TableVersion:
    """One commit that touched a table's data files: the files it added and removed."""

    version: int
    timestamp: float
    op_kinds: tuple[str, ...]
    added: tuple[DataFile, ...]
    removed: tuple[DataFile, ...]


def _check_range(lake: LakeHandle, start: object, end: object) -> tuple[int, int]:
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a lakehouse version (int), not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{name} must be a lakehouse version >= 0, got {value}")
    assert isinstance(start, int) and isinstance(end, int)
    if start > end:
        raise ValueError(f"start version {start} is after end version {end}: a range is (start, end]")
    latest = lake.refresh()
    if end > latest:
        raise ValueError(f"end version {end} is not committed yet (the latest lakehouse version is {latest})")
    retention.check_readable(lake.context.store, start)
    return start, end


def _touching(lake: LakeHandle, table_id: str, start: int, end: int) -> list[tuple[int, float, tuple[str, ...]]]:
    """The versions in ``(start, end]`` whose ops name ``table_id``, oldest first, with their time and op kinds."""
    found: list[tuple[int, float, tuple[str, ...]]] = []
    cursor = end
    while cursor > start:
        infos = lake.context.store.history(limit=_HISTORY_PAGE, start=cursor)
        if not infos:
            break
        for info in infos:
            if info.version <= start:
                break
            kinds = tuple(
                str(op.get("kind"))
                for commit in info.commits
                for op in ((commit.get("summary") or {}).get("ops") or [])
                if op.get("table_id") == table_id
            )
            if kinds:
                found.append((info.version, info.timestamp, kinds))
        cursor = infos[-1].version - 1
    found.reverse()
    return found


def _live(lake: LakeHandle, table_id: str, version: int) -> dict[str, DataFile]:
    with lake.at(version=version) as past, past.reading() as reader:
        if reader.table_def(table_id) is None:
            return {}
        return {f.id: f for f in reader.live_files(table_id)}


def _resolve(lake: LakeHandle, table: object, end: int) -> tuple[str, pa.Schema, str]:
    if not isinstance(table, str):
        raise TypeError(f"table must be a table name (str), not {type(table).__name__}")
    with lake.at(version=end) as past:
        loaded = past.load_table(table)
        if loaded.format != "parquet":
            raise ValueError(f"table {table!r} has format {loaded.format!r}: changes are read from native tables only")
        return loaded.id, loaded.schema, loaded.name


def table_versions(lake: LakeHandle, table: str, start: int, end: int) -> list[TableVersion]:
    """The commits in ``(start, end]`` that touched table ``table`` (named at ``end``), oldest first.

    Raises:
        TypeError: ``table`` is not a str, or ``start``/``end`` not ints.
        ValueError: ``start > end``, ``end`` is not committed, or the table is not native.
        NoSuchTableError: no table ``table`` at version ``end``.
        SnapshotTooOldError: ``start`` is below the lakehouse's retention floor.
    """
    start, end = _check_range(lake, start, end)
    table_id, _, _ = _resolve(lake, table, end)
    return _versions(lake, table_id, start, end)


def touching_versions(lake: LakeHandle, table: str, start: int, end: int) -> list[int]:
    """The versions in ``(start, end]`` whose commits name table ``table`` (at ``end``), oldest first.

    Read from the history alone (no snapshot is opened): what a stream polls.
    A version that only changed the table's properties or schema is listed too.

    Raises:
        TypeError, ValueError, NoSuchTableError, SnapshotTooOldError: as :func:`table_versions`.
    """
    start, end = _check_range(lake, start, end)
    table_id, _, _ = _resolve(lake, table, end)
    return [version for version, _, _ in _touching(lake, table_id, start, end)]


def _versions(lake: LakeHandle, table_id: str, start: int, end: int) -> list[TableVersion]:
    out = []
    before = _live(lake, table_id, start)
    for version, timestamp, kinds in _touching(lake, table_id, start, end):
        after = _live(lake, table_id, version)
        added = tuple(f for i, f in after.items() if i not in before)
        removed = tuple(f for i, f in before.items() if i not in after)
        if added or removed:
            out.append(TableVersion(version, timestamp, kinds, added, removed))
        before = after
    return out


# -- comparing rows -------------------------------------------------------------------


def _hashable(value: Any) -> Any:
    """A value as a hashable key equal exactly when the values are (NaN equals NaN, -0.0 is not 0.0)."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("f", value.hex())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, tuple):  # a map's (key, value) pairs
        return tuple(_hashable(v) for v in value)
    return value


def _rows(data: pa.Table) -> list[tuple[Any, ...]]:
    columns = [data.column(i).to_pylist() for i in range(data.num_columns)]
    return [tuple(_hashable(c[r]) for c in columns) for r in range(data.num_rows)]


def _read(lake: LakeHandle, files: Sequence[DataFile], schema: pa.Schema, name: str) -> pa.Table:
    if not files:
        return schema.empty_table()
    return pa.concat_tables([read_file(lake.context.objects, f, schema, table=name) for f in files])


def _net_change(lake: LakeHandle, v: TableVersion, schema: pa.Schema, name: str) -> tuple[pa.Table, pa.Table]:
    """The rows version ``v`` deleted and those it inserted, without the rows its rewrites carried over."""
    removed = _read(lake, v.removed, schema, name)
    added = _read(lake, v.added, schema, name)
    if not v.removed:
        return removed, added
    left = Counter(_rows(removed))
    kept_added = []
    for i, row in enumerate(_rows(added)):
        if left[row] > 0:
            left[row] -= 1  # carried over: in a removed file and again in an added one
        else:
            kept_added.append(i)
    kept_removed = []
    for i, row in enumerate(_rows(removed)):
        if left[row] > 0:
            left[row] -= 1
            kept_removed.append(i)
    return _take(removed, kept_removed), _take(added, kept_added)


def _take(data: pa.Table, rows: list[int]) -> pa.Table:
    return data.take(pa.array(rows, pa.int64()))


def _with_meta(data: pa.Table, change: str, version: int, timestamp: float) -> pa.Table:
    n = data.num_rows
    ts = pa.array([int(timestamp * 1_000_000)] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return (
        data.append_column(CHANGE_TYPE, pa.array([change] * n, pa.string()))
        .append_column(COMMIT_VERSION, pa.array([version] * n, pa.int64()))
        .append_column(COMMIT_TIMESTAMP, ts)
    )


def changelog_schema(schema: pa.Schema) -> pa.Schema:
    """The changelog's schema: the table's columns, then ``_change_type``, ``_commit_version``, ``_commit_timestamp``."""
    return (
        schema.append(pa.field(CHANGE_TYPE, pa.string(), nullable=False))
        .append(pa.field(COMMIT_VERSION, pa.int64(), nullable=False))
        .append(pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False))
    )


def table_changes(
    lake: LakeHandle, table: str, start: int, end: int, identifier_columns: Sequence[str] | None = None
) -> pa.Table:
    """The changelog of ``table`` over ``(start, end]`` (see the module docstring), ordered by version.

    Within a version: deletes, inserts, then each update's pre-image followed by its post-image.

    Args:
        lake: the lakehouse.
        table: the table's name at version ``end``.
        start: the version whose state the changes start from (exclusive).
        end: the last version whose changes are included (inclusive).
        identifier_columns: columns that identify a row across an update; None or
            empty reports updates as a delete and an insert.

    Raises:
        TypeError: a wrong argument type.
        ValueError: ``start > end``, ``end`` not committed, a non-native table, or an
            identifier column the table does not have.
        NoSuchTableError: no table ``table`` at ``end``.
        SnapshotTooOldError: ``start`` is below the retention floor.
    """
    start, end = _check_range(lake, start, end)
    table_id, schema, name = _resolve(lake, table, end)
    ids = _identifier_columns(identifier_columns, schema)
    pieces = [_with_meta(schema.empty_table(), INSERT, 0, 0.0)]
    for v in _versions(lake, table_id, start, end):
        if set(v.op_kinds) <= _ROW_PRESERVING:
            continue
        deleted, inserted = _net_change(lake, v, schema, name)
        pieces.extend(_version_pieces(deleted, inserted, ids, v))
    out = pa.concat_tables(pieces)
    return out.cast(changelog_schema(schema))


def _identifier_columns(identifier_columns: object, schema: pa.Schema) -> list[str]:
    if identifier_columns is None:
        return []
    if isinstance(identifier_columns, str) or not all(isinstance(c, str) for c in identifier_columns):  # type: ignore[attr-defined]
        raise TypeError("identifier_columns must be a list of column names")
    columns: list[str] = list(identifier_columns)  # type: ignore[call-overload]
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise ValueError(f"identifier column {missing[0]!r} is not a column of the table ({', '.join(schema.names)})")
    return columns


def _version_pieces(deleted: pa.Table, inserted: pa.Table, ids: list[str], v: TableVersion) -> Iterator[pa.Table]:
    if not ids or not deleted.num_rows or not inserted.num_rows:
        yield _with_meta(deleted, DELETE, v.version, v.timestamp)
        yield _with_meta(inserted, INSERT, v.version, v.timestamp)
        return
    del_keys = _rows(deleted.select(ids))
    ins_keys = _rows(inserted.select(ids))
    del_count, ins_count = Counter(del_keys), Counter(ins_keys)
    paired = {k for k in del_count if del_count[k] == 1 and ins_count.get(k) == 1}
    ins_at = {k: i for i, k in enumerate(ins_keys) if k in paired}
    pre = [i for i, k in enumerate(del_keys) if k in paired]
    post = [ins_at[del_keys[i]] for i in pre]
    yield _with_meta(_take(deleted, [i for i, k in enumerate(del_keys) if k not in paired]), DELETE, v.version, v.timestamp)
    yield _with_meta(_take(inserted, [i for i, k in enumerate(ins_keys) if k not in paired]), INSERT, v.version, v.timestamp)
    if pre:
        # Interleaved: each pre-image directly followed by its post-image.
        images = pa.concat_tables([
            _with_meta(_take(deleted, pre), UPDATE_PREIMAGE, v.version, v.timestamp),
            _with_meta(_take(inserted, post), UPDATE_POSTIMAGE, v.version, v.timestamp),
        ])
        order = [j for i in range(len(pre)) for j in (i, len(pre) + i)]
        yield _take(images, order)


# -- appended rows ----------------------------------------------------------------------


def appended_files(
    lake: LakeHandle, table: str, start: int, end: int, skip: Sequence[str] = ()
) -> tuple[str, list[tuple[int, list[DataFile]]]]:
    """The table's id and the data files appended in ``(start, end]``, per version, oldest first.

    A version that removed files is read: if it changed no row (a compaction)
    it adds nothing; if it only deleted rows it is a ``"delete"``, otherwise an
    ``"overwrite"``, refused unless ``skip`` holds that kind (then the whole
    version is skipped, its inserted rows too, as Iceberg's streaming
    ``skip-overwrite-snapshots`` does).

    Raises:
        NonAppendVersionError: a version deleted or changed rows and ``skip`` does not
            hold its kind; its message names the version and its operations.
        TypeError, ValueError, NoSuchTableError, SnapshotTooOldError: as :func:`table_changes`.
    """
    start, end = _check_range(lake, start, end)
    for kind in skip:
        if kind not in (DELETES, OVERWRITES):
            raise ValueError(f"skip takes {DELETES!r} and {OVERWRITES!r}, not {kind!r}")
    table_id, schema, name = _resolve(lake, table, end)
    out: list[tuple[int, list[DataFile]]] = []
    for v in _versions(lake, table_id, start, end):
        if not v.removed:
            out.append((v.version, list(v.added)))
            continue
        if set(v.op_kinds) <= _ROW_PRESERVING:
            continue
        deleted, inserted = _net_change(lake, v, schema, name)
        if not deleted.num_rows and not inserted.num_rows:
            continue
        kind = DELETES if not inserted.num_rows else OVERWRITES
        if kind in skip:
            continue
        raise NonAppendVersionError(
            f"lakehouse version {v.version} ({', '.join(v.op_kinds)}) {'deleted' if kind == DELETES else 'changed'} "
            f"rows of table {name!r}, so the rows of ({start}, {end}] are not only appended ones: read the changes "
            f"with table_changes, or read a range without version {v.version}",
            version=v.version,
            kind=kind,
        )
    return table_id, out


def appended(lake: LakeHandle, table: str, start: int, end: int, skip: Sequence[str] = ()) -> pa.Table:
    """The rows appended to ``table`` in ``(start, end]`` (see :func:`appended_files`), in the table's schema at ``end``."""
    _, per_version = appended_files(lake, table, start, end, skip)
    with lake.at(version=end) as past:
        loaded = past.load_table(table)
        schema, name = loaded.schema, loaded.name
    return _read(lake, [f for _, files in per_version for f in files], schema, name)


# -- rows as Spark's JSON reader takes them ----------------------------------------------


def json_value(value: Any) -> Any:
    """One Arrow value (as ``to_pylist`` gives it) in the JSON form Spark's JSON reader parses back to it."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat()
        return value.astimezone(dt.timezone.utc).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def json_rows(data: pa.Table) -> list[dict[str, Any]]:
    """``data``'s rows as JSON objects (see :func:`json_value`)."""
    grouped: dict[str, list[Any]] = defaultdict(list)
    for name in data.column_names:
        grouped[name] = data.column(name).to_pylist()
    return [{name: json_value(grouped[name][r]) for name in data.column_names} for r in range(data.num_rows)]
