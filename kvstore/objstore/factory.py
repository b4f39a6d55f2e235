"""``open_store(url, **options)``: the one place that turns a URL into a backend.

URL forms:

* ``/abs/path``, ``rel/path``, ``file:///abs/path``: :class:`LocalStore`
  (directory created); options ``fsync``, ``conditional_create``;
* ``memory://name``: the process-wide :func:`named_memory_store` ``name``;
  option ``conditional_create`` (``fsync`` is accepted and ignored, as on S3);
* ``s3://bucket/prefix``: :class:`FsspecStore` over ``s3fs``; options
  ``endpoint_url``, ``key``, ``secret``, ``token``, ``region``, each falling
  back to the standard ``AWS_*`` environment variables.

Every form takes ``commit_store="lmdb:/path"``, which wraps the store in an
:class:`LmdbCommitStore`. Options may also be given as a URL query
(``s3://b/p?commit_store=lmdb:/var/lib/lakekv``), which is how a store's
``url`` attribute reopens it in another process. Unknown schemes and options
raise ``ValueError`` naming them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from kvstore.errors import ObjectStoreError
from kvstore.objstore.base import ObjectStore, validate_path
from kvstore.objstore.fsspec_store import FsspecStore
from kvstore.objstore.lmdb_commit import LmdbCommitStore
from kvstore.objstore.local import LocalStore
from kvstore.objstore.memory import named_memory_store
from kvstore.objstore.s3_direct_get import DirectGet

# fsync is a store option (kvstore.open documents it for every store): local
# stores honour it; memory and S3 accept and ignore it (S3 acknowledges a PUT
# only once it is durable; memory never is).
_COMMON_OPTIONS: Final = frozenset({"commit_store", "fsync"})
_SCHEME_OPTIONS: Final[dict[str, frozenset[str]]] = {
    "file": frozenset({"fsync", "conditional_create"}),
    "memory": frozenset({"conditional_create"}),
    "s3": frozenset({"endpoint_url", "key", "secret", "token", "region"}),
}
# The standard variables the AWS SDKs read, first match wins.
_S3_ENV: Final[dict[str, tuple[str, ...]]] = {
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "key": ("AWS_ACCESS_KEY_ID",),
    "secret": ("AWS_SECRET_ACCESS_KEY",),
    "token": ("AWS_SESSION_TOKEN",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}
_BUCKET_RE: Final = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_MEMORY_NAME_RE: Final = re.compile(r"^[A-Za-z0-9._\-]+$")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def open_store(url: str, *, create: bool = True, **options: Any) -> ObjectStore:
    """Open the object store a URL names.

    Args:
        url: see the module docstring for the accepted forms.
        create: create a local store's directory if it is missing; with
            False a missing directory reads as an empty store and nothing
            is created until the first write.
        **options: backend options; see the module docstring.

    Returns:
        The store; its ``url`` attribute reopens it.

    Raises:
        TypeError: ``url`` is not a str.
        ValueError: unknown scheme or option, bad option value, malformed URL.
        ImportError: ``s3://`` without the s3fs package installed.
        ObjectStoreError: the backend cannot be reached (e.g. no such bucket).
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    if not url:
        raise ValueError("url must not be empty")
    if "://" not in url:
        scheme, location, query = "file", url, dict[str, str]()
    else:
        scheme, location, query = _split_url(url)
    if scheme not in _SCHEME_OPTIONS:
        raise ValueError(f"unknown store URL scheme {scheme!r} in {url!r}; use file://, memory:// or s3://")
    merged = _merge_options(url, query, options)
    allowed = _SCHEME_OPTIONS[scheme] | _COMMON_OPTIONS
    unknown = sorted(set(merged) - allowed)
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} for a {scheme}:// store; known: {', '.join(sorted(allowed))}")
    commit_store = merged.pop("commit_store", None)
    if scheme != "file":
        _flag(merged, "fsync", True)  # validated, then ignored (see _COMMON_OPTIONS)
        merged.pop("fsync", None)

    store: ObjectStore
    if scheme == "file":
        store = LocalStore(
            location,
            fsync=_flag(merged, "fsync", True),
            conditional_create=_flag(merged, "conditional_create", True),
            create=create,
        )
    elif scheme == "memory":
        store = _open_memory(location, _flag(merged, "conditional_create", True))
    else:
        store = _open_s3(location, merged)
    if commit_store is None:
        return store
    return LmdbCommitStore(store, _lmdb_path(commit_store))


def _split_url(url: str) -> tuple[str, str, dict[str, str]]:
    """Return (scheme, location, query options) of a ``scheme://`` URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if parts.fragment:
        raise ValueError(f"store URL {url!r} must not have a #fragment")
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as exc:
        raise ValueError(f"malformed query in store URL {url!r}: {exc}") from exc
    query: dict[str, str] = {}
    for name, value in pairs:
        if name in query:
            raise ValueError(f"option {name!r} appears twice in store URL {url!r}")
        query[name] = value
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL {url!r} must be file:///absolute/path (host {parts.netloc!r} given)")
        location = unquote(parts.path)
        if not location.startswith("/"):
            raise ValueError(f"file URL {url!r} must name an absolute path")
    else:
        location = unquote(parts.netloc + parts.path)
    return scheme, location, query


def _merge_options(url: str, query: dict[str, str], options: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = dict(query)
    for name, value in options.items():
        if name in query and str(value) != query[name]:
            raise ValueError(f"option {name!r} is given both in the URL {url!r} and as an argument")
        merged[name] = value
    return merged


def _flag(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise ValueError(f"option {name!r} must be a boolean (true/false), got {value!r}")


def _text(options: dict[str, Any], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        for variable in _S3_ENV[name]:
            if os.environ.get(variable):
                return os.environ[variable]
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"option {name!r} must be a non-empty str, got {value!r}")
    return value


def _lmdb_path(spec: Any) -> str:
    if not isinstance(spec, str) or not spec.startswith("lmdb:") or len(spec) == len("lmdb:"):
        raise ValueError(f"option 'commit_store' must look like 'lmdb:/path/to/dir', got {spec!r}")
    return str(Path(spec[len("lmdb:") :]).expanduser().resolve())


def _open_memory(name: str, conditional_create: bool) -> ObjectStore:
    name = name.strip("/")
    if not _MEMORY_NAME_RE.match(name):
        raise ValueError(f"memory store name {name!r} must be non-empty letters, digits, '.', '_' or '-'")
    store = named_memory_store(name, conditional_create=conditional_create)
    if store.conditional_create != conditional_create:
        raise ValueError(
            f"memory://{name} is already open with conditional_create={store.conditional_create}"
        )
    return store


def _open_s3(location: str, options: dict[str, Any]) -> ObjectStore:
    bucket, _, prefix = location.partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET_RE.match(bucket):
        raise ValueError(f"s3 URL needs a valid bucket name, got {bucket!r}")
    if prefix:
        validate_path(prefix)  # rejects '..', empty parts and odd characters
    try:
        import s3fs  # imported lazily: only S3 users need it and it is slow to import
    except ImportError as exc:
        raise ImportError("s3:// store URLs need the s3fs package (pip install s3fs)") from exc
    region = _text(options, "region")
    fs = s3fs.S3FileSystem(
        key=_text(options, "key"),
        secret=_text(options, "secret"),
        token=_text(options, "token"),
        endpoint_url=_text(options, "endpoint_url"),
        client_kwargs={"region_name": region} if region else {},
        # Listings must be fresh (a new root file must show up at once) and
        # stores must not share one cached filesystem object.
        use_listings_cache=False,
        skip_instance_cache=True,
    )
    url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    store = FsspecStore(fs, f"{bucket}/{prefix}" if prefix else bucket, url, owns_fs=True,
                        direct_get=_direct_get(bucket, options))
    # Fail at open, not at the first commit, when the bucket is missing or the
    # credentials are wrong: s3fs would report a missing bucket as "not found"
    # for every object, which reads as an empty store.
    try:
        fs.info(bucket)
    except Exception as exc:  # s3fs raises anything; every failure here is fatal
        store.close()
        raise ObjectStoreError(f"cannot open {url}: bucket {bucket!r} is not reachable: {exc}") from exc
    return store


def _direct_get(bucket: str, options: dict[str, Any]) -> DirectGet | None:
    """Signed one-request GETs for an S3-compatible endpoint given in full (see s3_direct_get), else None."""
    endpoint, key, secret = _text(options, "endpoint_url"), _text(options, "key"), _text(options, "secret")
    if not (endpoint and key and secret) or _text(options, "token"):
        return None
    try:
        return DirectGet(endpoint, bucket, key, secret, _text(options, "region") or "us-east-1")
    except ValueError:
        return None  # an endpoint with a path: s3fs knows what to make of it
