"""A commit's table updates applied the way Iceberg's reference catalog applies them.

:func:`apply` is pyiceberg's ``update_table_metadata`` with two differences
from it, both where Iceberg's own ``TableMetadata.Builder`` (what its REST
catalogs apply a commit with) decides otherwise: sort order ids, and format
version 3.

Sort order ids.

pyiceberg's ``update_table_metadata`` takes an ``add-sort-order`` with the
order id the client chose, and refuses it when the table already has another
order under that id. Iceberg's own ``TableMetadata.Builder`` (what its REST
catalogs apply a commit with) ignores the client's id: an order equal to an
existing one (same fields, whatever its id) reuses that one; any other takes
the next free id. A client builds its change on the metadata it loaded, so
two replace transactions racing on one table both send order id 1; the
reference server keeps the winner's order 1 and adds the loser's as order 2
(the RCK's ``testConcurrentReplaceTransactionSortOrderConflict``).

:func:`as_reference` rewrites the updates so that pyiceberg's applier ends
where the reference builder does: each ``add-sort-order`` is given the id the
builder would give it (or dropped when it reuses an order the table already
has), and a ``set-default-sort-order`` of ``-1`` ("the last added") or of an
id the client gave an order it added in this same commit names the order's
id in the table. One leniency beyond the reference: ``-1`` after an order
that was reused names that order (the reference builder refuses it; the
client's meaning, "the order I just sent", is plain).

Format version 3. pyiceberg 0.12 reads and updates version 3 metadata
(default values, row lineage: ``next-row-id`` advanced by each snapshot's
added rows) but refuses ``upgrade-format-version`` to 3. :func:`apply` does
that upgrade itself, before the other updates (it changes nothing else they
depend on), and starts the table's ``next-row-id`` at 0 as the spec requires
of a version 3 table. A created table keeps its columns' default values
(:func:`with_defaults`: pyiceberg's fresh field ids drop them). The metadata
is written by the warehouse
(:meth:`~service.iceberg.warehouse.Warehouse.write_metadata`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, cast

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.snapshots import MetadataLogEntry
from pyiceberg.table.sorting import INITIAL_SORT_ORDER_ID, UNSORTED_SORT_ORDER_ID, SortOrder
from pyiceberg.table.update import (
    AddSortOrderUpdate,
    SetDefaultSortOrderUpdate,
    TableUpdate,
    UpgradeFormatVersionUpdate,
    update_table_metadata,
)
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType
from pyiceberg.utils.datetime import datetime_to_millis

# The id a set-default-sort-order names "the order this commit added last" by.
LAST_ADDED: Final = -1
# The newest table format version served (pyiceberg 0.12 upgrades to 2 only).
MAX_FORMAT_VERSION: Final = 3


def _order_id(orders: list[SortOrder], new: SortOrder) -> int:
    """The id the reference builder gives ``new``: an equal order's, else one above every id in use."""
    if new.is_unsorted:
        return UNSORTED_SORT_ORDER_ID
    next_id = INITIAL_SORT_ORDER_ID
    for order in orders:
        if order.fields == new.fields:
            return order.order_id
        next_id = max(next_id, order.order_id + 1)
    return next_id


def as_reference(base: TableMetadata | None, updates: tuple[TableUpdate, ...] | list[TableUpdate]) -> tuple[TableUpdate, ...]:
    """``updates`` with sort order ids as Iceberg's ``TableMetadata.Builder`` assigns them (see the module docstring).

    ``base`` is the metadata they apply to (None: a create, from empty
    metadata). Updates of other kinds are returned as they are.

    Raises:
        ValueError: ``set-default-sort-order -1`` in a commit with no
            ``add-sort-order`` before it (the reference builder's refusal too).
    """
    orders: list[SortOrder] = list(base.sort_orders) if base is not None else []
    client_ids: dict[int, int] = {}  # the id a client gave an order it added -> the order's id in the table
    last_added: int | None = None
    out: list[TableUpdate] = []
    for update in updates:
        if isinstance(update, AddSortOrderUpdate):
            order_id = _order_id(orders, update.sort_order)
            client_ids[update.sort_order.order_id] = order_id
            last_added = order_id
            if any(o.order_id == order_id for o in orders):
                continue  # reused: the table has this order already
            order = update.sort_order.model_copy(update={"order_id": order_id})
            orders.append(order)
            out.append(update.model_copy(update={"sort_order": order}))
        elif isinstance(update, SetDefaultSortOrderUpdate):
            if update.sort_order_id == LAST_ADDED:
                if last_added is None:
                    raise ValueError("set-default-sort-order -1 names the last added sort order, and this commit added none")
                target = last_added
            else:
                target = client_ids.get(update.sort_order_id, update.sort_order_id)
            out.append(update.model_copy(update={"sort_order_id": target}))
        else:
            out.append(update)
    return tuple(out)


def with_row_lineage(metadata: TableMetadata) -> TableMetadata:
    """``metadata`` with ``next-row-id`` 0 if it is version 3 metadata without one (pyiceberg leaves it unset)."""
    if metadata.format_version >= 3 and getattr(metadata, "next_row_id", None) is None:
        return metadata.model_copy(update={"next_row_id": 0})
    return metadata


def _upgraded(base: TableMetadata, version: int) -> TableMetadata:
    """``base`` as format ``version`` metadata (validated when the updates are applied)."""
    if version > MAX_FORMAT_VERSION:
        raise ValueError(f"Unsupported table format version: {version}")
    if version < base.format_version:
        raise ValueError(f"Cannot downgrade v{base.format_version} table to v{version}")
    upgraded = TableMetadataUtil._construct_without_validation(base.model_copy(update={"format_version": version}))
    return with_row_lineage(upgraded)


def apply(
    base: TableMetadata, updates: tuple[TableUpdate, ...] | list[TableUpdate], *,
    enforce_validation: bool = False, metadata_location: str | None = None,
) -> TableMetadata:
    """``updates`` applied to ``base`` as Iceberg's reference builder applies them (see the module docstring).

    Arguments as pyiceberg's ``update_table_metadata``; ``base`` is None-free
    (a create starts from empty metadata).

    Raises:
        ValueError: an update that does not apply (pyiceberg's pydantic
            ``ValidationError`` is one too).
    """
    to_v3 = [u for u in updates if isinstance(u, UpgradeFormatVersionUpdate) and u.format_version > 2]
    rest = [u for u in updates if not (isinstance(u, UpgradeFormatVersionUpdate) and u.format_version > 2)]
    start = base
    for upgrade in to_v3:
        if upgrade.format_version != start.format_version:
            start = _upgraded(start, upgrade.format_version)
    metadata = update_table_metadata(
        base_metadata=start, updates=as_reference(start, rest),
        enforce_validation=enforce_validation, metadata_location=metadata_location,
    )
    if start is not base and metadata_location and metadata.metadata_log == base.metadata_log:
        # Only the upgrade changed the table: pyiceberg saw no change to log the previous file for.
        metadata = metadata.model_copy(update={
            "metadata_log": [*base.metadata_log, MetadataLogEntry.model_validate({"metadata-file": metadata_location, "timestamp-ms": base.last_updated_ms})],
            "last_updated_ms": datetime_to_millis(datetime.now().astimezone()),
        })
    return with_row_lineage(metadata)


def _restore(original: IcebergType, fresh: IcebergType) -> IcebergType:
    if isinstance(original, StructType) and isinstance(fresh, StructType):
        return StructType(*(
            NestedField(
                field_id=new.field_id, name=new.name, field_type=_restore(old.field_type, new.field_type),
                required=new.required, doc=new.doc, initial_default=old.initial_default, write_default=old.write_default,
            )
            for old, new in zip(original.fields, fresh.fields)
        ))
    if isinstance(original, ListType) and isinstance(fresh, ListType):
        return fresh.model_copy(update={"element_field": fresh.element_field.model_copy(
            update={"field_type": _restore(original.element_type, fresh.element_type)})})
    if isinstance(original, MapType) and isinstance(fresh, MapType):
        return fresh.model_copy(update={
            "key_field": fresh.key_field.model_copy(update={"field_type": _restore(original.key_type, fresh.key_type)}),
            "value_field": fresh.value_field.model_copy(update={"field_type": _restore(original.value_type, fresh.value_type)}),
        })
    return fresh


def with_defaults(metadata: TableMetadata, requested: Schema) -> TableMetadata:
    """A new table's ``metadata`` with the column defaults of the ``requested`` schema it was made from.

    pyiceberg's ``new_table_metadata`` gives the columns fresh ids and drops
    their ``initial-default``/``write-default`` on the way (version 3
    defaults, which Iceberg's reference catalog keeps); the fresh schema has
    the requested one's shape, so each field takes back its own.
    """
    fresh = metadata.schema()
    restored = Schema(
        *cast(StructType, _restore(requested.as_struct(), fresh.as_struct())).fields,
        schema_id=fresh.schema_id, identifier_field_ids=fresh.identifier_field_ids,
    )
    if restored == fresh:
        return metadata
    return metadata.model_copy(update={"schemas": [restored if s.schema_id == fresh.schema_id else s for s in metadata.schemas]})
