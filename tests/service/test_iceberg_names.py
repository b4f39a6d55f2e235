"""Iceberg REST names follow the catalog's rules (service.iceberg.names, catalog.names).

``café`` in NFC and in NFD used to become two namespaces. A namespace part or
table name not in Unicode NFC is a 400 naming it, in a path (percent-encoded
UTF-8) or a body, through raw HTTP and through pyiceberg; the NFC spelling works.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError
from http_client import call_json

from service.errors import ApiError
from service.iceberg.names import check_part
from service.testing import ServerProcess

NFC, NFD = "caf\u00e9", "cafe\u0301"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def test_check_part_refuses_a_part_not_in_nfc() -> None:
    assert check_part(NFC, "namespace part") == NFC
    with pytest.raises(ApiError, match="not in Unicode NFC") as refused:
        check_part(NFD, "namespace part")
    assert refused.value.status == 400


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("iceberg-names")
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        yield process
    finally:
        process.stop()


def test_http_nfd_names_are_refused_and_make_nothing(server: ServerProcess) -> None:
    assert call_json(server, "POST", "/v1/namespaces", {"namespace": [NFC]})[0] == 200
    status, body = call_json(server, "POST", "/v1/namespaces", {"namespace": [NFD]})
    assert status == 400 and "not in Unicode NFC" in body["error"]["message"], body
    nfd_path = urllib.parse.quote(NFD)
    for method, path, payload in (
        ("GET", f"/v1/namespaces/{nfd_path}", None),
        ("POST", f"/v1/namespaces/{urllib.parse.quote(NFC)}/tables", {"name": NFD, "schema": SCHEMA}),
        ("GET", f"/v1/namespaces/{urllib.parse.quote(NFC)}/tables/{nfd_path}", None),
    ):
        status, body = call_json(server, method, path, payload)
        assert status == 400 and "not in Unicode NFC" in body["error"]["message"], (method, path, body)
    assert call_json(server, "GET", "/v1/namespaces")[1]["namespaces"] == [[NFC]]
    assert call_json(server, "GET", f"/v1/namespaces/{urllib.parse.quote(NFC)}/tables")[1]["identifiers"] == []


def test_pyiceberg_sees_one_namespace(server: ServerProcess) -> None:
    rest = RestCatalog("lakekv", uri=server.url)
    rest.create_namespace(f"{NFC}2")
    with pytest.raises(BadRequestError, match="not in Unicode NFC"):
        rest.create_namespace(f"{NFD}2")
    assert (f"{NFC}2",) in rest.list_namespaces() and (f"{NFD}2",) not in rest.list_namespaces()
