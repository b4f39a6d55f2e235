"""Lakehouse maintenance: data-file compaction, data-file GC and export.

GC is safe by construction: a data file is deleted only when

* it was removed by a commit at or before the lakehouse's retention floor
  (its ``gone`` record is already visible at the floor version, so no
  retained version or checkpoint can reach it), or it was dropped with
  ``purge``. The floor comes from the window recorded in the lakehouse,
  not from the GC process's own option, and GC commits it as the
  lakehouse's data floor before it deletes any such file
  (:mod:`catalog.retention`): a reader of an older version then gets
  ``SnapshotTooOldError``, never a missing file. A GC that cannot record
  the floor (a full disk) raises before it deletes any such file (orphans,
  deleted first, free what they can); or
* no key references it at all (an orphan: a failed writer's or aborted
  transaction's file) and it is older than the grace period on the storage's
  own clock, so an in-flight writer that has not committed yet keeps its
  files. Files that only something outside the catalog's keys references
  (the staged files of durable transactions) are kept too: GC asks
  :func:`catalog.durable.lake.staged_paths`.

Each function takes the :class:`~catalog.context.LakeContext` of the
lakehouse, not the :class:`~catalog.lakehouse.Lakehouse` facade, which calls
them. (History and time travel are :mod:`catalog.timetravel`.)
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Final, Iterator

import pyarrow as pa

from catalog import keys, retention
from catalog.access import CatalogReader
from catalog.context import LakeContext
from catalog.datafiles import DataFile, read_body, read_file, write_files
from catalog.durable.lake import staged_paths
from catalog.ops import Compact
from catalog.transactions import LiveHost, commit_ops
from catalog.tree import DATA_PREFIX, LakeTree
from kvstore.errors import CommitNotLandedError, NotWrittenError, ObjectStoreError, SnapshotTooOldError
from kvstore.objstore import LocalStore, TempFileStore

log = logging.getLogger(__name__)


def _progress(enabled: bool, label: str, done: int, total: int) -> None:
    if not enabled:
        return
    width = 30
    filled = width if total == 0 else int(width * done / total)
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# -- compaction ----------------------------------------------------------------------


@dataclass
class CompactionReport:
    table: str
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    version: int | None = None


def compact_table(ctx: LakeContext, name: str, target_file_bytes: int, progress: bool) -> CompactionReport:
    """Rewrite each partition's small files into files of about ``target_file_bytes``.

    One commit for the whole table ``name`` (as the live lakehouse holds it); it
    rebases over concurrent appends and becomes retryable if a concurrent
    delete or overwrite removed an input.

    Raises:
        ValueError: ``target_file_bytes`` is below 1024.
        RetryableConflictError: a concurrent commit removed an input file.
    """
    if isinstance(target_file_bytes, bool) or not isinstance(target_file_bytes, int) or target_file_bytes < 1024:
        raise ValueError(f"target_file_bytes must be an int >= 1024, got {target_file_bytes!r}")
    table = LakeTree(LiveHost(ctx)).load_table(name)
    report = CompactionReport(table.name)
    small = [f for f in table.files() if f.size < target_file_bytes * 3 // 4]
    by_partition: dict[str, list[DataFile]] = {}
    for f in small:
        by_partition.setdefault(json.dumps(f.partition, sort_keys=True), []).append(f)
    groups: list[list[DataFile]] = []
    for files in by_partition.values():
        files.sort(key=lambda f: f.id)
        current: list[DataFile] = []
        size = 0
        for f in files:
            if current and size + f.size > target_file_bytes:
                groups.append(current)
                current, size = [], 0
            current.append(f)
            size += f.size
        groups.append(current)
    groups = [g for g in groups if len(g) > 1]
    total = sum(len(g) for g in groups)
    removed: list[DataFile] = []
    added: list[DataFile] = []
    done = 0
    for group in groups:
        data = pa.concat_tables([read_file(ctx.objects, f, table.schema, table=table.name) for f in group])
        added.extend(write_files(ctx.objects, table.location, data, table.schema, table.partition_by, target_file_bytes))
        removed.extend(group)
        done += len(group)
        _progress(progress, f"compact {table.name}", done, total)
    if not removed:
        return report
    op = Compact(table=table.name, table_id=table.id, removed=removed, added=added, observed=[f.id for f in removed])
    report.version = commit_ops(ctx, [op]).version
    report.files_removed, report.files_added = len(removed), len(added)
    report.bytes_removed = sum(f.size for f in removed)
    report.bytes_added = sum(f.size for f in added)
    return report


# -- garbage collection --------------------------------------------------------------


@dataclass
class GCReport:
    dry_run: bool
    removed_files: list[str] = field(default_factory=list)  # committed removals past the floor
    orphan_files: list[str] = field(default_factory=list)  # referenced by nothing, older than grace
    temp_files: list[str] = field(default_factory=list)  # left in .tmp/ by dead writers, older than grace
    bytes_freed: int = 0
    pending: int = 0  # removed files still reachable from a retained version
    floor_version: int = 0
    derived_files: list[str] = field(default_factory=list)  # derived Iceberg metadata no retained version needs


def _orphan_cutoff(ctx: LakeContext, grace_s: float) -> float:
    """Storage timestamps at or before this are certainly more than ``grace_s`` old
    (the storage clock may lag one resolution step and stamps are truncated: two steps of margin)."""
    store = ctx.store
    return store.storage_now() - grace_s - 2 * store.storage_clock_resolution


def _scan_tables(reader: CatalogReader) -> Iterator[tuple[bytes, bytes]]:
    return reader.kv.scan(prefix=keys.TBL)


def gc(
    ctx: LakeContext,
    dry_run: bool,
    grace_s: float | None,
    progress: bool,
    *,
    orphans: bool = True,
    removals: bool = True,
    max_floor: int | None = None,
) -> GCReport:
    """Delete data files no retained version can reach; see the module docstring.

    ``orphans=False`` leaves unreferenced and temp files alone, ``removals=False``
    the files of committed removals (catalog.expiry runs one half each);
    ``max_floor`` lowers the floor GC deletes under (never raises it past the window's).

    Raises:
        ValueError: ``grace_s`` is not a non-negative number.
        StoreError: the data floor could not be committed (no committed removal was deleted).
    """
    from catalog import iceberg_derived  # on first use: pyiceberg is slow to import

    if grace_s is None:
        grace_s = float(ctx.store.options.gc_grace_s)
    elif isinstance(grace_s, bool) or not isinstance(grace_s, (int, float)) or not grace_s >= 0:
        raise ValueError(f"grace_s must be a non-negative number, got {grace_s!r}")
    # The clock is read BEFORE the references: a commit this gc does not see
    # was checked after this instant against a file younger than half the
    # grace (catalog.freshness), so the file cannot be past the cutoff.
    cutoff = _orphan_cutoff(ctx, grace_s)
    ctx.store.refresh()
    floor, window = retention.gc_floor(ctx.store)
    if max_floor is not None:
        floor = min(floor, max_floor)
    report = GCReport(dry_run=dry_run, floor_version=floor)
    live_paths: set[str] = set()
    live_tables: set[str] = set()
    gone: list[tuple[bytes, dict[str, Any]]] = []
    with ctx.store.snapshot() as now:
        for key, value in _scan_tables(CatalogReader(now)):
            if b"/file/" in key:
                live_paths.add(DataFile.decode(value).path)
            elif b"/gone/" in key:
                gone.append((key, json.loads(value)))
            elif key.endswith(b"/def"):
                live_tables.add(key[len(keys.TBL) : -len(b"/def")].decode())
    deletable = _past_floor(ctx, gone, floor) if removals else []
    referenced = live_paths | {record["path"] for _, record in gone}
    referenced |= staged_paths(ctx.store)  # staged by durable transactions not yet committed
    orphan_files: list[tuple[str, int]] = []
    derived: list[str] = []  # derived Iceberg metadata of native tables (catalog.iceberg_derived)
    for meta in ctx.objects.list(DATA_PREFIX + "/"):
        if iceberg_derived.is_derived_path(meta.path):
            derived.append(meta.path)  # no orphan: collected by its own rule below
        elif orphans and meta.path not in referenced and meta.mtime <= cutoff:
            orphan_files.append((meta.path, meta.size))
    # Temp files of writers killed mid-write (a local directory's .tmp/): they
    # hold space on a full disk and no version will ever name them.
    objects = ctx.objects
    temps = objects.stale_temp_files(cutoff) if orphans and isinstance(objects, TempFileStore) else []
    for meta in temps:
        report.temp_files.append(meta.path)
        report.bytes_freed += meta.size
        if not dry_run and isinstance(objects, TempFileStore):
            objects.delete_temp_file(meta.path)
    total = len(deletable) + len(orphan_files)
    done = 0
    # Orphans first: no version reads them, and the space they free lets the
    # floor's commit below succeed on a full disk.
    for path, size in orphan_files:
        report.orphan_files.append(path)
        report.bytes_freed += size
        if not dry_run:
            ctx.objects.delete(path)
        done += 1
        _progress(progress, "gc", done, total)
    # A lakehouse that never recorded a floor may have lost files to a GC from
    # before floors were recorded: its first GC records one whatever it deletes.
    unrecorded = floor > 0 and retention.recorded_floor(ctx.store) is None
    if removals and not dry_run and (unrecorded or any(not record.get("purge") for _, record in deletable)):
        # The floor is recorded in the lakehouse before any file below it
        # goes: every reader then answers SnapshotTooOldError, never a
        # missing file (catalog.retention).
        # On a full disk the reserve makes room for that commit; a failure to
        # record it raises here, before any such file goes.
        try:
            recorded = retention.raise_floor(ctx.store, floor, window)
        except (CommitNotLandedError, NotWrittenError):
            if not _release_reserve(ctx):
                raise
            recorded = retention.raise_floor(ctx.store, floor, window)
        if recorded < floor:  # the window changed meanwhile: delete only under the recorded floor
            floor = report.floor_version = recorded
            deletable = _past_floor(ctx, gone, floor)
    report.pending = len(gone) - len(deletable)
    for key, record in deletable:
        report.removed_files.append(record["path"])
        report.bytes_freed += int(record.get("size", 0))
        if not dry_run:
            ctx.objects.delete(record["path"])  # a failure is GC's to report (missing is fine)
        done += 1
        _progress(progress, "gc", done, total)
    if not dry_run:
        _forget(ctx, deletable)
        keep_reserve(ctx)
    report.derived_files = iceberg_derived.collect(ctx, derived, live_tables, dry_run)
    return report


# GC must commit the data floor before it deletes a removed file
# (catalog.retention), and a commit needs a few KiB. On a local disk with 0
# bytes free that commit fails, and GC could free nothing but orphans and temp
# files. So a lakehouse on a local directory keeps this reserve: a GC that
# finds the disk full deletes it to make room for its floor, and every GC (and
# every open) puts it back when there is room again.
RESERVE_PATH: Final = "_lakehouse_gc_reserve"
RESERVE_BYTES: Final = 256 * 1024


def _has_reserve(ctx: LakeContext) -> bool:
    try:
        ctx.objects.head(RESERVE_PATH)
    except FileNotFoundError:
        return False
    return True


def keep_reserve(ctx: LakeContext) -> None:
    """Put the full-disk reserve back if it is missing (local directories only).

    No room for it is not an error: it is logged, and the next GC tries again.
    """
    if not isinstance(ctx.objects, LocalStore) or _has_reserve(ctx):
        return
    try:
        ctx.objects.put(RESERVE_PATH, bytes(RESERVE_BYTES))
    except ObjectStoreError as exc:
        log.warning("no room for the lakehouse's full-disk reserve %s (%s); the next gc tries again", RESERVE_PATH, exc)


def _release_reserve(ctx: LakeContext) -> bool:
    """Delete the reserve to free room for GC's floor commit; False if there is none."""
    if not isinstance(ctx.objects, LocalStore) or not _has_reserve(ctx):
        return False
    log.warning("the disk is full: gc releases the lakehouse's %d-byte reserve to record its floor", RESERVE_BYTES)
    ctx.objects.delete(RESERVE_PATH)
    return True


def _past_floor(ctx: LakeContext, gone: list[tuple[bytes, dict[str, Any]]], floor: int) -> list[tuple[bytes, dict[str, Any]]]:
    """The removal records whose files no version at or above ``floor`` reads: purged, or removed at or before it
    (the record is visible at the floor version). None but the purged if this handle cannot read the floor version."""
    purged = [(key, record) for key, record in gone if record.get("purge")]
    if len(purged) == len(gone):
        return purged
    try:
        old = ctx.store.at(version=floor)
    except SnapshotTooOldError:  # this handle's engine dropped it: keep every removal for now
        return purged
    with old:
        return [(key, record) for key, record in gone if record.get("purge") or old.get(key) is not None]


def purge_dropped(ctx: LakeContext, table_id: str) -> GCReport:
    """Delete at once the files of table ``table_id`` if it was dropped with ``purge``.

    What ``DROP TABLE ... PURGE`` in Spark promises (the data is gone when the
    statement returns), without a whole-lakehouse gc: only this table's
    purged removal records are read. Time travel to a version before the
    drop cannot read the table afterwards, as with any purge.
    """
    report = GCReport(dry_run=False, floor_version=ctx.store.retention_floor().version)
    ctx.store.refresh()
    with ctx.store.snapshot() as now:
        purged = [(key, record) for key, value in now.scan(prefix=keys.table_gone(table_id))
                  if (record := json.loads(value)).get("purge")]
    for _, record in purged:
        ctx.objects.delete(record["path"])  # a failure is the purge's to report (missing is fine)
        report.removed_files.append(record["path"])
        report.bytes_freed += int(record.get("size", 0))
    _forget(ctx, purged)
    return report


def _forget(ctx: LakeContext, records: list[tuple[bytes, dict[str, Any]]]) -> None:
    """Delete removal records whose files are deleted (after the files: a crash in between
    leaves records whose files are missing, which the next gc skips)."""
    for i in range(0, len(records), 1000):
        chunk = records[i : i + 1000]

        def forget(txn: Any, chunk: list[tuple[bytes, dict[str, Any]]] = chunk) -> None:
            for key, _ in chunk:
                txn.delete(key)

        ctx.store.run(forget, isolation="snapshot")


# -- export ----------------------------------------------------------------------------


@dataclass
class ExportReport:
    version: int
    dest: str
    data_files: int = 0
    data_bytes: int = 0
    kv: Any = None
    iceberg_tables: int = 0  # format-'iceberg' tables copied with their metadata (catalog.iceberg_export)
    iceberg_views: int = 0  # views made over the Iceberg REST API, relocated
    iceberg_files: int = 0  # metadata, manifest, data and delete files of those tables
    iceberg_bytes: int = 0


def _root_uri(objects: Any, url: object) -> str:
    """The URI of an object store's root (``file:///abs/dir``, ``s3://bucket/prefix``)."""
    import os

    root = str(getattr(objects, "url", url)).rstrip("/")
    if "://" not in root:
        root = "file://" + os.path.abspath(root)
    return root


def export(ctx: LakeContext, dest_url: str, version: int | None, progress: bool, **dest_options: Any) -> ExportReport:
    """Copy the lakehouse at ``version`` (default: now) to ``dest_url``: a lakehouse that opens on its own.

    The catalog's store is exported at that version (every byte verified by
    lakekv's export), then every data file that version references is copied
    and its size and CRC32C checked (a corrupt source raises CorruptDataFileError).
    Tables of format ``iceberg`` are copied with their metadata, manifest
    lists, manifests, data and delete files, every location in them
    rewritten into the destination, and views made over the Iceberg REST API
    relocated alike (:mod:`catalog.iceberg_export`): the catalog keys that
    name them are corrected in one commit after the exported version, so
    the destination's newest version names nothing of the source.

    Raises:
        SnapshotTooOldError: ``version`` is below the lakehouse's data floor (:mod:`catalog.retention`).
        CorruptDataFileError: a data file's size or CRC32C is not its catalog entry's.
        FileNotFoundError: a file an Iceberg table's metadata names is missing.
    """
    from catalog.iceberg_export import Roots, copy_iceberg
    from kvstore.objstore.factory import open_store
    from kvstore.store import open as open_kv

    ctx.store.refresh()
    if version is None:
        version = ctx.store.version
    retention.check_readable(ctx.store, version)  # its data files may be gone: too old, not half a copy
    if dest_options:  # destination credentials for s3:// (kvstore.Store.export passes them on)
        kv_report = ctx.store.export(dest_url, version=version, progress=progress, **dest_options)
    else:
        kv_report = ctx.store.export(dest_url, version=version, progress=progress)
    dest = open_store(dest_url, **dest_options) if isinstance(dest_url, str) else dest_url
    report = ExportReport(version=version, dest=str(getattr(dest, "url", dest_url)), kv=kv_report)
    try:
        with ctx.store.at(version=version) as past:
            rows = list(past.scan(prefix=keys.TBL)) + list(past.scan(prefix=keys.OBJ))
        entries = [DataFile.decode(v) for k, v in rows if k.startswith(keys.TBL) and b"/file/" in k]
        for i, entry in enumerate(entries, 1):
            body = read_body(ctx.objects, entry)  # a corrupt source is refused, never copied
            dest.put(entry.path, body)
            report.data_files += 1
            report.data_bytes += len(body)
            _progress(progress, "export data", i, len(entries))
        roots = Roots(_root_uri(ctx.objects, ctx.store.url), _root_uri(dest, dest_url))
        iceberg = copy_iceberg(rows, ctx.objects, dest, roots)
        report.iceberg_tables, report.iceberg_views = iceberg.tables, iceberg.views
        report.iceberg_files, report.iceberg_bytes = iceberg.files, iceberg.size
        if iceberg.rewritten:
            exported = open_kv(dest, create=False)
            try:
                def relocate(txn: Any) -> None:
                    for key, value in iceberg.rewritten.items():
                        txn.put(key, value)

                exported.run(relocate, isolation="snapshot")
            finally:
                exported.close()
    finally:
        close = getattr(dest, "close", None)
        if callable(close) and isinstance(dest_url, str):
            close()
    return report
