"""Rollback of one table to an earlier lakehouse version, as a NEW commit (history is never rewritten).

``lake.rollback_table("ns.t", version=12)`` makes the table hold again
exactly the rows and schema it had at lakehouse version 12; the versions in
between stay in ``lake.history()`` and stay readable with ``lake.at()``, and
the rollback itself is one more version (a ``replace`` of files, with the
schema change if the schema differs). Rolling back a rollback works alike.

Files: a file live both then and now stays as it is; a file live now but not
then is removed (as any rewrite removes one: GC deletes it once its removal
is past retention); a file live then but removed since is **copied** to a
new path (bytes checked against its checksum on the way). Re-adding the old
path instead would leave the removal record that lets GC delete it under the
table's feet, since GC deletes removed files by path.

Schema: columns added since are dropped again, renamed ones get their old
name and comments come back; a column dropped since, or whose type was
widened since, cannot be restored by a schema change (a column keeps its
field id only while it lives), so such a rollback is refused with a
``ValueError`` naming the column, before anything is written. Table
properties and the table's name are left as they are.

The commit is a read-modify-write (``read_files``): if another commit
changed the table's files between the plan and the commit, the rollback is
planned again on the new version (up to ``retries`` times), so a concurrent
append is never silently kept or dropped by a rollback planned without it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from catalog import timetravel
from catalog.context import LakeContext
from catalog.datafiles import DataFile, new_file_id, read_body
from catalog.errors import RetryableConflictError
from catalog.schema import COMMENT, field_id
from catalog.table import Table
from catalog.transactions import LiveHost, OpenTransaction
from catalog.tree import LakeTree

DEFAULT_RETRIES: Final = 3


@dataclass
class RollbackReport:
    """What :func:`rollback_table` committed: ``version`` is the new version (None: the table already was in that state)."""

    table: str
    target_version: int
    version: int | None = None
    files_kept: int = 0
    files_restored: int = 0  # copied back: live at the target, removed since
    files_removed: int = 0  # live now, not at the target
    schema_changed: bool = False


def _comment(f: pa.Field) -> bytes | None:
    return (f.metadata or {}).get(COMMENT)


def _schema_steps(name: str, then: pa.Schema, now: pa.Schema) -> list[tuple[str, tuple[object, ...]]]:
    """The schema changes that turn ``now`` back into ``then`` (matched by field id).

    Raises:
        ValueError: a column of ``then`` was dropped since, or its type changed.
    """
    then_ids = {field_id(f): f for f in then}
    now_ids = {field_id(f): f for f in now}
    steps: list[tuple[str, tuple[object, ...]]] = []
    for fid, f in now_ids.items():
        if fid not in then_ids:
            steps.append(("drop_column", (f.name,)))
    for fid, old in then_ids.items():
        cur = now_ids.get(fid)
        if cur is None:
            raise ValueError(
                f"cannot roll {name!r} back: its column {old.name!r} was dropped since, and a dropped column "
                "cannot come back with its data; read the old version with lake.at() (or VERSION AS OF) instead"
            )
        if cur.type != old.type:
            raise ValueError(
                f"cannot roll {name!r} back: its column {old.name!r} was changed from {old.type} to {cur.type} since, "
                "and a column type is never narrowed"
            )
    for fid, old in then_ids.items():
        cur = now_ids[fid]
        if cur.name != old.name:
            steps.append(("rename_column", (cur.name, old.name)))
        if _comment(cur) != _comment(old):
            comment = _comment(old)
            steps.append(("set_comment", (old.name, None if comment is None else comment.decode())))
    return steps


def _copy(ctx: LakeContext, table: Table, entry: DataFile) -> DataFile:
    """``entry``'s file copied (checked) to a new path of ``table``: the same bytes, so the same entry otherwise."""
    body = read_body(ctx.objects, entry, table.name)
    fid = new_file_id()
    path = f"{table.location}/{fid}.parquet"
    ctx.objects.put(path, body)
    return dataclasses.replace(entry, id=fid, path=path)


def _attempt(ctx: LakeContext, name: str, version: int | None, timestamp: float | None) -> RollbackReport:
    with timetravel.at(ctx, version, timestamp) as past:
        target = int(past.version)
        then = past.load_table(name)
        then_schema, then_files = then.schema, then.files()
        then_id = then.id
    report = RollbackReport(name, target)
    tx = OpenTransaction(ctx, "serializable")
    try:
        table = LakeTree(tx).load_table(name)
        report.table = table.name
        if table.id != then_id:
            raise ValueError(
                f"cannot roll {name!r} back to version {target}: that name was another table then "
                "(dropped and created again since)"
            )
        if table.format != "parquet":
            raise ValueError(f"cannot roll {name!r} back: it is an {table.format} table; only native tables roll back here")
        steps = _schema_steps(table.name, then_schema, table.schema)
        now_files = table.files()
        now_ids = {f.id for f in now_files}
        then_ids = {f.id for f in then_files}
        removed = [f for f in now_files if f.id not in then_ids]
        missing = [f for f in then_files if f.id not in now_ids]
        report.files_kept = len(then_ids & now_ids)
        if not steps and not removed and not missing:
            tx.rollback()
            return report
        if steps:
            change = table.update_schema()
            for step, args in steps:
                getattr(change, step)(*args)
            change.commit()
            table = LakeTree(tx).load_table(name)
            report.schema_changed = True
        restored = [_copy(ctx, table, f) for f in missing]
        table.commit_files(restored, mode="replace", replaced=removed, read_files=now_files)
        report.files_restored, report.files_removed = len(restored), len(removed)
        report.version = tx.commit()
    except BaseException:
        if tx.state == "active":
            tx.rollback()
        raise
    return report


def rollback_table(
    ctx: LakeContext,
    name: str,
    version: int | None = None,
    timestamp: float | None = None,
    retries: int = DEFAULT_RETRIES,
) -> RollbackReport:
    """Commit table ``name`` back to its state at lakehouse ``version`` or storage time ``timestamp`` (exactly one).

    See the module docstring.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: neither or both of ``version`` and ``timestamp``; the name was another
            table then; a column that cannot be restored; not a native table.
        NoSuchTableError: no such table now, or none of that name then.
        SnapshotTooOldError: the version or time is past the lakehouse's retention.
        RetryableConflictError: concurrent commits changed the table's files on every attempt.
    """
    if (version is None) == (timestamp is None):
        raise ValueError("give exactly one of version and timestamp to roll back to")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise TypeError(f"version must be an int, not {type(version).__name__}")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, (int, float))):
        raise TypeError(f"timestamp must be seconds since the epoch (a number), not {type(timestamp).__name__}")
    attempt = 0
    while True:
        attempt += 1
        ctx.store.refresh()
        try:
            return _attempt(ctx, name, version, timestamp)
        except RetryableConflictError:
            if attempt > retries:
                raise
