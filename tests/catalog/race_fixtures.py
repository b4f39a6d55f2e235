"""Fixtures for the conflict-matrix races (imported by the tests that use them).

* ``lake_url``: a fresh lakehouse in a local temp directory, openable by URL
  from any process.
* ``me``: this test's handle on it, quiet (no follower, no background work),
  so it stays on the version it last saw until it commits (see
  :mod:`lake_peer`).
* ``peer``: the other writer, once in this process and once in a second
  process (tests using it run both ways).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import catalog
from lake_peer import LocalPeer, RemotePeer, RemoteProcess, open_lake


@pytest.fixture
def lake_url(tmp_path: Path) -> str:
    url = str(tmp_path / "lake")
    open_lake(url).close()
    return url


@pytest.fixture
def me(lake_url: str) -> Iterator[catalog.Lakehouse]:
    with open_lake(lake_url) as lake:
        yield lake


@pytest.fixture(scope="session")
def remote_process() -> Iterator[RemoteProcess]:
    process = RemoteProcess()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(params=["same process", "two processes"])
def peer(request: pytest.FixtureRequest, lake_url: str) -> LocalPeer | RemotePeer:
    if request.param == "same process":
        return LocalPeer(lake_url)
    return RemotePeer(lake_url, request.getfixturevalue("remote_process"))
