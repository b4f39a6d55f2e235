"""Iceberg REST commits on native tables, translated into native catalog operations.

A native table (format ``"parquet"``) is served over the Iceberg REST API with
the metadata :mod:`catalog.iceberg_derived` derives from its keys at a
lakehouse version. A client committing to it sends what it sends to any
Iceberg catalog: requirements, ``add-snapshot`` with manifests it wrote,
schema, property and partition-spec updates. Here:

1. :func:`load` derives the table's metadata at the lakehouse version ``V``
   the client's requirements are checked against, and fingerprints the
   native state it was derived from (definition, properties, live files);
2. :func:`plan` checks the requirements (``CommitFailedException``, 409),
   refuses what a native table cannot honour (400 naming the feature), applies
   the updates to the derived metadata with pyiceberg to learn the client's
   intent, and reads the manifests of each new snapshot: which data files it
   added and which it removed;
3. :func:`apply` stages, in an open lakehouse transaction, the native
   operations the Python API would run: ``UpdateSchema``, ``UpdateProperties``,
   then an append or a copy-on-write replace of exactly the removed files,
   the client's rows rewritten by the lakehouse's own writer (see
   :func:`_rewritten` for why it never commits the client's file). It first checks the transaction still sees the fingerprinted state, and
   reads the table's live files inside it, so a concurrent change to the
   table makes the commit a ``RetryableConflictError``: the caller re-derives
   and re-checks the requirements (a lost race is a retry or a 409).

Refused, never ignored: delete files (position or equality: honouring them
would need every read path, the Python scan, the Spark plugin and the derived
metadata, to apply them), branches and tags other than ``main``, snapshots
not on ``main`` (write-audit-publish), rolling ``main`` back, snapshot
expiry and ref removal (lakekv's retention governs versions), statistics
files, a new location, a format version change, partition specs other than
the table's identity partitioning, sort orders, column reordering, changes
inside nested columns, properties that move where files are written, and
the properties the lakehouse derives.

Thread-safety: stateless; called from worker threads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    UpgradeFormatVersionUpdate,
    update_table_metadata,
)
from pyiceberg.types import BinaryType, NestedField, StringType

import catalog
from catalog import iceberg_derived
from catalog.datafiles import DataFile, discard_files, write_files
from catalog.errors import RetryableConflictError
from catalog.schema import PARQUET_FIELD_ID, project
from service.errors import ApiError
from service.iceberg.warehouse import LOCATION_PROVIDER_PROPERTIES, WRITE_PATH_PROPERTIES, normalize

NATIVE: Final = "parquet"
# Properties catalog.iceberg_derived adds to the metadata it derives: not the table's, nobody else's to set.
DERIVED_PROPERTIES: Final = "lakekv.derived."
MAIN: Final = "main"
# Updates a native table takes; any other is refused by name (see _REFUSED).
_TAKEN: Final = (
    AddSnapshotUpdate, SetSnapshotRefUpdate, AddSchemaUpdate, SetCurrentSchemaUpdate, SetPropertiesUpdate,
    RemovePropertiesUpdate, AddPartitionSpecUpdate, SetDefaultSpecUpdate, AddSortOrderUpdate,
    SetDefaultSortOrderUpdate, UpgradeFormatVersionUpdate, AssignUUIDUpdate, SetLocationUpdate,
)
# Why the other update actions are refused, by their REST name.
_REFUSED: Final = {
    "remove-snapshots": "snapshot expiry (a native table's versions are kept by the lakehouse's retention: "
                        "lake.set_retention, then lake.gc)",
    "remove-snapshot-ref": "removing a branch or tag (a native table has only main)",
    "set-statistics": "statistics files (Puffin)",
    "remove-statistics": "statistics files (Puffin)",
    "set-partition-statistics": "partition statistics files",
    "remove-partition-statistics": "partition statistics files",
    "remove-schemas": "removing schemas (the lakehouse keeps every version's schema for time travel)",
    "remove-partition-specs": "removing partition specs",
}
# Snapshot operations and whether they may remove data files.
_OPERATIONS: Final = {"append": False, "overwrite": True, "delete": True, "replace": True}


def refused(name: str, feature: str, why: str = "") -> ApiError:
    """The 400 for something a native table cannot honour, naming it."""
    return ApiError(
        400, "BadRequestException",
        f"table {name} is a native lakekv table, which does not support {feature}" + (f": {why}" if why else ""),
    )


@dataclass(frozen=True)
class Base:
    """A native table's state at lakehouse version ``version``, as served over REST."""

    name: str
    version: int
    metadata_location: str
    metadata: TableMetadata
    fingerprint: tuple[Any, ...]  # what the metadata was derived from: see _fingerprint
    files: dict[str, DataFile]  # live files by normalized URI
    root: str  # the table location's normalized URI
    location: str  # the table location as an object path in the lakehouse store
    io: FileIO  # reads the manifests clients wrote there, with the store's own access (local or S3)


def _fingerprint(table: catalog.Table, files: list[DataFile]) -> tuple[Any, ...]:
    """What a native table's derived metadata depends on: its definition, properties and live files."""
    return (
        table.id, table.format, table.schema_version, tuple(table.partition_by),
        tuple(sorted(table.properties.items())), frozenset(f.id for f in files),
    )


def _store_uri(lake: Any, object_path: str) -> str:
    return normalize(f"{str(lake.url).rstrip('/')}/{object_path}", "data file path")


def load(lake: catalog.Lakehouse, name: str) -> Base:
    """Native table ``name`` at ``lake``'s current version: its derived metadata and the state behind it."""
    version = lake.version
    derived = iceberg_derived.derive(lake, name, version)
    table = lake.at(version=version).load_table(name)
    files = table.files()
    return Base(
        name=name,
        version=version,
        metadata_location=derived.metadata_location,
        metadata=derived.metadata,
        fingerprint=_fingerprint(table, files),
        files={_store_uri(lake, f.path): f for f in files},
        root=_store_uri(lake, table.location),
        location=table.location,
        io=iceberg_derived.LakeFileIO(lake.objects),
    )


def prepare_location(location: str) -> None:
    """Create a local native table's ``data`` directory, where Iceberg writers put data files:
    local file IO does not create parent directories (DuckDB's delete-file writer), and the
    lakehouse's own writer puts its files directly under the location."""
    uri = normalize(location, "table location")
    if uri.startswith("file://"):
        os.makedirs(os.path.join(uri.removeprefix("file://"), "data"), exist_ok=True)


@dataclass(frozen=True)
class AddedFile:
    """A data file a client's snapshot added: where it is (object path) and what its manifest claims."""

    uri: str
    object_path: str
    record_count: int
    file_size: int


@dataclass
class Plan:
    """The native changes one REST commit asks for."""

    base: Base
    schema: Schema | None = None  # the new current schema, if it changed
    property_updates: dict[str, str] = field(default_factory=dict)
    property_removals: list[str] = field(default_factory=list)
    added: list[AddedFile] = field(default_factory=list)
    removed: list[DataFile] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return (self.schema is None and not self.property_updates and not self.property_removals
                and not self.added and not self.removed)


def plan(base: Base, request: CommitTableRequest) -> Plan:
    """Check ``request`` against ``base`` and work out the native changes it asks for.

    Raises:
        ApiError: 409 ``CommitFailedException`` if a requirement fails; 400 for
            an update a native table cannot honour (naming it), or manifests that
            do not describe a valid change of the table.
    """
    name, metadata = base.name, base.metadata
    try:
        for requirement in request.requirements:
            requirement.validate(metadata)
    except CommitFailedException as exc:
        raise ApiError(409, "CommitFailedException", str(exc)) from None
    for update in request.updates:
        if not isinstance(update, _TAKEN):
            feature = _REFUSED.get(update.action, f"the update {update.action!r}")
            raise refused(name, feature)
    try:
        final = update_table_metadata(metadata, tuple(request.updates))
    except (ValueError, ValidationError) as exc:
        raise ApiError(400, "BadRequestException", f"cannot apply updates: {exc}") from None
    _check_unchanged(name, metadata, final)
    out = Plan(base)
    if final.schema() != metadata.schema():
        out.schema = final.schema()
    old_props, new_props = dict(metadata.properties), dict(final.properties)
    out.property_updates = {k: v for k, v in new_props.items() if old_props.get(k) != v}
    out.property_removals = sorted(set(old_props) - set(new_props))
    moved = [k for k in (*WRITE_PATH_PROPERTIES, *LOCATION_PROVIDER_PROPERTIES)
             if k in out.property_updates or k in out.property_removals]
    if moved:
        raise refused(name, f"the table property {moved[0]}",
                      "a native table's files are always written under its location, where the catalog tracks them")
    derived = sorted(k for k in (*out.property_updates, *out.property_removals) if k.startswith(DERIVED_PROPERTIES))
    if derived:
        raise refused(name, f"changing the property {derived[0]}", "the lakehouse derives it with the metadata")
    _read_snapshots(out, final)
    return out


def _check_unchanged(name: str, base: TableMetadata, final: TableMetadata) -> None:
    """Refuse the changes a native table cannot honour, seen as differences between ``base`` and ``final``."""
    if final.format_version != base.format_version:
        raise refused(name, f"format version {final.format_version}", f"it is served as version {base.format_version}")
    if final.table_uuid != base.table_uuid:
        raise refused(name, "a new table UUID")
    if normalize(final.location, "location") != normalize(base.location, "location"):
        raise refused(name, "set-location", "its files live where the lakehouse put them")
    if _spec_shape(final) != _spec_shape(base):
        raise refused(
            name, f"the partition spec {final.spec()}",
            "a native table is partitioned by identity on the columns chosen at create, and only so",
        )
    if _sort_shape(final) != _sort_shape(base):
        raise refused(name, f"the sort order {final.sort_order_by_id(final.default_sort_order_id)}")
    others = sorted(ref for ref in final.refs if ref != MAIN)
    if others:
        raise refused(name, f"the branch or tag {others[0]!r}", "a native table has one line of history: main")
    if MAIN in final.refs and _ref_retention(final) != _ref_retention(base):
        raise refused(name, "snapshot retention settings on main", _REFUSED["remove-snapshots"])
    kept = {s.snapshot_id for s in final.snapshots}
    if any(s.snapshot_id not in kept for s in base.snapshots):
        raise refused(name, "snapshot expiry", _REFUSED["remove-snapshots"])
    if _nested_changed(base.schema(), final.schema()):
        raise refused(name, "adding a nested column or changing one inside", "only top-level columns evolve")


def _ref_retention(metadata: TableMetadata) -> tuple[int | None, ...]:
    ref = metadata.refs.get(MAIN)
    return (None, None, None) if ref is None else (
        ref.min_snapshots_to_keep, ref.max_snapshot_age_ms, ref.max_ref_age_ms,
    )


def _spec_shape(metadata: TableMetadata) -> list[tuple[int, str]]:
    return [(f.source_id, str(f.transform)) for f in metadata.spec().fields]


def _sort_shape(metadata: TableMetadata) -> list[Any]:
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    return [] if order is None else [(f.source_id, str(f.transform), f.direction, f.null_order) for f in order.fields]


def _nested_changed(old: Schema, new: Schema) -> bool:
    """Whether a nested column kept (by id) changed inside, or a nested column was added."""
    old_by_id = {f.field_id: f for f in old.fields}
    for f in new.fields:
        before = old_by_id.get(f.field_id)
        if not f.field_type.is_primitive and (before is None or before.field_type != f.field_type):
            return True
    return False


def _read_snapshots(out: Plan, final: TableMetadata) -> None:
    """Fill ``out.added``/``out.removed`` from the snapshots ``final`` adds on main."""
    base, name = out.base, out.base.name
    known = {s.snapshot_id for s in base.metadata.snapshots}
    new = {s.snapshot_id: s for s in final.snapshots if s.snapshot_id not in known}
    main_before = base.metadata.current_snapshot_id
    main_after = final.refs[MAIN].snapshot_id if MAIN in final.refs else None
    chain: list[Snapshot] = []
    cursor = main_after
    while cursor is not None and cursor != main_before:
        snapshot = new.get(cursor)
        if snapshot is None:
            raise refused(name, f"moving main to snapshot {main_after}",
                          "main only moves forward, to snapshots this commit adds (no rollback)")
        chain.append(snapshot)
        cursor = snapshot.parent_snapshot_id
    if cursor != main_before:
        raise refused(name, "a snapshot history that does not start at the current snapshot")
    if len(chain) != len(new):
        raise refused(name, "snapshots not on main (staged, write-audit-publish)",
                      "every snapshot a commit adds must become main's")
    live = dict(base.files)
    added: dict[str, AddedFile] = {}
    io = base.io
    current = base.metadata.current_snapshot()
    # Manifests a snapshot may carry over unread: exactly its parent's.
    inherited = {m.manifest_path for m in current.manifests(io)} if current is not None else set()
    for snapshot in reversed(chain):
        inherited = _apply_snapshot(name, base, snapshot, io, inherited, live, added)
    out.added = [a for uri, a in added.items() if uri in live]
    out.removed = [f for uri, f in base.files.items() if uri not in live]


def _apply_snapshot(
    name: str, base: Base, snapshot: Snapshot, io: FileIO, inherited: set[str], live: dict[str, Any],
    added: dict[str, AddedFile],
) -> set[str]:
    """Apply one snapshot's added and deleted entries to ``live`` (URI -> file), checking them.

    ``inherited`` are the manifests of its parent; returns its own (for its child).
    """
    root, location = base.root, base.location
    operation = snapshot.summary.operation.value if snapshot.summary is not None else "append"
    if operation not in _OPERATIONS:
        raise refused(name, f"the snapshot operation {operation!r}")
    _inside(name, root, snapshot.manifest_list, "manifest list")
    manifests = snapshot.manifests(io)
    live_count = 0
    removed_any = False
    for manifest in manifests:
        if manifest.content != ManifestContent.DATA:
            raise refused(name, "delete files (position or equality deletes)", _DELETE_FILES_WHY)
        own = manifest.added_snapshot_id == snapshot.snapshot_id
        if not own and manifest.manifest_path not in inherited:
            raise ApiError(400, "BadRequestException", f"snapshot {snapshot.snapshot_id} of table {name} lists "
                           f"manifest {manifest.manifest_path}, which is neither its own nor its parent's")
        added_count, existing_count = manifest.added_files_count, manifest.existing_files_count
        if not own and added_count is not None and existing_count is not None:
            live_count += added_count + existing_count  # an inherited manifest: its counts suffice
            continue
        _inside(name, root, manifest.manifest_path, "manifest")
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
            data = entry.data_file
            if data.content != DataFileContent.DATA:
                raise refused(name, "delete files (position or equality deletes)", _DELETE_FILES_WHY)
            if entry.status != ManifestEntryStatus.DELETED:
                live_count += 1
            if not own:
                continue  # counted only: its entries are its parent's
            uri = _inside(name, root, data.file_path, "data file")
            if entry.status == ManifestEntryStatus.EXISTING:
                if uri not in live:
                    raise ApiError(400, "BadRequestException", f"snapshot {snapshot.snapshot_id} keeps {uri}, "
                                   f"which is not a live data file of table {name}")
            elif entry.snapshot_id not in (None, snapshot.snapshot_id):
                raise ApiError(400, "BadRequestException", f"snapshot {snapshot.snapshot_id} of table {name} "
                               f"records {uri} as {entry.status.name} by another snapshot, {entry.snapshot_id}")
            elif entry.status == ManifestEntryStatus.ADDED:
                if data.file_format != FileFormat.PARQUET:
                    raise refused(name, f"{data.file_format} data files", "a native table's data files are Parquet")
                if uri in live:
                    raise ApiError(400, "BadRequestException", f"snapshot {snapshot.snapshot_id} adds {uri}, "
                                   f"which is already a data file of table {name}")
                live[uri] = added[uri] = AddedFile(
                    uri, f"{location}/{uri[len(root) + 1:]}", int(data.record_count), int(data.file_size_in_bytes)
                )
            elif entry.status == ManifestEntryStatus.DELETED:
                removed_any = True
                if live.pop(uri, None) is None:
                    raise ApiError(400, "BadRequestException", f"snapshot {snapshot.snapshot_id} deletes {uri}, "
                                   f"which is not a live data file of table {name}")
    if removed_any and not _OPERATIONS[operation]:
        raise ApiError(400, "BadRequestException",
                       f"snapshot {snapshot.snapshot_id} is an append but deletes data files of table {name}")
    if live_count != len(live):
        raise ApiError(
            400, "BadRequestException",
            f"snapshot {snapshot.snapshot_id} ({operation}) lists {live_count} live data files, but the table "
            f"{name} would hold {len(live)}: a manifest dropped or repeated files without recording it",
        )
    return {m.manifest_path for m in manifests}


_DELETE_FILES_WHY: Final = (
    "honouring them would need every read path (the Python scan, the Spark plugin, the derived Iceberg "
    "metadata) to apply them; rewrite the affected data files instead (copy-on-write)"
)


def _inside(name: str, root: str, location: object, what: str) -> str:
    """``location`` normalized if it lies strictly under the table's location ``root``, else ApiError 400."""
    uri = normalize(location, what)
    if not uri.startswith(root + "/"):
        raise ApiError(
            400, "BadRequestException",
            f"{what} {location!r} of table {name} is outside the table's location {root!r}",
        )
    return uri


def apply(tx: Any, plan: Plan, objects: Any) -> None:
    """Stage ``plan``'s native operations in the open lakehouse transaction ``tx``.

    ``objects`` is the lakehouse's object store (where the client wrote the
    data files).

    Raises:
        RetryableConflictError: the table is no longer in the state its derived
            metadata (which the requirements were checked against) described.
        ApiError: 400 for a data file that is not what its manifest says, or
            does not fit the table.
        ValueError: a schema or property change the native table refuses.
    """
    base, name = plan.base, plan.base.name
    table = tx.load_table(name)
    # Read inside the transaction (its live files too): a concurrent change to
    # the table now makes this commit lose, and the caller re-derives.
    if _fingerprint(table, table.files()) != base.fingerprint:
        raise RetryableConflictError(
            f"table {name} changed since version {base.version}, whose Iceberg metadata the commit was checked "
            "against", ours="append", object=name,
        )
    if plan.schema is not None:
        builder = table.update_schema()
        _schema_steps(name, base.metadata.schema(), plan.schema, builder)
        builder.commit()
        table = tx.load_table(name)
    if plan.property_updates or plan.property_removals:
        table.update_properties(updates=plan.property_updates, removals=plan.property_removals)
    if not plan.added and not plan.removed:
        return
    entries: list[DataFile] = []
    try:
        for added in plan.added:
            entries.extend(_rewritten(name, objects, table, added, tx.target_file_bytes))
    except BaseException:
        discard_files(objects, [e.path for e in entries], "the REST commit was refused")
        raise
    if plan.removed:
        # Copy-on-write: exactly the files the client's snapshots deleted go,
        # and the files it read were the live files of the base version.
        table.commit_files(entries, mode="replace", replaced=plan.removed, read_files=list(base.files.values()))
    else:
        table.commit_files(entries, mode="append")


def _rewritten(
    name: str, objects: Any, table: catalog.Table, added: AddedFile, target_file_bytes: int
) -> list[DataFile]:
    """The rows of a data file the client wrote, rewritten as native data files; their entries.

    The lakehouse commits files it wrote itself, not the client's:

    * a lost race deletes the files of the ops that lost
      (:func:`catalog.transactions.discard_written`), but an Iceberg client
      retries with the data files it wrote, so those must survive;
    * every native file carries Parquet page checksums, which the Spark
      plugin's reader relies on (it checks the footer's CRC32C and the pages',
      not the whole file's), and Iceberg writers do not write them;
    * nothing the client does to its file afterwards can change the table.

    The rows are matched to the table's columns by field id (the file must
    carry them, as Iceberg writers do) and checked against the manifest
    entry's row count; the original becomes an orphan that ``gc()`` removes.
    """
    try:
        body = objects.get(added.object_path)
    except FileNotFoundError:
        raise ApiError(400, "BadRequestException", f"data file {added.uri} of table {name} does not exist") from None
    if len(body) != added.file_size:
        raise ApiError(400, "BadRequestException", f"data file {added.uri} of table {name} has {len(body)} bytes; "
                       f"its manifest entry says {added.file_size}")
    try:
        data = pq.read_table(pa.BufferReader(body), page_checksum_verification=True)
        unnamed = [f.name for f in data.schema if PARQUET_FIELD_ID not in (f.metadata or {})]
        if unnamed:
            raise ValueError(f"its column {unnamed[0]!r} has no Parquet field id (files without them, read by "
                             "name mapping, are not accepted)")
        if data.num_rows != added.record_count:
            raise ValueError(f"it has {data.num_rows} rows; its manifest entry says {added.record_count}")
        rows = project(data, table.schema)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ApiError(400, "BadRequestException", f"data file {added.uri} of table {name}: {exc}") from None
    return write_files(objects, table.location, rows, table.schema, list(table.partition_by), target_file_bytes)


def _arrow_type(name: str, f: NestedField) -> pa.DataType:
    """The native Arrow type of a top-level primitive Iceberg column (plain, not large, strings and binaries)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    if isinstance(f.field_type, StringType):
        return pa.string()
    if isinstance(f.field_type, BinaryType):
        return pa.binary()
    try:
        return schema_to_pyarrow(f.field_type, include_field_ids=False)
    except (TypeError, ValueError) as exc:
        raise refused(name, f"the column type {f.field_type} of {f.name!r}", str(exc)) from None


def _schema_steps(name: str, old: Schema, new: Schema, builder: Any) -> None:
    """Add to ``builder`` the native steps turning ``old`` into ``new`` (matched by field id)."""
    old_by_id = {f.field_id: f for f in old.fields}
    new_by_id = {f.field_id: f for f in new.fields}
    kept_old = [f.field_id for f in old.fields if f.field_id in new_by_id]
    kept_new = [f.field_id for f in new.fields if f.field_id in old_by_id]
    added = [f for f in new.fields if f.field_id not in old_by_id]
    if kept_old != kept_new or (added and new.fields[-len(added):] != tuple(added)):
        raise refused(name, "reordering columns", "new columns go at the end and columns keep their order")
    for f in old.fields:
        if f.field_id not in new_by_id:
            builder.drop_column(f.name)
    for fid in kept_old:
        before, after = old_by_id[fid], new_by_id[fid]
        if before.required != after.required:
            raise refused(name, f"making column {after.name!r} {'required' if after.required else 'optional'}")
        if before.name != after.name:
            builder.rename_column(before.name, after.name)
        if before.field_type != after.field_type:
            builder.widen(after.name, _arrow_type(name, after))
        if before.doc != after.doc:
            builder.set_comment(after.name, after.doc)
    for f in added:
        builder.add_column(f.name, _arrow_type(name, f), nullable=not f.required)
        if f.doc:
            builder.set_comment(f.name, f.doc)
