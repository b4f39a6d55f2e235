"""kvstore.open: what it accepts, what it refuses, and what it never creates."""

from __future__ import annotations

import os
import pathlib
import uuid

import pytest

import kvstore
from kvstore.errors import StoreError
from kvstore.objstore.memory import MemoryStore
from maintenance_util import wait_for


def test_path_like_urls_open(tmp_path: pathlib.Path) -> None:
    with kvstore.open(tmp_path / "s", poll_interval_s=0) as db:
        db.put(b"k", b"v")
    with kvstore.open(str(tmp_path / "s"), create=False, poll_interval_s=0) as db:
        assert db.get(b"k") == b"v"


@pytest.mark.parametrize("url", [None, b"/tmp/x", 42, ["a"]])
def test_other_url_types_are_a_type_error(url: object) -> None:
    with pytest.raises(TypeError, match="url must be a str, an os.PathLike or an ObjectStore"):
        kvstore.open(url)  # type: ignore[arg-type]


def test_bytes_path_like_is_a_type_error(tmp_path: pathlib.Path) -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return os.fsencode(str(tmp_path / "b"))

    with pytest.raises(TypeError, match="bytes"):
        kvstore.open(BytesPath())  # type: ignore[arg-type]


def test_open_without_create_creates_nothing(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "typo" / "store"
    with pytest.raises(FileNotFoundError, match="no lakekv store"):
        kvstore.open(missing, create=False)
    assert not (tmp_path / "typo").exists()


def test_existing_store_with_its_tmp_dir_removed_still_writes(tmp_path: pathlib.Path) -> None:
    with kvstore.open(tmp_path / "s", poll_interval_s=0) as db:
        db.put(b"a", b"1")
    (tmp_path / "s" / ".tmp").rmdir()
    with kvstore.open(tmp_path / "s", create=False, poll_interval_s=0) as db:
        db.put(b"b", b"2")
        assert db.get(b"b") == b"2"


@pytest.mark.parametrize("name", ["thesis-draft.txt", "sst/thesis-draft.txt", "notes/a.md"])
def test_refuses_to_create_a_store_in_a_non_empty_directory(tmp_path: pathlib.Path, name: str) -> None:
    target = tmp_path / "mine" / name
    target.parent.mkdir(parents=True)
    target.write_text("precious")
    with pytest.raises(StoreError, match="not empty and holds no lakekv store"):
        kvstore.open(tmp_path / "mine")
    assert target.read_text() == "precious"
    assert not (tmp_path / "mine" / "_lakekv_store").exists()


def test_gc_deletes_only_names_the_engine_writes(tmp_path: pathlib.Path) -> None:
    options = dict(poll_interval_s=0, background_maintenance=False, gc_grace_s=0, retention_window_s=0, gc_min_roots=1)
    with kvstore.open(tmp_path / "s", **options) as db:
        for n in range(5):
            db.put(b"k", b"%d" % n)
        db.flush()
        (tmp_path / "s" / "sst" / "thesis-draft.txt").write_text("precious")
        (tmp_path / "s" / "tree" / "keep.ipc").parent.mkdir(exist_ok=True)
        (tmp_path / "s" / "tree" / "keep.ipc").write_text("precious")
        orphan = f"sst/{uuid.uuid4().hex}.sst"
        db.objects.put(orphan, b"left by a crashed flush")
        deleted: set[str] = set()

        def orphan_collected() -> bool:  # once it is older than the clock's bound
            deleted.update(db.gc().deleted_ssts)
            return orphan in deleted

        wait_for(orphan_collected)
        assert "sst/thesis-draft.txt" not in deleted
    assert (tmp_path / "s" / "sst" / "thesis-draft.txt").read_text() == "precious"
    assert (tmp_path / "s" / "tree" / "keep.ipc").read_text() == "precious"


def test_a_memory_store_with_foreign_objects_is_refused_too() -> None:
    store = MemoryStore(f"memory://{uuid.uuid4().hex}")
    store.put("data/part-0.parquet", b"PAR1")
    with pytest.raises(StoreError, match="data/part-0.parquet"):
        kvstore.open(store)
