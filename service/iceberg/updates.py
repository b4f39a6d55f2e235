"""A commit's table updates read the way Iceberg's reference catalog applies them.

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
"""

from __future__ import annotations

from typing import Final

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import INITIAL_SORT_ORDER_ID, UNSORTED_SORT_ORDER_ID, SortOrder
from pyiceberg.table.update import AddSortOrderUpdate, SetDefaultSortOrderUpdate, TableUpdate

# The id a set-default-sort-order names "the order this commit added last" by.
LAST_ADDED: Final = -1


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
            out.append(AddSortOrderUpdate(sort_order=order))
        elif isinstance(update, SetDefaultSortOrderUpdate):
            if update.sort_order_id == LAST_ADDED:
                if last_added is None:
                    raise ValueError("set-default-sort-order -1 names the last added sort order, and this commit added none")
                target = last_added
            else:
                target = client_ids.get(update.sort_order_id, update.sort_order_id)
            out.append(SetDefaultSortOrderUpdate(sort_order_id=target))
        else:
            out.append(update)
    return tuple(out)
