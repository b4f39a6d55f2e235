"""service.iceberg.updates: sort order ids as Iceberg's reference builder assigns them, and the REST commits that need it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.table.update import AddSortOrderUpdate, SetDefaultSortOrderUpdate, update_table_metadata
from pyiceberg.transforms import IdentityTransform
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from test_security import request

from service.iceberg.updates import as_reference
from service.testing import ServerProcess

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "n", LongType(), required=False))


def order(order_id: int, *fields: tuple[int, SortDirection]) -> SortOrder:
    return SortOrder(
        *(SortField(source_id=s, transform=IdentityTransform(), direction=d, null_order=NullOrder.NULLS_LAST) for s, d in fields),
        order_id=order_id,
    )


ASC = order(1, (1, SortDirection.ASC))
DESC = order(1, (1, SortDirection.DESC))


def replace(sort: SortOrder) -> list:
    """A replace transaction's sort order updates, as a client that loaded an unsorted table sends them."""
    return [AddSortOrderUpdate(sort_order=sort), SetDefaultSortOrderUpdate(sort_order_id=-1)]


def test_a_racing_replace_adds_its_order_under_the_next_id() -> None:
    base = new_table_metadata(SCHEMA, PartitionSpec(), SortOrder(order_id=0), "file:///wh/t")
    won = update_table_metadata(base, as_reference(base, replace(DESC)))
    lost = update_table_metadata(won, as_reference(won, replace(ASC)))  # built on `base` too: order id 1
    assert [(o.order_id, o.fields) for o in lost.sort_orders] == [(0, []), (1, DESC.fields), (2, ASC.fields)]
    assert lost.default_sort_order_id == 2


def test_an_order_the_table_has_is_reused_not_added_again() -> None:
    base = new_table_metadata(SCHEMA, PartitionSpec(), ASC, "file:///wh/t")
    sorted_desc = update_table_metadata(base, as_reference(base, replace(order(2, (1, SortDirection.DESC)))))
    back = update_table_metadata(sorted_desc, as_reference(sorted_desc, [
        AddSortOrderUpdate(sort_order=order(7, (1, SortDirection.ASC))), SetDefaultSortOrderUpdate(sort_order_id=7),
    ]))
    assert [o.order_id for o in back.sort_orders] == [1, 2]
    assert back.default_sort_order_id == 1


def test_last_added_names_a_reused_order_and_is_refused_with_no_order_sent() -> None:
    base = new_table_metadata(SCHEMA, PartitionSpec(), ASC, "file:///wh/t")
    desc = update_table_metadata(base, as_reference(base, replace(order(2, (1, SortDirection.DESC)))))
    assert update_table_metadata(desc, as_reference(desc, replace(ASC))).default_sort_order_id == 1
    with pytest.raises(ValueError, match="added none"):
        as_reference(base, [SetDefaultSortOrderUpdate(sort_order_id=-1)])


_FIELDS = st.lists(
    st.tuples(st.sampled_from([1, 2]), st.sampled_from([SortDirection.ASC, SortDirection.DESC])),
    max_size=2, unique_by=lambda f: f[0],
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), _FIELDS), min_size=1, max_size=6))
def test_orders_match_a_model_of_the_reference_builder(commits: list[tuple[int, list]]) -> None:
    """Model: the table's orders are a list of distinct field lists; the default is the last one added or named."""
    metadata = new_table_metadata(SCHEMA, PartitionSpec(), SortOrder(order_id=0), "file:///wh/t")
    model: list[list] = [[]]  # index = order id; the unsorted order is 0
    for client_id, fields in commits:
        sort = order(client_id, *fields) if fields else SortOrder(order_id=0)
        metadata = update_table_metadata(metadata, as_reference(metadata, [
            AddSortOrderUpdate(sort_order=sort), SetDefaultSortOrderUpdate(sort_order_id=client_id if fields else 0),
        ]))
        if sort.fields not in model:
            model.append(sort.fields)
        assert metadata.default_sort_order_id == model.index(sort.fields)
    assert [(o.order_id, o.fields) for o in metadata.sort_orders] == list(enumerate(model))
    assert len({o.order_id for o in metadata.sort_orders}) == len(metadata.sort_orders)


def test_two_replace_transactions_racing_on_sort_orders_both_commit(
    rest: RestCatalog, lake_server: ServerProcess
) -> None:
    """What Iceberg's Java client sends for two replace transactions built on one state (409/400 before the fix)."""
    rest.create_namespace("sorting")
    table = rest.create_table("sorting.t", schema=pa.schema([pa.field("id", pa.int64())]))
    path = "/v1/namespaces/sorting/tables/t"

    def commit(direction: str) -> dict:
        body = {
            "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],
            "updates": [
                {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
                    {"source-id": 1, "transform": "identity", "direction": direction, "null-order": "nulls-last"},
                ]}},
                {"action": "set-default-sort-order", "sort-order-id": -1},
            ],
        }
        status, _, answer = request(lake_server, "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        assert status == 200, answer
        return json.loads(answer)["metadata"]

    commit("desc")
    after = commit("asc")
    orders = {o["order-id"]: o["fields"][0]["direction"] for o in after["sort-orders"] if o["fields"]}
    assert orders == {1: "desc", 2: "asc"} and after["default-sort-order-id"] == 2
    again = commit("desc")  # the order the table has: reused
    assert len(again["sort-orders"]) == 3 and again["default-sort-order-id"] == 1
    assert rest.load_table("sorting.t").sort_order().order_id == 1
