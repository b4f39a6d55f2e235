"""Fixtures for durable transactions and locks.

``manager`` is a TransactionManager on a fresh local-directory store with a
fake clock (expiry without sleeping). ``peer`` runs the "other" transaction of
a scenario either in this process or, through :mod:`durable_workers`, in a
second process; tests parametrized over it check every claim both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kvstore
from catalog.durable import TransactionManager
from durable_workers import Driver, FakeClock, LocalDriver, RemoteDriver

STORE_OPTIONS = {"poll_interval_s": 0, "background_maintenance": False}


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = str(tmp_path / "store")
    kvstore.open(url, **STORE_OPTIONS).close()
    return url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(store_url: str, clock: FakeClock) -> Iterator[TransactionManager]:
    with kvstore.open(store_url, **STORE_OPTIONS) as store:
        yield TransactionManager(store, clock=clock, poll_max_s=0.02)


@pytest.fixture(scope="session")
def remote_driver() -> Iterator[RemoteDriver]:
    driver = RemoteDriver()
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture(params=["same process", "two processes"])
def peer(request: pytest.FixtureRequest, store_url: str) -> Iterator[Driver]:
    """The second party of a scenario, on the same store (real clock)."""
    if request.param == "same process":
        with kvstore.open(store_url, **STORE_OPTIONS) as store:
            yield LocalDriver(TransactionManager(store, poll_max_s=0.02))
    else:
        remote: RemoteDriver = request.getfixturevalue("remote_driver")
        remote.open(store_url)
        try:
            yield remote
        finally:
            remote.close_store()


@pytest.fixture
def me(store_url: str) -> Iterator[Driver]:
    """The first party of a scenario, always in this process (real clock)."""
    with kvstore.open(store_url, **STORE_OPTIONS) as store:
        yield LocalDriver(TransactionManager(store, poll_max_s=0.02))
