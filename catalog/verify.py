"""``lake.verify()``: the catalog's store and every data file any retained version reads.

The retained versions are those ``lake.history()`` lists: from the
lakehouse's data floor (:mod:`catalog.retention`; the version GC recorded
before deleting files, or the engine's own floor if this handle can no longer
read that version) up to the head. Their files are the files live at the
floor, plus those live at the head, plus those removed in between: a removal
leaves a ``gone`` record (path, size, CRC32C) until GC has deleted the file,
which it does only once the removal is at or below the recorded floor. So three reads cover every retained version however many there are,
and each file is checked once: it exists, has its entry's size and CRC32C
(entries from before checksums: size, then a full Parquet decode with page
checksums), and every problem is reported, not just the first.

Files of a table dropped with ``purge=True`` are exempt from "missing": GC
deletes them at once by design.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from catalog import keys, retention
from catalog.access import CatalogReader
from catalog.context import LakeContext
from catalog.datafiles import DataFile, check_body
from catalog.errors import CorruptDataFileError
from catalog.names import join
from catalog.records import TABLE
from kvstore.errors import SnapshotTooOldError
from kvstore.snapshot import Snapshot

if TYPE_CHECKING:
    from kvstore.verify import VerifyReport


@dataclass(frozen=True)
class DataFileProblem:
    """One bad data file: where it is, whose it is, what is wrong."""

    path: str
    table: str | None
    problem: str

    def __str__(self) -> str:
        owner = "" if self.table is None else f" (table {self.table})"
        return f"{self.path}{owner}: {self.problem}"


@dataclass
class LakeVerifyReport:
    """The outcome of :meth:`catalog.Lakehouse.verify`.

    Attributes:
        store: the catalog store's own report (root files, trees, SSTs).
        floor_version, head_version: the retained versions checked.
        files_checked, bytes_checked: data files read and checked.
        unchecksummed: files whose entries carry no CRC32C (written before
            checksums): checked by size and a full Parquet decode instead.
        problems: one per bad data file; empty when healthy.
    """

    store: VerifyReport
    floor_version: int
    head_version: int
    files_checked: int = 0
    bytes_checked: int = 0
    unchecksummed: int = 0
    problems: list[DataFileProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the store checked out and no data file has a problem."""
        return self.store.ok and not self.problems


def verify(ctx: LakeContext, table: str | None = None) -> LakeVerifyReport:
    """Check the lakehouse of ``ctx``: see the module docstring.

    With ``table`` (a table's current name), only the data files of that
    table (as it is named at the floor or the head) are read; the store is checked whole.

    Raises:
        ObjectStoreError: the storage failed (a bad file is a problem in the report, not an error).
    """
    ctx.store.refresh()
    store_report = ctx.store.verify()
    head = ctx.store.version
    floor, wanted = _only(table, *_retained(ctx, head))
    report = LakeVerifyReport(store=store_report, floor_version=floor, head_version=head)
    for path in sorted(wanted):
        entry, table, purged = wanted[path]
        problem = _check(ctx, entry, table, purged, report)
        if problem is not None:
            report.problems.append(DataFileProblem(path, table, problem))
    if any(problem.problem == MISSING for problem in report.problems):
        # A GC may have raised the floor and deleted files while we read: what
        # it took is past retention now, not missing (GC records the floor first).
        ctx.store.refresh()
        if retention.floor(ctx.store) > floor:
            report.floor_version, still = _only(table, *_retained(ctx, head))
            report.problems = [p for p in report.problems if p.problem != MISSING or p.path in still]
    return report


MISSING = "missing: a retained version references it"


def _only(
    table: str | None, floor: int, wanted: dict[str, tuple[DataFile, str | None, bool]]
) -> tuple[int, dict[str, tuple[DataFile, str | None, bool]]]:
    if table is None:
        return floor, wanted
    return floor, {path: found for path, found in wanted.items() if found[1] == table}


def _retained(ctx: LakeContext, head: int) -> tuple[int, dict[str, tuple[DataFile, str | None, bool]]]:
    """``(floor, files)``: the oldest version the lakehouse still reads, and the data file of every version from it to ``head``.

    The floor is the lakehouse's data floor (what ``history()`` lists down
    to), or the engine's own floor if this handle can no longer read that
    version. Files: those live at the floor or at the head, and those
    removed after the floor (their removal records at the head that the
    floor does not show yet).
    """
    floor = min(retention.floor(ctx.store), head)
    try:
        at_floor = ctx.store.at(version=floor)
    except SnapshotTooOldError:
        floor = ctx.store.retention_floor().version
        at_floor = ctx.store.at(version=floor)
    wanted: dict[str, tuple[DataFile, str | None, bool]] = {}  # path -> (entry, table, purged)
    with at_floor, ctx.store.at(version=head) as at_head:
        _collect(CatalogReader(at_floor), wanted, removed_before=None)
        _collect(CatalogReader(at_head), wanted, removed_before=at_floor)
    return floor, wanted


def _collect(
    reader: CatalogReader, wanted: dict[str, tuple[DataFile, str | None, bool]], removed_before: Snapshot | None
) -> None:
    """Add the live files ``reader`` sees and, unless ``removed_before`` is None, its removal
    records that ``removed_before`` does not show (removals after that version)."""
    names = _table_names(reader)
    for key, raw in reader.kv.scan(prefix=keys.TBL):
        table_id = key[len(keys.TBL) :].split(b"/", 1)[0].decode()
        table = names.get(table_id)
        if b"/file/" in key:
            entry = DataFile.decode(raw)
            wanted.setdefault(entry.path, (entry, table, False))
        elif b"/gone/" in key and removed_before is not None and removed_before.get(key) is None:
            record: dict[str, Any] = json.loads(raw)
            crc = record.get("crc32c")
            removed = DataFile(
                id=key.rsplit(b"/", 1)[1].decode(),
                path=str(record["path"]),
                size=int(record.get("size", 0)),
                rows=0,
                crc32c=None if crc is None else int(crc),
            )
            entry, owner, purged = wanted.get(removed.path, (removed, table, False))
            wanted[removed.path] = (entry, owner or table, purged or bool(record.get("purge")))


def _table_names(reader: CatalogReader) -> dict[str, str]:
    names: dict[str, str] = {}
    for ns in [(), *reader.child_namespaces((), recursive=True)]:
        for name, pointer in reader.entries(ns):
            if pointer.kind == TABLE:
                names[pointer.id] = join((*ns, name))
    return names


def _check(ctx: LakeContext, entry: DataFile, table: str | None, purged: bool, report: LakeVerifyReport) -> str | None:
    try:
        body = ctx.objects.get(entry.path)
    except FileNotFoundError:
        return None if purged else MISSING
    report.files_checked += 1
    report.bytes_checked += len(body)
    try:
        check_body(entry, body, table)
        if entry.crc32c is None:
            report.unchecksummed += 1
            pq.read_table(pa.BufferReader(body), page_checksum_verification=True)
    except CorruptDataFileError as exc:
        return str(exc)
    except (pa.ArrowException, OSError, ValueError) as exc:
        return f"cannot be decoded as Parquet: {exc}"
    return None
