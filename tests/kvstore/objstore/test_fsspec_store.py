"""FsspecStore error mapping: lost races, 409 retries, timeouts, 404 vs. missing bucket.

Stub filesystems raise exactly what s3fs raises (botocore ClientError passed
through s3fs's own translate_boto_error), so every server flavour is covered
without a server; a moto server checks the AWS flavour end to end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError
from s3fs.errors import translate_boto_error

from kvstore.errors import ObjectStoreError
from kvstore.objstore import FsspecStore, open_store
from kvstore.objstore import fsspec_store
from kvstore.objstore.fsspec_store import classify_error


def s3_error(code: str, status: int, operation: str = "PutObject", **extra: str) -> Exception:
    """What s3fs raises for an S3 error response."""
    response: Any = {"Error": {"Code": code, "Message": f"{code} message", **extra},
                     "ResponseMetadata": {"HTTPStatusCode": status}}
    return translate_boto_error(ClientError(response, operation))


AWS_LOST_RACE = lambda: s3_error("PreconditionFailed", 412, Condition="If-None-Match")  # noqa: E731
SEAWEED_LOST_RACE = lambda: s3_error("PreconditionFailed", 412)  # noqa: E731
CONFLICT_409 = lambda: s3_error("ConditionalRequestConflict", 409)  # noqa: E731
NOT_FOUND = lambda: s3_error("NoSuchKey", 404, "GetObject")  # noqa: E731
NO_BUCKET = lambda: s3_error("NoSuchBucket", 404, "GetObject")  # noqa: E731
INVALID_RANGE = lambda: s3_error("InvalidRange", 416, "GetObject")  # noqa: E731
TIMEOUTS = {
    "read-timeout": lambda: ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
    "connect-timeout": lambda: ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"),
    "asyncio-timeout": lambda: asyncio.TimeoutError(),
    "server-500": lambda: s3_error("InternalError", 500, "GetObject"),
    "forbidden": lambda: s3_error("AccessDenied", 403, "GetObject"),
}


class StubFS:
    """Raises the queued errors (one per call), then behaves like an empty S3 bucket."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[str] = []
        self.objects: dict[str, bytes] = {}

    def _next(self, op: str) -> None:
        self.calls.append(op)
        if self.errors:
            raise self.errors.pop(0)

    def pipe_file(self, path: str, data: bytes, mode: str = "overwrite") -> None:
        self._next("pipe_file")
        self.objects[path] = data

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        self._next("cat_file")
        return self.objects[path][start:end]

    def info(self, path: str) -> dict[str, Any]:
        self._next("info")
        return {"name": path, "size": len(self.objects[path]), "type": "file", "LastModified": None, "mtime": 1.7e9}

    def find(self, path: str, detail: bool = False, prefix: str = "") -> dict[str, Any]:
        self._next("find")
        return {}

    def rm_file(self, path: str) -> None:
        self._next("rm_file")

    def invalidate_cache(self, path: str | None = None) -> None:
        return None


def stub_store(*errors: Exception) -> tuple[FsspecStore, StubFS]:
    fs = StubFS(*errors)
    return FsspecStore(fs, "bucket/prefix", "s3://bucket/prefix"), fs


@pytest.mark.parametrize("lost", [AWS_LOST_RACE, SEAWEED_LOST_RACE, lambda: FileExistsError("exists")],
                         ids=["aws-412-condition", "seaweedfs-412", "file-exists"])
def test_lost_race_is_false_on_every_flavour(lost: Any) -> None:
    store, fs = stub_store(lost())
    assert store.put_if_absent("_root", b"x") is False
    assert fs.calls == ["pipe_file"]


def test_409_conflict_is_retried_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsspec_store, "CONFLICT_BACKOFF_S", 0.0)
    store, fs = stub_store(CONFLICT_409(), CONFLICT_409())
    assert store.put_if_absent("_root", b"x") is True
    assert fs.calls == ["pipe_file"] * 3


def test_409_conflict_then_lost_race_is_false(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsspec_store, "CONFLICT_BACKOFF_S", 0.0)
    store, _ = stub_store(CONFLICT_409(), SEAWEED_LOST_RACE())
    assert store.put_if_absent("_root", b"x") is False


def test_409_forever_gives_up_with_object_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsspec_store, "CONFLICT_BACKOFF_S", 0.0)
    store, fs = stub_store(*(CONFLICT_409() for _ in range(fsspec_store.CONFLICT_RETRIES)))
    with pytest.raises(ObjectStoreError, match="put_if_absent") as info:
        store.put_if_absent("_root", b"x")
    assert classify_error(info.value.__cause__) == "conflict"
    assert len(fs.calls) == fsspec_store.CONFLICT_RETRIES


@pytest.mark.parametrize("make_error", list(TIMEOUTS.values()), ids=list(TIMEOUTS))
@pytest.mark.parametrize("op", ["get", "get_range", "head", "put", "put_if_absent", "list", "delete"])
def test_transport_errors_are_object_store_errors_never_not_found(op: str, make_error: Any) -> None:
    error = make_error()
    store, _ = stub_store(error)
    calls = {"get": lambda: store.get("a"), "get_range": lambda: store.get_range("a", 0, 4), "head": lambda: store.head("a"),
             "put": lambda: store.put("a", b"x"), "put_if_absent": lambda: store.put_if_absent("a", b"x"),
             "list": lambda: list(store.list("a")), "delete": lambda: store.delete("a")}
    with pytest.raises(ObjectStoreError) as info:
        calls[op]()
    assert not isinstance(info.value, FileNotFoundError)
    assert info.value.__cause__ is error


@pytest.mark.parametrize("op", ["get", "get_range", "head"])
def test_404_is_file_not_found(op: str) -> None:
    store, _ = stub_store(NOT_FOUND())
    with pytest.raises(FileNotFoundError):
        store.get_range("a", 0, 3) if op == "get_range" else getattr(store, op)("a")


def test_delete_of_missing_object_is_fine() -> None:
    store, _ = stub_store(NOT_FOUND())
    store.delete("a")


def test_missing_bucket_is_not_reported_as_missing_object() -> None:
    error = NO_BUCKET()
    assert isinstance(error, FileNotFoundError)  # what s3fs makes of it...
    store, _ = stub_store(error)
    with pytest.raises(ObjectStoreError):  # ...and what we make of it
        store.get("a")


def test_invalid_range_past_the_end_is_empty() -> None:
    store, fs = stub_store(INVALID_RANGE())
    assert store.get_range("a", 100, 200) == b""
    assert fs.calls == ["cat_file"]


def test_classify_error_follows_the_cause_chain() -> None:
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = SEAWEED_LOST_RACE()
    assert classify_error(wrapped) == "exists"
    assert classify_error(OSError(5, "io")) == "other"


def test_root_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="root"):
        FsspecStore(StubFS(), "/", "s3://")


@pytest.fixture(scope="module")
def moto_url() -> Iterator[tuple[str, dict[str, str]]]:
    """A moto S3 server on 127.0.0.1 (AWS flavour of error responses) with one bucket."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", "key": "moto", "secret": "moto", "region": "us-east-1"}
        import s3fs

        s3fs.S3FileSystem(key="moto", secret="moto", endpoint_url=options["endpoint_url"], skip_instance_cache=True).mkdir("motobucket")
        yield "s3://motobucket/store", options
    finally:
        server.stop()


def test_moto_aws_flavour_end_to_end(moto_url: tuple[str, dict[str, str]]) -> None:
    url, options = moto_url
    store = open_store(url, **options)
    try:
        assert store.put_if_absent("_root", b"first") is True
        assert store.put_if_absent("_root", b"second") is False
        assert store.get("_root") == b"first"
        assert store.get_range("_root", 1, 3) == b"ir"
        assert [m.path for m in store.list("_")] == ["_root"]
        with pytest.raises(FileNotFoundError):
            store.head("missing")
    finally:
        store.close()


def test_open_store_fails_fast_on_missing_bucket(moto_url: tuple[str, dict[str, str]]) -> None:
    _, options = moto_url
    with pytest.raises(ObjectStoreError, match="no-such-bucket"):
        open_store("s3://no-such-bucket/x", **options)
