"""The object-store contract (kvstore/objstore/base.py), run against every backend."""

from __future__ import annotations

import os

import pytest

from kvstore.objstore import ObjectMeta, ObjectStore

BACKENDS = ["memory", "local", pytest.param("s3", marks=pytest.mark.s3), "lmdb"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, store_factory) -> ObjectStore:
    return store_factory(request.param)


def test_get_returns_what_put_stored(store: ObjectStore) -> None:
    store.put("sst/a.sst", b"hello")
    assert store.get("sst/a.sst") == b"hello"


def test_binary_and_empty_objects_round_trip(store: ObjectStore) -> None:
    data = bytes(range(256)) * 3 + b"\x00\r\n\xff"
    store.put("bin", data)
    store.put("empty", b"")
    assert store.get("bin") == data
    assert store.get("empty") == b""
    assert store.head("empty").size == 0


def test_put_accepts_bytearray_and_memoryview(store: ObjectStore) -> None:
    store.put("ba", bytearray(b"abc"))
    store.put("mv", memoryview(b"xyz"))
    assert (store.get("ba"), store.get("mv")) == (b"abc", b"xyz")


def test_large_object_round_trips(store: ObjectStore) -> None:
    data = os.urandom(5 * 1024 * 1024 + 17)
    assert store.put_if_absent("big/object", data)
    assert store.get("big/object") == data
    assert store.get_range("big/object", 4 * 1024 * 1024, 4 * 1024 * 1024 + 10) == data[4 * 1024 * 1024 :][:10]
    assert store.head("big/object").size == len(data)


@pytest.mark.parametrize(
    ("start", "end"),
    [(0, 1), (2, 5), (0, 10), (5, 10), (7, 100), (10, 20), (50, 60), (3, 3), (0, 0), (10, 10)],
    ids=["first", "middle", "whole", "tail", "past-end", "at-end", "beyond-end", "empty", "empty-0", "empty-at-end"],
)
def test_get_range(store: ObjectStore, start: int, end: int) -> None:
    data = b"0123456789"
    store.put("r", data)
    assert store.get_range("r", start, end) == data[start:end]


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4)])
def test_get_range_rejects_bad_bounds(store: ObjectStore, start: int, end: int) -> None:
    store.put("r", b"0123456789")
    with pytest.raises(ValueError, match="range"):
        store.get_range("r", start, end)


def test_head_reports_size_mtime_and_etag_changes(store: ObjectStore) -> None:
    store.put("h", b"12345")
    meta = store.head("h")
    assert isinstance(meta, ObjectMeta)
    assert (meta.path, meta.size) == ("h", 5)
    assert meta.mtime > 1_600_000_000  # seconds since the epoch, not ms or 0
    store.put("h", b"123456")
    assert store.head("h").size == 6


@pytest.mark.parametrize("op", ["get", "head", "get_range"])
def test_missing_object_raises_file_not_found(store: ObjectStore, op: str) -> None:
    store.put("dir/present", b"x")
    for path in ("absent", "dir/absent", "dir"):
        with pytest.raises(FileNotFoundError):
            if op == "get_range":
                store.get_range(path, 0, 1)
            else:
                getattr(store, op)(path)


def test_empty_range_of_missing_object_still_raises(store: ObjectStore) -> None:
    with pytest.raises(FileNotFoundError):
        store.get_range("absent", 0, 0)


def test_put_overwrites(store: ObjectStore) -> None:
    store.put("o", b"first")
    store.put("o", b"second, longer")
    assert store.get("o") == b"second, longer"


def test_put_if_absent_creates_once_and_never_overwrites(store: ObjectStore) -> None:
    assert store.put_if_absent("_root", b"winner") is True
    assert store.put_if_absent("_root", b"loser") is False
    assert store.get("_root") == b"winner"
    store.put("plain", b"by put")
    assert store.put_if_absent("plain", b"later") is False
    assert store.get("plain") == b"by put"


def test_put_if_absent_after_delete_creates_again(store: ObjectStore) -> None:
    assert store.put_if_absent("again", b"1")
    store.delete("again")
    assert store.put_if_absent("again", b"2")
    assert store.get("again") == b"2"


def test_list_is_sorted_and_filtered_by_prefix(store: ObjectStore) -> None:
    names = ["tree/b.ipc", "sst/2.sst", "_00100", "sst/10.sst", "_00010", "sst/1.sst", "tree/a.ipc", "sstx"]
    for i, name in enumerate(names):
        store.put(name, b"x" * i)
    assert [m.path for m in store.list()] == sorted(names)
    assert [m.path for m in store.list("sst/")] == ["sst/1.sst", "sst/10.sst", "sst/2.sst"]
    assert [m.path for m in store.list("sst")] == ["sst/1.sst", "sst/10.sst", "sst/2.sst", "sstx"]
    assert [m.path for m in store.list("_001")] == ["_00100"]
    assert [m.path for m in store.list("sst/1")] == ["sst/1.sst", "sst/10.sst"]
    assert list(store.list("nothing/")) == []
    sizes = {m.path: m.size for m in store.list()}
    assert sizes == {name: i for i, name in enumerate(names)}


def test_list_includes_put_if_absent_objects(store: ObjectStore) -> None:
    store.put_if_absent("_v1", b"a")
    store.put("sst/x", b"b")
    assert [m.path for m in store.list()] == ["_v1", "sst/x"]


def test_delete_removes_and_missing_is_ok(store: ObjectStore) -> None:
    store.put("d/x", b"1")
    store.put("d/y", b"2")
    store.delete("d/x")
    store.delete("d/x")
    store.delete("never/existed")
    with pytest.raises(FileNotFoundError):
        store.get("d/x")
    assert [m.path for m in store.list()] == ["d/y"]


@pytest.mark.parametrize("path", ["", "/abs", "../escape", "a/../b", "a//b", "a/./b", "a/", "sp ace", "nul\x00"])
def test_invalid_paths_raise_value_error(store: ObjectStore, path: str) -> None:
    for call in (lambda: store.get(path), lambda: store.put(path, b"x"), lambda: store.put_if_absent(path, b"x"),
                 lambda: store.head(path), lambda: store.delete(path), lambda: store.get_range(path, 0, 1)):
        with pytest.raises(ValueError):
            call()


@pytest.mark.parametrize("path", [None, b"bytes", 3])
def test_non_str_paths_raise_type_error(store: ObjectStore, path: object) -> None:
    with pytest.raises(TypeError):
        store.get(path)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.put_if_absent(path, b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["/abs", "../x", "a//"])
def test_invalid_list_prefix_raises(store: ObjectStore, prefix: str) -> None:
    with pytest.raises(ValueError):
        list(store.list(prefix))


def test_store_has_url(store: ObjectStore) -> None:
    assert isinstance(store.url, str) and "://" in store.url
