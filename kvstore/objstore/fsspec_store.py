"""Object store over any fsspec filesystem; S3 (through s3fs) is the main user.

``put_if_absent`` is ``fs.pipe_file(path, data, mode="create")``, which s3fs
sends as a PUT with ``If-None-Match: *``. Servers disagree on how they report
the lost race, and s3fs translates their answers differently:

* AWS S3 answers 412 with ``Condition: If-None-Match``: s3fs raises
  ``FileExistsError``;
* SeaweedFS (and others) answer 412 ``PreconditionFailed`` without the
  condition header: s3fs raises ``OSError(EINVAL)`` whose ``__cause__`` is the
  botocore ``ClientError``;
* AWS answers 409 ``ConditionalRequestConflict`` while another conditional
  write of the same key is in flight: the outcome is undecided, so we retry.

:func:`classify_error` looks through the whole exception chain for these
codes. Everything else becomes :class:`ObjectStoreError` with the original
as cause; only a genuine 404 / ``FileNotFoundError`` is reported as missing.

Conditional create is atomic only where the filesystem makes it so: on S3
the server decides; fsspec's generic ``mode="create"`` (local, memory
filesystems) checks and then writes, so use :class:`LocalStore` for local
directories.

Note that s3fs retries timeouts internally. If a conditional PUT timed out
after the server had created the object, the retry sees 412 and we report a
lost race for a write that in fact landed; the engine resolves this the same
way as any ambiguous commit, by reading the object back and comparing its
commit id.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import time
from typing import Any, Iterator

from kvstore.errors import DirectGetUnavailableError, ObjectStoreError
from kvstore.objstore.base import ObjectMeta, validate_path, validate_prefix
from kvstore.objstore.local import check_range
from kvstore.objstore.s3_direct_get import DirectGet

log = logging.getLogger(__name__)

# 409 ConditionalRequestConflict means "another conditional write to this key
# is in progress": back off briefly and ask again. Eight tries with doubling
# backoff starting at 20 ms wait at most ~5 s in total.
CONFLICT_RETRIES = 8
CONFLICT_BACKOFF_S = 0.02

_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412"})
_CONFLICT_CODES = frozenset({"ConditionalRequestConflict", "409"})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_INVALID_RANGE_CODES = frozenset({"InvalidRange", "416"})


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """Yield ``exc`` and its causes/contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _codes(exc: BaseException) -> set[str]:
    """Error codes and HTTP statuses carried by botocore errors in the chain."""
    codes: set[str] = set()
    for err in _chain(exc):
        response = getattr(err, "response", None)
        if not isinstance(response, dict):
            continue
        code = response.get("Error", {}).get("Code")
        if code:
            codes.add(str(code))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status:
            codes.add(str(status))
    return codes


def classify_error(exc: BaseException) -> str:
    """Name what a failed fsspec call means for us.

    Returns one of ``"exists"`` (lost conditional-create race), ``"conflict"``
    (409, retry), ``"not_found"``, ``"invalid_range"`` or ``"other"``.

    >>> classify_error(FileExistsError("taken"))
    'exists'
    >>> classify_error(TimeoutError("read timed out"))
    'other'

    """
    codes = _codes(exc)
    if isinstance(exc, FileExistsError) or codes & _PRECONDITION_CODES:
        return "exists"
    if codes & _CONFLICT_CODES:
        return "conflict"
    if codes & _INVALID_RANGE_CODES:
        return "invalid_range"
    if "NoSuchBucket" in codes:
        # s3fs maps a missing bucket to FileNotFoundError too; for us it is a
        # misconfiguration, and reporting "not found" would make a store look
        # empty.
        return "other"
    if isinstance(exc, FileNotFoundError) or codes & _NOT_FOUND_CODES:
        return "not_found"
    return "other"


class FsspecStore:
    """Objects under ``root`` of an fsspec filesystem ``fs``.

    Args:
        fs: the filesystem (e.g. ``s3fs.S3FileSystem``). For S3, create it with
            ``use_listings_cache=False``; this class also invalidates the cache
            before listings and heads so that both are always fresh.
        root: path of the store's root inside ``fs`` (``bucket/prefix``).
        url: the URL that reopens this store (``s3://bucket/prefix``).
        owns_fs: close the filesystem's session in :meth:`close`.
        direct_get: whole-object GETs of ``root``'s bucket in one signed
            request (:mod:`kvstore.objstore.s3_direct_get`); whatever it cannot
            answer goes to ``fs``. Only when ``root`` is ``bucket[/prefix]`` of it.

    Thread-safety: fsspec's async filesystems run every call on their own event
    loop thread, so concurrent calls from many threads are fine.
    """

    def __init__(self, fs: Any, root: str, url: str, *, owns_fs: bool = False, direct_get: DirectGet | None = None) -> None:
        if not isinstance(root, str) or not root.strip("/"):
            raise ValueError(f"root must be a non-empty path inside the filesystem, got {root!r}")
        self.fs = fs
        self.root = root.strip("/")
        self.url = url
        self._owns_fs = owns_fs
        self._direct = direct_get
        self._key_prefix = self.root.partition("/")[2]  # the objects' keys inside the bucket start with it
        # s3fs's find() filters by key prefix on the server; other filesystems
        # list the directory and we filter here.
        self._server_prefix = "prefix" in inspect.signature(fs.find).parameters
        # s3fs's whole-object cat_file first HEADs the object to decide on a
        # concurrent ranged download; lakekv objects are small enough that one
        # GET is faster, so ask for a single request where that is possible.
        self._get_kwargs = {"max_concurrency": 1} if "max_concurrency" in inspect.signature(fs.cat_file).parameters else {}

    def _full(self, path: str) -> str:
        return f"{self.root}/{validate_path(path)}"

    def _fail(self, op: str, path: str, exc: BaseException) -> ObjectStoreError:
        return ObjectStoreError(f"{op} {path!r} on {self.url} failed: {type(exc).__name__}: {exc}")

    def get(self, path: str) -> bytes:
        full = self._full(path)
        if self._direct is not None and self._direct.usable:
            try:
                found = self._direct.get(f"{self._key_prefix}/{path}" if self._key_prefix else path)
            except DirectGetUnavailableError as exc:
                # s3fs answers below, with its own errors (a missing bucket, credentials, the network).
                log.debug("direct GET of %s unavailable (%s): asking s3fs", path, exc)
            else:
                if found is None:
                    raise FileNotFoundError(path)
                return found
        try:
            return bytes(self.fs.cat_file(full, **self._get_kwargs))
        except Exception as exc:  # fsspec backends raise anything; classify below
            if classify_error(exc) == "not_found" or isinstance(exc, IsADirectoryError):
                raise FileNotFoundError(path) from exc
            raise self._fail("get", path, exc) from exc

    def get_range(self, path: str, start: int, end: int) -> bytes:
        check_range(path, start, end)
        full = self._full(path)
        if start == end:
            # An empty HTTP range is not expressible (bytes=5-4 is ignored and
            # returns the whole object); still report a missing object.
            self.head(path)
            return b""
        try:
            return bytes(self.fs.cat_file(full, start=start, end=end))
        except Exception as exc:  # fsspec backends raise anything; classify below
            kind = classify_error(exc)
            if kind == "not_found":
                raise FileNotFoundError(path) from exc
            if kind == "invalid_range":
                # 416: the object exists but starts before ``start``.
                return b""
            raise self._fail("get_range", path, exc) from exc

    def head(self, path: str) -> ObjectMeta:
        full = self._full(path)
        try:
            self.fs.invalidate_cache(full)
            info = self.fs.info(full)
        except Exception as exc:  # fsspec backends raise anything; classify below
            if classify_error(exc) == "not_found":
                raise FileNotFoundError(path) from exc
            raise self._fail("head", path, exc) from exc
        if info.get("type") != "file":
            raise FileNotFoundError(path)  # a "directory" (key prefix) is no object
        return self._meta(path, info)

    def put(self, path: str, data: bytes) -> None:
        full = self._full(path)
        _check_data(path, data)
        try:
            self.fs.pipe_file(full, bytes(data))
        except Exception as exc:  # fsspec backends raise anything
            raise self._fail("put", path, exc) from exc

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create with ``If-None-Match: *``; False on 412, retries on 409."""
        full = self._full(path)
        _check_data(path, data)
        payload = bytes(data)
        backoff = CONFLICT_BACKOFF_S
        for attempt in range(CONFLICT_RETRIES):
            try:
                self.fs.pipe_file(full, payload, mode="create")
                return True
            except Exception as exc:  # fsspec backends raise anything; classify below
                kind = classify_error(exc)
                if kind == "exists":
                    return False
                if kind != "conflict" or attempt == CONFLICT_RETRIES - 1:
                    raise self._fail("put_if_absent", path, exc) from exc
            time.sleep(backoff)
            backoff *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        validate_prefix(prefix)
        if "/" in prefix:
            directory, name_prefix = prefix.rsplit("/", 1)
            base = f"{self.root}/{directory}"
        else:
            base, name_prefix = self.root, prefix
        wanted = f"{self.root}/{prefix}"
        try:
            self.fs.invalidate_cache(base)
            if self._server_prefix:
                found = self.fs.find(base, detail=True, prefix=name_prefix)
            else:
                found = self.fs.find(base, detail=True)
        except Exception as exc:  # fsspec backends raise anything; classify below
            if classify_error(exc) == "not_found":
                return iter(())  # no directory, no objects (a missing bucket is "other")
            raise self._fail("list", prefix, exc) from exc
        metas = []
        for name, info in found.items():
            name = name.strip("/")
            if info.get("type") != "file" or not name.startswith(wanted):
                continue
            metas.append(self._meta(name[len(self.root) + 1 :], info))
        metas.sort(key=lambda meta: meta.path)
        return iter(metas)

    def delete(self, path: str) -> None:
        full = self._full(path)
        try:
            self.fs.rm_file(full)
        except Exception as exc:  # fsspec backends raise anything; classify below
            if classify_error(exc) == "not_found":
                return
            raise self._fail("delete", path, exc) from exc

    def close(self) -> None:
        """Close the S3 session if this store created the filesystem."""
        if self._direct is not None:
            self._direct.close()
        if not self._owns_fs:
            return
        client = getattr(self.fs, "_s3", None)
        close_session = getattr(type(self.fs), "close_session", None)
        if client is not None and close_session is not None:
            close_session(self.fs.loop, client)
            self.fs._s3 = None
        self._owns_fs = False

    @staticmethod
    def _meta(path: str, info: dict[str, Any]) -> ObjectMeta:
        mtime = info.get("LastModified", info.get("mtime", info.get("created")))
        if isinstance(mtime, dt.datetime):
            mtime = mtime.timestamp()
        if mtime is None:
            raise ObjectStoreError(f"backend reports no modification time for {path!r}")
        etag = info.get("ETag") or info.get("etag")
        return ObjectMeta(path, int(info["size"]), float(mtime), str(etag).strip('"') if etag else None)


def _check_data(path: str, data: object) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data for {path!r} must be bytes-like, not {type(data).__name__}")
