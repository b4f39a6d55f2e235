"""open_store: URL forms, options, and rejection of bad URLs, options and paths."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kvstore.errors import ObjectStoreError
from kvstore.objstore import FsspecStore, LmdbCommitStore, LocalStore, MemoryStore, open_store


def test_plain_absolute_and_relative_paths_open_local_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(str(tmp_path / "abs"))
    assert isinstance(store, LocalStore) and store.root == tmp_path / "abs"
    assert (tmp_path / "abs").is_dir()
    monkeypatch.chdir(tmp_path)
    rel = open_store("rel/dir")
    assert isinstance(rel, LocalStore) and rel.root == tmp_path / "rel" / "dir"
    assert rel.url == (tmp_path / "rel" / "dir").as_uri()


def test_file_url_round_trips_through_url_attribute(tmp_path: Path) -> None:
    store = open_store((tmp_path / "with space").as_uri())
    store.put("a", b"1")
    again = open_store(store.url)
    assert isinstance(again, LocalStore) and again.root == tmp_path / "with space"
    assert again.get("a") == b"1"


@pytest.mark.parametrize(("given", "expected"), [(False, False), ("false", False), ("0", False), ("true", True), (True, True)])
def test_fsync_option(tmp_path: Path, given: object, expected: bool) -> None:
    store = open_store(str(tmp_path), fsync=given)
    assert isinstance(store, LocalStore) and store.fsync is expected


def test_options_in_query_string(tmp_path: Path) -> None:
    store = open_store(f"{tmp_path.as_uri()}?fsync=false&conditional_create=false")
    assert isinstance(store, LocalStore) and (store.fsync, store.conditional_create) == (False, False)


def test_memory_urls_share_a_store_per_name() -> None:
    name = f"factory-{uuid.uuid4().hex}"
    a, b = open_store(f"memory://{name}"), open_store(f"memory://{name}")
    assert isinstance(a, MemoryStore) and a is b
    assert a.url == f"memory://{name}"
    assert open_store(f"memory://{name}-other") is not a


def test_memory_conditional_create_mismatch_is_an_error() -> None:
    name = f"factory-{uuid.uuid4().hex}"
    open_store(f"memory://{name}")
    with pytest.raises(ValueError, match="conditional_create"):
        open_store(f"memory://{name}", conditional_create=False)


def test_commit_store_option_wraps_and_url_reopens(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "data"), commit_store=f"lmdb:{tmp_path / 'lmdb'}", conditional_create=False)
    assert isinstance(store, LmdbCommitStore) and isinstance(store.inner, LocalStore)
    assert store.put_if_absent("_v1", b"one")
    again = open_store(store.url)
    assert isinstance(again, LmdbCommitStore) and again.lmdb_path == str(tmp_path / "lmdb")
    assert again.put_if_absent("_v1", b"two") is False
    assert again.get("_v1") == b"one"
    again.close()
    store.close()


@pytest.mark.s3
def test_s3_url_builds_fsspec_store_from_options_and_env(seaweedfs, monkeypatch: pytest.MonkeyPatch) -> None:
    url, options = seaweedfs.new_url()
    store = open_store(url, **options)
    assert isinstance(store, FsspecStore) and store.url == url
    store.put("a", b"1")
    store.close()
    # The same store through the standard AWS_* variables only.
    monkeypatch.setenv("AWS_ENDPOINT_URL", options["endpoint_url"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret"])
    monkeypatch.setenv("AWS_REGION", options["region"])
    from_env = open_store(url + "/")
    assert from_env.get("a") == b"1"
    from_env.close()


@pytest.mark.s3
def test_s3_wrong_secret_fails_at_open(seaweedfs) -> None:
    url, options = seaweedfs.new_url()
    with pytest.raises(ObjectStoreError, match="not reachable"):
        open_store(url, **{**options, "secret": "wrong"})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("gs://bucket/x", "scheme 'gs'"),
        ("file://host/tmp/x", "host"),
        ("memory://", "memory store name"),
        ("memory://bad name", "memory store name"),
        ("s3://", "bucket"),
        ("s3://Bad_Bucket/x", "bucket"),
        ("s3://bucket/../escape", "forbidden part"),
        ("s3://bucket/a//b", "forbidden part"),
        ("memory://x#frag", "fragment"),
        ("memory://x?fsync=maybe", "option .fsync. must be a boolean"),
        ("memory://x?conditional_create=maybe", "boolean"),
        ("memory://x?a=1&a=2", "twice"),
        ("", "empty"),
    ],
)
def test_bad_urls_raise_value_error_naming_the_problem(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)


def test_unknown_and_misplaced_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'colour'"):
        open_store(str(tmp_path), colour="blue")
    with pytest.raises(ValueError, match="'endpoint_url'"):
        open_store(str(tmp_path), endpoint_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="commit_store"):
        open_store(str(tmp_path), commit_store="redis://x")
    with pytest.raises(ValueError, match="both in the URL"):
        open_store(f"{tmp_path.as_uri()}?fsync=true", fsync=False)


def test_url_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="url"):
        open_store(Path("/tmp"))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["../outside", "a/../../outside", "/etc/passwd", ".tmp/x"])
def test_object_paths_cannot_escape_the_root(tmp_path: Path, path: str) -> None:
    store = open_store(str(tmp_path / "root"))
    with pytest.raises(ValueError):
        store.put(path, b"x")
    with pytest.raises(ValueError):
        store.get(path)
    assert not (tmp_path / "outside").exists()
    assert sorted(os.listdir(tmp_path)) == ["root"]
