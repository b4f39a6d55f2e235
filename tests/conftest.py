"""Fixtures shared by the whole test suite.

* ``seaweedfs`` (session): a real S3-compatible server (SeaweedFS ``weed server``)
  on 127.0.0.1, started on first use and stopped by PID at the end.
* ``store_factory`` (function): ``store_factory(kind)`` returns a fresh, empty
  object store of kind ``"memory"``, ``"local"``, ``"s3"`` or ``"lmdb"``.

Tests parametrized with a value ``"s3"`` get the ``s3`` marker automatically,
so ``pytest -m "not s3"`` runs without the server.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvstore.objstore import LmdbCommitStore, LocalStore, MemoryStore, ObjectStore, open_store
from kvstore.testing.seaweed import SeaweedServer

STORE_KINDS = ("memory", "local", "s3", "lmdb")

StoreFactory = Callable[[str], ObjectStore]


def pytest_report_header() -> str:
    # Free space on these machines varies from run to run (from 80 GB down to
    # under 1 GB); a nearly full disk fails S3 and Spark tests in ways that do
    # not say so. Print it up front.
    temp = tempfile.gettempdir()
    usage = shutil.disk_usage(temp)
    return f"temp disk: {usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.0f} GiB ({temp})"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(isinstance(v, str) and v == "s3" for v in callspec.params.values()):
            item.add_marker(pytest.mark.s3)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A running SeaweedFS; ``new_url()`` gives ``(s3 URL of a fresh prefix, open_store options)``."""
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """``store_factory(kind) -> ObjectStore``: a fresh, empty store per call, closed after the test.

    ``"lmdb"`` is an LmdbCommitStore over ``MemoryStore(conditional_create=False)``.
    ``"s3"`` starts the session's SeaweedFS on first use.
    """
    created: list[ObjectStore] = []
    counter = iter(range(1_000_000))

    def make(kind: str) -> ObjectStore:
        n = next(counter)
        store: ObjectStore
        if kind == "memory":
            store = MemoryStore()  # unnamed: open_store(store.url) cannot reach it
        elif kind == "local":
            store = LocalStore(tmp_path / f"local-{n}")
        elif kind == "s3":
            server: SeaweedServer = request.getfixturevalue("seaweedfs")
            url, options = server.new_url()
            store = open_store(url, **options)
        elif kind == "lmdb":
            store = LmdbCommitStore(MemoryStore(conditional_create=False), tmp_path / f"lmdb-{n}")
        else:
            raise ValueError(f"unknown store kind {kind!r}; expected one of {STORE_KINDS}")
        created.append(store)
        return store

    yield make
    for store in created:
        store.close()
