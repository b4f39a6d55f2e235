"""LmdbCommitStore specifics: recovery of interrupted copies, staging hygiene, limits."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kvstore.errors import StoreClosedError
from kvstore.objstore import FaultyStore, InjectedFaultError, LmdbCommitStore, MemoryStore
from kvstore.objstore.lmdb_commit import STAGING_PREFIX


def test_reader_finishes_a_copy_interrupted_after_the_claim(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    backing = MemoryStore(conditional_create=False)
    faulty = FaultyStore(backing, seed=0)
    writer = LmdbCommitStore(faulty, tmp_path / "lmdb")
    # The copy to the final name fails: the claim (the commit point) stands.
    faulty.fail_next("put", path_prefix="_v1")
    with caplog.at_level(logging.WARNING):
        assert writer.put_if_absent("_v1", b"committed") is True
    assert "readers will finish it" in caplog.text
    with pytest.raises(FileNotFoundError):
        backing.get("_v1")
    assert [m.path for m in backing.list(STAGING_PREFIX)] != []
    # Another handle (think: another process) reads and completes the copy.
    reader = LmdbCommitStore(backing, tmp_path / "lmdb")
    assert reader.get("_v1") == b"committed"
    assert backing.get("_v1") == b"committed"
    assert list(backing.list(STAGING_PREFIX)) == []
    assert reader.put_if_absent("_v1", b"late") is False
    reader.close()
    writer.close()


@pytest.mark.parametrize("op", ["head", "get_range", "list"])
def test_every_read_path_finishes_pending_copies(tmp_path: Path, op: str) -> None:
    backing = MemoryStore(conditional_create=False)
    faulty = FaultyStore(backing, seed=0)
    store = LmdbCommitStore(faulty, tmp_path / "lmdb")
    faulty.fail_next("put", path_prefix="_v2")
    assert store.put_if_absent("_v2", b"0123456789")
    if op == "head":
        assert store.head("_v2").size == 10
    elif op == "get_range":
        assert store.get_range("_v2", 2, 5) == b"234"
    else:
        assert [m.path for m in store.list("_v")] == ["_v2"]
    assert backing.get("_v2") == b"0123456789"


def test_claim_lost_after_staging_removes_the_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backing = MemoryStore(conditional_create=False)
    first = LmdbCommitStore(backing, tmp_path / "lmdb")
    second = LmdbCommitStore(backing, tmp_path / "lmdb")
    assert first.put_if_absent("_v1", b"first")
    # Make the second writer skip its early checks, as if it raced past them.
    monkeypatch.setattr(second, "_claim_state", lambda key: None)  # internals: skip the early claim check
    monkeypatch.setattr(second, "_inner_has", lambda path: False)  # internals: skip the early existence check
    assert second.put_if_absent("_v1", b"second") is False
    assert backing.get("_v1") == b"first"
    assert list(backing.list(STAGING_PREFIX)) == []


def test_existing_object_without_claim_is_never_overwritten(tmp_path: Path) -> None:
    # E.g. the LMDB directory was lost: the inner store still holds the commit.
    backing = MemoryStore(conditional_create=False)
    backing.put("_v1", b"old commit")
    store = LmdbCommitStore(backing, tmp_path / "fresh-lmdb")
    assert store.put_if_absent("_v1", b"new") is False
    assert backing.get("_v1") == b"old commit"


def test_staging_prefix_is_reserved_and_hidden(tmp_path: Path) -> None:
    backing = MemoryStore(conditional_create=False)
    store = LmdbCommitStore(backing, tmp_path / "lmdb")
    backing.put(f"{STAGING_PREFIX}orphan", b"from a writer that died before claiming")
    store.put("sst/a", b"1")
    assert [m.path for m in store.list()] == ["sst/a"]
    with pytest.raises(ValueError, match="reserved"):
        store.get(f"{STAGING_PREFIX}orphan")


def test_failed_staging_claims_nothing(tmp_path: Path) -> None:
    faulty = FaultyStore(MemoryStore(conditional_create=False), seed=0)
    store = LmdbCommitStore(faulty, tmp_path / "lmdb")
    faulty.fail_next("put", path_prefix=STAGING_PREFIX)
    with pytest.raises(InjectedFaultError):
        store.put_if_absent("_v1", b"x")
    assert store.put_if_absent("_v1", b"y") is True
    assert store.get("_v1") == b"y"


def test_overlong_path_is_rejected(tmp_path: Path) -> None:
    store = LmdbCommitStore(MemoryStore(conditional_create=False), tmp_path / "lmdb")
    with pytest.raises(ValueError, match="key limit"):
        store.put_if_absent("a" * 600, b"x")


def test_closed_store_raises_and_close_is_idempotent(tmp_path: Path) -> None:
    store = LmdbCommitStore(MemoryStore(conditional_create=False), tmp_path / "lmdb")
    store.close()
    store.close()
    with pytest.raises(StoreClosedError):
        store.get("a")
    with pytest.raises(StoreClosedError):
        list(store.list())


def test_environment_is_shared_and_survives_one_handle_closing(tmp_path: Path) -> None:
    a = LmdbCommitStore(MemoryStore(conditional_create=False), tmp_path / "lmdb")
    b = LmdbCommitStore(MemoryStore(conditional_create=False), tmp_path / "lmdb")
    assert a.put_if_absent("_v1", b"x")
    a.close()
    assert b.put_if_absent("_v1", b"y") is False  # the claim is in the shared LMDB
    b.close()


def test_lmdb_path_type_is_checked() -> None:
    with pytest.raises(TypeError, match="lmdb_path"):
        LmdbCommitStore(MemoryStore(conditional_create=False), 3)  # type: ignore[arg-type]
