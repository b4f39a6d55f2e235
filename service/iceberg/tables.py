"""Iceberg table loads and commits on the catalog: requirements, updates, pointer swap.

(A native table's loads and commits go through :mod:`service.iceberg.native`:
derived metadata, and commits translated into native operations; a
multi-table commit mixing both kinds is still one lakehouse version.)

An Iceberg table is a catalog object of format ``"iceberg"`` whose only state
in the lakehouse is the location of its current metadata JSON. A commit:

1. loads the current pointer and metadata (at the handle's, or the
   transaction's, snapshot);
2. checks the client's requirements with pyiceberg's own models
   (``AssertRefSnapshotId`` etc.): a failure is ``CommitFailedException``, 409;
3. applies the updates with pyiceberg's ``update_table_metadata``, where
   Iceberg's reference builder differs (sort order ids, format version 3) as
   it does (:mod:`service.iceberg.updates`): an unknown or invalid update is
   400 (unknown ones already fail to parse);
4. writes the new metadata file under the table location (inside the warehouse;
   the table properties that name where files go must lie under the location,
   see :meth:`Warehouse.check_write_paths`);
5. swaps the pointer with ``commit_metadata_location(name, new, expected=old)``.

If the swap loses a race (another commit moved the pointer after step 1),
the attempt is thrown away (its file deleted) and the whole sequence runs
again on the new state; requirements decide whether the client's change still
applies, so a lost race is a retry or a 409, never a 500. A multi-table commit
runs steps 1-5 for every table inside ONE catalog transaction: one lakehouse
version, all or nothing.

Thread-safety: stateless apart from the warehouse's cache; called from worker threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import CommitTableRequest
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataV1, new_table_metadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import AssertCreate, SetLocationUpdate

import catalog
from catalog import iceberg_derived, table_locations
from catalog.errors import NoSuchTableError, RetryableConflictError, StaleDataFileError, StaleObservationError
from kvstore.errors import ConflictError
from service.errors import ApiError
from service.iceberg import native
from service.iceberg.names import table_name
from service.iceberg import updates
from service.iceberg.warehouse import Warehouse

ICEBERG: Final = "iceberg"
# Lost races retried before answering 409: each retry starts from the
# winner's state, so only sustained contention on one table exhausts this.
MAX_COMMIT_ATTEMPTS: Final = 16
# A lost race on the pointer. The contract names RetryableConflictError; the
# catalog at 52c8307 lets its internal StaleObservationError escape when the
# pointer moved before the first apply, so both mean "redo on the new state".
LOST_RACE: Final = (RetryableConflictError, StaleObservationError)


@dataclass(frozen=True)
class Current:
    """A table's state at one snapshot: pointer and parsed metadata."""

    name: str
    metadata_location: str
    metadata: TableMetadata


def load_current(lake: Any, warehouse: Warehouse, name: str) -> Current:
    """The current state of table ``name`` as ``lake`` (a Lakehouse or transaction) sees it.

    A native table's is its derived metadata at the lakehouse's current
    version (``lake`` must then be a Lakehouse).

    Raises:
        catalog.errors.NoSuchTableError: no such table (404 upstream).
        ApiError: 400 if the table exists in another format.
    """
    table = lake.load_table(name)
    if table.format == native.NATIVE:
        derived = iceberg_derived.derive(lake, name, lake.version)
        native.prepare_location(derived.metadata.location)
        return Current(name, derived.metadata_location, derived.metadata)
    if table.format != ICEBERG:
        raise ApiError(
            400, "BadRequestException",
            f"table {name} has format {table.format!r}; the Iceberg REST API serves only format 'iceberg' tables",
        )
    return Current(name, table.metadata_location, warehouse.read_metadata(table.metadata_location))


def parse_commit(body: bytes | dict[str, Any]) -> CommitTableRequest:
    """A ``CommitTableRequest`` (identifier, requirements, updates); 400 if malformed or unknown."""
    try:
        if isinstance(body, dict):
            return CommitTableRequest.model_validate(body)
        return CommitTableRequest.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(400, "BadRequestException", f"invalid commit request: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg')}"


def _empty_metadata() -> TableMetadata:
    # The base a staged create's updates are applied to, as pyiceberg's own
    # catalogs build it: unvalidated v1 metadata with an empty schema; the
    # client's updates (upgrade-format-version first) fill in the rest, and
    # the result is validated (enforce_validation) before it is written.
    return TableMetadataV1.model_construct(last_column_id=-1, schema=Schema())


def _apply(warehouse: Warehouse, base: Current | None, request: CommitTableRequest) -> TableMetadata:
    """Check the requirements against ``base`` and apply the updates; raises ApiError 409/400."""
    base_metadata = base.metadata if base else None
    try:
        for requirement in request.requirements:
            requirement.validate(base_metadata)
    except CommitFailedException as exc:
        raise ApiError(409, "CommitFailedException", str(exc)) from None
    for update in request.updates:
        if isinstance(update, SetLocationUpdate):
            warehouse.check(update.location, "set-location")
    try:
        metadata = updates.apply(
            base_metadata if base_metadata is not None else _empty_metadata(), request.updates,
            enforce_validation=base is None, metadata_location=base.metadata_location if base else None,
        )
    except (ValueError, ValidationError) as exc:
        raise ApiError(400, "BadRequestException", f"cannot apply updates: {exc}") from None
    warehouse.check(metadata.location, "table location")
    # After the updates: a set-properties, a set-location, or both together.
    warehouse.check_write_paths(metadata.properties, metadata.location)
    return metadata


def check_location(lake: Any, warehouse: Warehouse, location: object, name: str, what: str) -> str:
    """``location`` normalized if ``name`` may have it (:meth:`Warehouse.check_table_location`), else ApiError 400.

    The other tables it could overlap are found in the location index
    (:mod:`catalog.table_locations`): a few short reads, however many tables
    there are. A lakehouse made before the index gets it built here, once
    (its own commit); a transaction whose snapshot predates that lists every
    table instead.
    """
    uri = warehouse.check(location, what)
    others = _indexed_overlaps(lake, uri)
    if others is None:
        table_locations.build(lake.context.store)  # once per lakehouse: a no-op once it is marked
        others = _indexed_overlaps(lake, uri)
    if others is None:  # a transaction whose snapshot predates the index
        others = other_locations(lake, name)
    others.pop(name, None)
    return warehouse.check_table_location(location, others, what)


def _indexed_overlaps(lake: Any, uri: str) -> dict[str, str] | None:
    """The Iceberg tables whose location overlaps ``uri``, from ``lake``'s location index (None: it is not complete)."""
    with lake.tree.host.reading() as reader:
        return table_locations.overlapping(reader.kv, uri) if table_locations.complete(reader.kv) else None


def other_locations(lake: Any, name: str) -> dict[str, str]:
    """Every Iceberg table's location but ``name``'s, by table name, read table by table
    (for a lakehouse whose location index is not complete: see :func:`check_location`)."""
    out: dict[str, str] = {}
    for namespace in lake.list_namespaces(recursive=True):
        for full in lake.list_tables(namespace):
            if full == name:
                continue
            table = lake.load_table(full)
            if table.format == ICEBERG and table.location:
                out[full] = table.location
    return out


def stage_commit(lake: Any, warehouse: Warehouse, name: str, request: CommitTableRequest) -> tuple[Current, str | None]:
    """Steps 1-5 for one table against ``lake`` (a Lakehouse or an open transaction).

    Returns the new state and the previous metadata location (None for a create).
    """
    creating = any(isinstance(r, AssertCreate) for r in request.requirements)
    try:
        base: Current | None = load_current(lake, warehouse, name)
    except NoSuchTableError:
        if not creating:
            raise
        base = None
    metadata = _apply(warehouse, base, request)
    if base is None or metadata.location != base.metadata.location:
        check_location(lake, warehouse, metadata.location, name, "table location")
    previous = base.metadata_location if base else None
    new_location = warehouse.next_metadata_location(metadata, previous)
    warehouse.write_metadata(metadata, new_location)
    try:
        if base is None:
            lake.create_table(
                name, format=ICEBERG, location=metadata.location, properties=dict(metadata.properties),
                metadata_location=new_location,
            )
        else:
            lake.commit_metadata_location(name, new_location, previous)
    except BaseException:
        warehouse.delete_file(new_location)
        raise
    return Current(name, new_location, metadata), previous


def _format(lake: catalog.Lakehouse, name: str) -> str | None:
    """The table's format, or None if there is no such table (yet: a staged create)."""
    try:
        return lake.load_table(name).format
    except NoSuchTableError:
        return None


def _attempt(
    lake: catalog.Lakehouse, warehouse: Warehouse, names: list[str], requests: list[CommitTableRequest]
) -> tuple[int | None, list[Current]]:
    """One attempt at committing ``requests`` (one per table of ``names``) as one lakehouse version.

    Native tables' requirements are checked against their derived metadata at
    the lakehouse's current version, and their updates translated into native
    operations (:mod:`service.iceberg.native`); Iceberg tables take the pointer
    swap. Returns the new version (None if nothing changed) and each table's state after it.
    """
    plans = {
        name: native.plan(native.load(lake, name), request)
        for name, request in zip(names, requests)
        if _format(lake, name) == native.NATIVE
    }
    if not plans:
        if len(names) == 1:  # one Iceberg table: its pointer swap is its own commit
            current = stage_commit(lake, warehouse, names[0], requests[0])[0]
            return None, [current]
    elif len(plans) == len(names) and all(p.empty for p in plans.values()):
        # Only requirements (or updates that change nothing): they held, nothing to commit.
        return None, [Current(n, p.base.metadata_location, p.base.metadata) for n, p in plans.items()]
    staged: dict[str, Current] = {}
    with lake.transaction() as tx:
        for name, request in zip(names, requests):
            if name in plans:
                native.apply(tx, plans[name], lake.objects)
            else:
                staged[name] = stage_commit(tx, warehouse, name, request)[0]
    assert tx.version is not None  # set by a successful commit
    out = []
    for name in names:
        if name in staged:
            out.append(staged[name])
        else:
            derived = iceberg_derived.derive(lake, name, tx.version)
            out.append(Current(name, derived.metadata_location, derived.metadata))
    return tx.version, out


def _committing(lake: catalog.Lakehouse, warehouse: Warehouse, names: list[str],
                requests: list[CommitTableRequest], what: str) -> tuple[int | None, list[Current]]:
    """:func:`_attempt` until it does not lose a race (see the module docstring)."""
    for _ in range(MAX_COMMIT_ATTEMPTS):
        # Requirements are checked against the newest version, not the handle's last poll: a
        # client that read the table from another server or process must not get a false 409.
        lake.refresh()
        try:
            return _attempt(lake, warehouse, names, requests)
        except LOST_RACE:
            continue
        except ConflictError as exc:  # incompatible: e.g. the table was dropped meanwhile
            raise ApiError(409, "CommitFailedException", str(exc)) from None
        except StaleDataFileError as exc:  # the client's data files are too old to commit safely
            raise ApiError(409, "CommitFailedException", str(exc)) from None
    raise ApiError(409, "CommitFailedException", f"{what} lost the commit race {MAX_COMMIT_ATTEMPTS} times; retry")


def commit_table(lake: catalog.Lakehouse, warehouse: Warehouse, name: str, request: CommitTableRequest) -> Current:
    """Commit one table's change, retrying lost races (see the module docstring)."""
    return _committing(lake, warehouse, [name], [request], f"table {name}:")[1][0]


def commit_transaction(lake: catalog.Lakehouse, warehouse: Warehouse, requests: list[CommitTableRequest]) -> int | None:
    """Commit several tables' changes as ONE lakehouse version; return that version (None if nothing changed)."""
    names = [table_name(".".join(r.identifier.namespace.root), r.identifier.name) for r in requests]
    if len(set(names)) != len(names):
        raise ApiError(400, "BadRequestException", "a transaction may change each table only once")
    return _committing(lake, warehouse, names, requests, "transaction")[0]


def create_table(
    lake: catalog.Lakehouse, warehouse: Warehouse, namespace: str, body: dict[str, Any]
) -> tuple[str | None, TableMetadata]:
    """Create a table from a ``CreateTableRequest``; return ``(metadata location, metadata)``.

    A staged create (``stage-create: true``) only builds the metadata: nothing
    is written until the client commits it with ``AssertCreate``.
    """
    from pyiceberg.catalog.rest import CreateTableRequest

    try:
        # The model marks optional fields as required keys; clients omit them.
        request = CreateTableRequest.model_validate({"location": None, "partition-spec": None, "write-order": None, **body})
    except ValidationError as exc:
        raise ApiError(400, "BadRequestException", f"invalid create request: {_first_error(exc)}") from None
    name = table_name(namespace, request.name)
    if not lake.namespace_exists(namespace):
        raise ApiError(404, "NoSuchNamespaceException", f"namespace {namespace} does not exist")
    if lake.table_exists(name) or lake.view_exists(name):
        raise ApiError(409, "AlreadyExistsException", f"table {name} already exists")
    location = (
        check_location(lake, warehouse, request.location, name, "location")
        if request.location
        else warehouse.default_table_location(namespace, request.name)
    )
    warehouse.check_write_paths(request.properties, location)
    try:
        metadata = new_table_metadata(
            schema=request.table_schema,
            partition_spec=request.partition_spec or PartitionSpec(),
            sort_order=request.write_order or SortOrder(),
            location=location,
            properties=dict(request.properties),
        )
    except ValueError as exc:
        raise ApiError(400, "BadRequestException", f"invalid table definition: {exc}") from None
    metadata = updates.with_row_lineage(updates.with_defaults(metadata, request.table_schema))
    if request.stage_create:
        # Nothing is written until the client commits, but its writer puts
        # data files under the location first (DuckDB's CTAS): it must exist.
        warehouse.prepare_location(location)
        return None, metadata
    metadata_location = warehouse.next_metadata_location(metadata, None)
    warehouse.write_metadata(metadata, metadata_location)
    try:
        lake.create_table(
            name, format=ICEBERG, location=location, properties=dict(metadata.properties),
            metadata_location=metadata_location,
        )
    except BaseException:
        warehouse.delete_file(metadata_location)
        raise
    return metadata_location, metadata


def register_table(
    lake: catalog.Lakehouse, warehouse: Warehouse, namespace: str, body: dict[str, Any]
) -> Current:
    """Adopt an existing metadata file (inside the warehouse) as table ``name``."""
    name = table_name(namespace, body.get("name"))
    if body.get("overwrite") and _format(lake, name) == native.NATIVE:
        raise native.refused(name, "being replaced by a registered table", "drop it first")
    location = warehouse.check(body.get("metadata-location"), "metadata-location")
    try:
        metadata = warehouse.read_metadata(location)
    except (OSError, ValueError) as exc:
        raise ApiError(400, "BadRequestException", f"cannot read metadata at {location}: {exc}") from None
    check_location(lake, warehouse, metadata.location, name, "table location")
    warehouse.check_write_paths(metadata.properties, metadata.location)
    # Marked: the metadata belongs to another catalog, so Spark and the Python API only read it.
    from catalog.iceberg_tables import REGISTERED_PROPERTY

    registered = {REGISTERED_PROPERTY: "true"}
    if body.get("overwrite") and lake.table_exists(name):
        current = load_current(lake, warehouse, name)
        with lake.transaction() as tx:
            tx.commit_metadata_location(name, location, current.metadata_location)
            tx.load_table(name).update_properties(registered)
    else:
        lake.create_table(
            name, format=ICEBERG, location=metadata.location, properties={**metadata.properties, **registered},
            metadata_location=location,
        )
    return Current(name, location, metadata)
