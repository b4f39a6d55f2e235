"""kvstore.registry: the URL schemes other packages open, found through the
``lakekv.stores`` entry points (kvstore.open's route to the HTTP client)."""

from __future__ import annotations

import pytest

import kvstore
from kvstore import registry
from kvstore.objstore import open_store
from kvstore.registry import BUILT_IN_SCHEMES, opener_for, registered_scheme, registered_schemes


def test_paths_and_built_in_schemes_never_reach_the_registry() -> None:
    assert registered_scheme("./relative/dir") is None
    assert registered_scheme("/abs/dir") is None
    assert [registered_scheme(f"{s}://x") for s in sorted(BUILT_IN_SCHEMES)] == [None, None, None]
    assert registered_scheme("S3://bucket/p") is None  # schemes are case-insensitive
    assert registered_scheme("HTTPS://host:1") == "https"


@pytest.mark.parametrize("url", ["file:///tmp/lakekv-registry-probe", "memory://registry-probe", "s3://B!/x"])
def test_every_built_in_scheme_is_one_open_store_knows(url: str) -> None:
    # s3: an invalid bucket fails after the scheme was accepted, without a request.
    try:
        open_store(url, create=False).close()
    except ValueError as exc:
        assert "unknown store URL scheme" not in str(exc)
    with pytest.raises(ValueError, match="unknown store URL scheme 'http'"):
        open_store("http://127.0.0.1:1")  # and http is not: the registry must open it


def test_the_lakekv_distribution_registers_http_and_https() -> None:
    assert {"http", "https"} <= set(registered_schemes())
    assert opener_for("http") is opener_for("HTTPS")


def test_an_unregistered_scheme_is_a_value_error_naming_it_and_what_to_install() -> None:
    with pytest.raises(ValueError) as raised:
        kvstore.open("gopher://host/store")
    message = str(raised.value)
    assert "scheme 'gopher'" in message and "'lakekv.stores'" in message
    assert "install a package that registers the 'gopher' scheme" in message
    assert "http://" in message  # the registered ones are listed


def test_without_the_client_installed_http_names_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # No entry points at all: a checkout that was never installed.
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    clear_cache = registry._entry_points.cache_clear  # internals: the entry points are read once per process
    clear_cache()
    try:
        with pytest.raises(ValueError) as raised:
            kvstore.open("http://127.0.0.1:8181")
    finally:
        clear_cache()
    message = str(raised.value)
    assert "scheme 'http'" in message and "kvclient" in message and "pip install -e ." in message
    assert "registered: none" in message


def test_open_embedded_opens_what_the_engine_opens_and_refuses_the_rest() -> None:
    with kvstore.open_embedded("memory://registry-embedded", poll_interval_s=0) as db:
        assert isinstance(db, kvstore.Store) and isinstance(db, kvstore.KeyValueStore)
    for url in ("http://127.0.0.1:8181", "gopher://host/store"):
        with pytest.raises(ValueError, match="is not an embedded store"):
            kvstore.open_embedded(url)
