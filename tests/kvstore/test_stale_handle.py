"""A handle that sleeps while GC removes the roots after its head must not
re-create them: before committing it notices the chain moved on and reloads."""

from __future__ import annotations

import uuid

import pytest

import kvstore
from kvstore.chain import HINT_PATH, VersionChain
from kvstore.errors import SnapshotTooOldError
from kvstore.format.root import root_path
from kvstore.objstore.memory import MemoryStore


def _strand(objects: MemoryStore, sleeper: kvstore.Store, writer: kvstore.Store, commits: int) -> int:
    """Let ``writer`` move on, flush, then delete the roots ``sleeper`` never read (like GC)."""
    for i in range(commits):
        writer.put(b"w%03d" % i, b"v")
    writer.flush()
    first_missing = sleeper.version + 1
    for version in range(first_missing, writer.version - 2):
        objects.delete(root_path(version))
    objects.put(HINT_PATH, str(writer.version).encode())
    sleeper._state.last_sync -= 3600  # internals: it has been asleep for an hour, without waiting one
    return first_missing


@pytest.fixture
def pair():
    objects = MemoryStore(f"memory://{uuid.uuid4().hex}")
    options = {"poll_interval_s": 0, "background_maintenance": False}
    sleeper = kvstore.open(objects, **options)
    writer = kvstore.open(objects, **options)
    yield objects, sleeper, writer
    sleeper.close()
    writer.close()


def test_commit_after_long_sleep_reloads_instead_of_recreating_a_deleted_root(pair) -> None:
    objects, sleeper, writer = pair
    sleeper.put(b"mine", b"before sleep")
    writer.refresh()
    first_missing = _strand(objects, sleeper, writer, commits=20)
    sleeper.put(b"mine", b"after sleep")
    chain = VersionChain(objects)
    assert not chain.exists(first_missing), "a root removed by GC was re-created"
    assert sleeper.version == writer.version + 1
    assert sleeper.get(b"w019") == b"v"  # it sees what it slept through
    writer.refresh()
    assert writer.get(b"mine") == b"after sleep"


def test_transaction_begun_before_the_gap_cannot_commit(pair) -> None:
    objects, sleeper, writer = pair
    txn = sleeper.begin("serializable")
    txn.get(b"w005")
    txn.put(b"derived", b"x")
    _strand(objects, sleeper, writer, commits=10)
    with pytest.raises(SnapshotTooOldError):
        txn.commit()
    with sleeper.transaction() as fresh:  # a new transaction works
        assert fresh.get(b"w005") == b"v"
        fresh.put(b"derived", b"y")
