"""``GET /v1/namespaces/{ns}/tables`` pages with ``pageToken``/``pageSize`` as the Iceberg REST spec says.

* no ``pageToken`` and no ``pageSize``: every table, ``next-page-token`` null
  (the spec: a server that pages "must return all results in a single
  response ... if the query parameter pageToken is not set"; it used to
  stop at 1,000 and hand back a token);
* ``pageSize`` (with or without a ``pageToken``, ``""`` included): pages of at
  most that many, each table once, in order, ended by a null token; a size
  above the server's cap gets pages of the cap;
* a bad size or token: 400 ``BadRequestException`` saying what was wrong;
* pyiceberg's ``RestCatalog`` lists every table, paged (``rest-page-size``)
  or not.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from test_security import request

import catalog
from service.iceberg.routes import MAX_PAGE_SIZE
from service.testing import ServerProcess

TABLES = 2_345  # more than the old 1,000-table first page, fewer than the 10,000 cap
NAMES = [f"t{i:05d}" for i in range(TABLES)]


@pytest.fixture(scope="module")
def paged_server(lake_server: ServerProcess) -> Iterator[ServerProcess]:
    """``lake_server`` with namespace ``many`` of :data:`TABLES` tables and a view, made in one transaction."""
    lake = catalog.open(lake_server.store_url, poll_interval_s=0, background_maintenance=False)
    try:
        lake.create_namespace("many")
        lake.create_namespace("empty")
        with lake.transaction() as tx:
            for name in NAMES:
                tx.create_table(f"many.{name}", pa.schema([("x", pa.int64())]))
            tx.create_view("many.t01000v", "select 1")
    finally:
        lake.close()
    yield lake_server


def get(server: ServerProcess, namespace: str, **params: str) -> tuple[int, dict]:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    status, _, raw = request(server, "GET", f"/v1/namespaces/{namespace}/tables{query}")
    return status, json.loads(raw)


def names(body: dict) -> list[str]:
    assert all(identifier["namespace"] == ["many"] for identifier in body["identifiers"])
    return [identifier["name"] for identifier in body["identifiers"]]


def test_without_page_parameters_every_table_comes_in_one_response(paged_server: ServerProcess) -> None:
    status, body = get(paged_server, "many")
    assert status == 200
    assert names(body) == NAMES and body["next-page-token"] is None


@pytest.mark.parametrize("first_token", [None, ""])
def test_pages_hold_each_table_once_in_order(paged_server: ServerProcess, first_token: str | None) -> None:
    seen: list[str] = []
    params = {"pageSize": "500"} if first_token is None else {"pageSize": "500", "pageToken": first_token}
    while True:
        status, body = get(paged_server, "many", **params)
        assert status == 200 and 1 <= len(body["identifiers"]) <= 500
        seen.extend(names(body))
        if body["next-page-token"] is None:
            break
        params = {"pageSize": "500", "pageToken": body["next-page-token"]}
    assert seen == NAMES


def test_a_token_alone_pages_and_an_oversized_page_is_capped(paged_server: ServerProcess) -> None:
    status, first = get(paged_server, "many", pageSize="1")
    assert status == 200 and names(first) == NAMES[:1]
    status, rest = get(paged_server, "many", pageToken=first["next-page-token"])
    assert status == 200 and names(rest) == NAMES[1:1001]  # the default page: 1,000
    status, capped = get(paged_server, "many", pageSize=str(MAX_PAGE_SIZE * 10))
    assert status == 200 and names(capped) == NAMES and capped["next-page-token"] is None
    assert get(paged_server, "empty", pageSize="10") == (200, {"identifiers": [], "next-page-token": None})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pageSize": "0"}, "pageSize must be at least 1"),
        ({"pageSize": "-3"}, "pageSize must be at least 1"),
        ({"pageSize": "ten"}, "pageSize must be an integer"),
        ({"pageSize": "10", "pageToken": "not-a-token"}, "not a page token"),
        ({"pageToken": "1000"}, "not a page token"),  # the old offsets are not tokens
    ],
)
def test_a_bad_size_or_token_is_a_400_saying_so(paged_server: ServerProcess, params: dict[str, str], message: str) -> None:
    status, body = get(paged_server, "many", **params)
    assert status == 400, body
    assert body["error"]["type"] == "BadRequestException" and message in body["error"]["message"]


def test_a_token_of_another_namespace_is_a_400(paged_server: ServerProcess) -> None:
    token = get(paged_server, "many", pageSize="1")[1]["next-page-token"]
    status, body = get(paged_server, "empty", pageSize="1", pageToken=token)
    assert status == 400 and "namespace 'many'" in body["error"]["message"]


@pytest.mark.parametrize("page_size", [None, "100", "1000"])
def test_pyiceberg_lists_every_table(paged_server: ServerProcess, page_size: str | None) -> None:
    properties = {} if page_size is None else {"rest-page-size": page_size}
    rest = RestCatalog("lakekv", uri=paged_server.url, **properties)
    assert rest.list_tables("many") == [("many", name) for name in NAMES]
