"""Fixtures for the service tests.

* ``server`` (session): ``lakekv serve`` on an in-memory store, no token,
  127.0.0.1 on a free port, stopped by PID at the end.
* ``secure_server`` (session): the same with a bearer token and a 4 KiB body limit.
* ``remote_db``: a RemoteStore on ``server`` whose key space is empty at the
  start of the test (the session server is shared, so the test wipes it).

The engine's own API tests are imported by name from tests/kvstore, so that
folder goes on sys.path here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import RestCatalog

import kvstore
from kvclient import RemoteStore
from service.testing import ServerProcess
from tests.service.etcd_peers import LakekvEtcd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kvstore"))

from http_client import SMALL_BODY_LIMIT, TOKEN  # noqa: E402 - after the sys.path line above


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # An in-memory store, like the embedded side of the parametrized tests
    # (the crash tests run their own servers on local directories).
    root = tmp_path_factory.mktemp("server")
    process = ServerProcess("memory://serve-tests", root / "server.log").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def secure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("secure-server")
    process = ServerProcess(
        str(root / "store"), root / "server.log", token=TOKEN,
        extra_args=("--max-body-bytes", str(SMALL_BODY_LIMIT)),
    ).start()
    try:
        yield process
    finally:
        process.stop()


def wipe(db: RemoteStore) -> None:
    batch = kvstore.WriteBatch()
    for key, _ in db.scan():
        batch.delete(key)
    if len(batch):
        db.write(batch)


@pytest.fixture
def remote_db(server: ServerProcess) -> Iterator[RemoteStore]:
    db = kvstore.open(server.url)
    assert isinstance(db, RemoteStore)
    wipe(db)
    yield db
    db.close()


@pytest.fixture()
def lakekv(tmp_path: Path) -> Iterator[LakekvEtcd]:
    """``lakekv serve --etcd-listen`` on a store of the test's own, stopped (SIGTERM) after it."""
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lake_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``lakekv serve`` on a lakehouse of the test module's own (no token), stopped after the module."""
    root = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def rest(lake_server: ServerProcess) -> RestCatalog:
    """pyiceberg's REST catalog on :func:`lake_server`."""
    return RestCatalog("lakekv", uri=lake_server.url)
