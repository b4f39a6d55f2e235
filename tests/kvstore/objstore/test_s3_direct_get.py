"""Signed one-request GETs (kvstore.objstore.s3_direct_get) against a real S3 server (SeaweedFS).

What they must never do: call a missing bucket or a refused request a missing
key (a store would read as empty), or answer with other bytes than s3fs.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from kvstore.errors import DirectGetUnavailableError
from kvstore.objstore import open_store
from kvstore.objstore.fsspec_store import FsspecStore
from kvstore.objstore.s3_direct_get import DirectGet
from kvstore.testing.seaweed import SeaweedServer

pytestmark = pytest.mark.s3


@pytest.fixture
def s3(seaweedfs: SeaweedServer) -> tuple[str, str, dict[str, Any]]:
    """(bucket, key prefix, options) of a fresh prefix."""
    url, options = seaweedfs.new_url()
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return bucket, prefix, options


def _direct(bucket: str, options: dict[str, Any], secret: str | None = None) -> DirectGet:
    return DirectGet(options["endpoint_url"], bucket, options["key"], secret or options["secret"], options.get("region") or "us-east-1")


def test_direct_gets_read_what_s3fs_wrote_and_none_for_a_missing_key(s3: tuple[str, str, dict[str, Any]]) -> None:
    bucket, prefix, options = s3
    store = open_store(f"s3://{bucket}/{prefix}", **options)
    objects = {"plain": b"x" * 10, "a=b+c@d/e.f_g-h": bytes(range(256)) * 40, "empty": b""}
    for path, data in objects.items():
        store.put(path, data)
    direct = _direct(bucket, options)
    try:
        for path, data in objects.items():
            assert direct.get(f"{prefix}/{path}") == data
        assert direct.get(f"{prefix}/missing") is None
        assert direct.usable
    finally:
        direct.close()
        store.close()


def test_a_forked_child_reads_on_its_own_connection_and_the_parent_still_reads(s3: tuple[str, str, dict[str, Any]]) -> None:
    # Parent and child read different objects at the same time: on one shared
    # socket their requests and responses would interleave (wrong bytes, or
    # errors), so each must have its own connection after the fork.
    bucket, prefix, options = s3
    store = open_store(f"s3://{bucket}/{prefix}", **options)
    store.put("parent", b"p" * 3000)
    store.put("child", b"c" * 7)
    direct = _direct(bucket, options)
    assert direct.get(f"{prefix}/parent") == b"p" * 3000  # the parent's kept connection is open now
    child = os.fork()
    if child == 0:  # the child never returns into pytest: exit code 0 only if every read was right
        try:
            ok = all(direct.get(f"{prefix}/child") == b"c" * 7 for _ in range(300))
            os._exit(0 if ok else 1)  # internals: a forked child must leave without running pytest's teardown
        except BaseException:
            os._exit(2)  # internals: a forked child must leave without running pytest's teardown
    try:
        for _ in range(300):
            assert direct.get(f"{prefix}/parent") == b"p" * 3000
    finally:
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    direct.close()
    store.close()


def test_a_missing_bucket_is_never_a_missing_key(s3: tuple[str, str, dict[str, Any]]) -> None:
    _, _, options = s3
    direct = _direct("no-such-bucket-here", options)
    with pytest.raises(DirectGetUnavailableError, match="status 404"):
        direct.get("anything")


def test_a_refused_signature_turns_direct_gets_off_and_the_store_still_reads(s3: tuple[str, str, dict[str, Any]]) -> None:
    bucket, prefix, options = s3
    store = open_store(f"s3://{bucket}/{prefix}", **options)
    store.put("k", b"value")
    wrong = _direct(bucket, options, secret="not-the-secret")
    with pytest.raises(DirectGetUnavailableError, match="status 403"):
        wrong.get(f"{prefix}/k")
    assert not wrong.usable
    with pytest.raises(DirectGetUnavailableError, match="turned off"):
        wrong.get(f"{prefix}/k")
    # A store whose direct GETs are refused reads through s3fs, with its errors.
    assert isinstance(store, FsspecStore)
    fallback = FsspecStore(store.fs, f"{bucket}/{prefix}", store.url, direct_get=_direct(bucket, options, secret="nope"))
    assert fallback.get("k") == b"value"
    with pytest.raises(FileNotFoundError):
        fallback.get("missing")
    store.close()


def test_an_unreachable_endpoint_is_unavailable_not_missing() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed when the block ends: nothing listens there
    direct = DirectGet(f"http://127.0.0.1:{port}", "bucket", "key", "secret", "us-east-1", timeout_s=2.0)
    with pytest.raises(DirectGetUnavailableError, match="ConnectionRefusedError"):
        direct.get("k")


@pytest.mark.parametrize("endpoint", ["ftp://host", "http://host/some/path", "http://", "host:9000"])
def test_an_endpoint_that_is_not_a_plain_http_host_is_a_value_error(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint_url must be"):
        DirectGet(endpoint, "bucket", "key", "secret", "us-east-1")
