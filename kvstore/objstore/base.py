"""The object-store protocol: the handful of primitives lakekv needs.

Every backend implements exactly these; helpers built on top live outside the
protocol. Paths are relative, ``/``-separated object names inside the store's
root (``sst/1f2e.sst``); :func:`validate_path` rejects anything that could
escape the root.

Error contract, for every backend:
  * a missing object raises :class:`FileNotFoundError` (and only then: a
    timeout or a permission problem is never reported as "not found");
  * any other backend failure raises :class:`kvstore.errors.ObjectStoreError`
    with the backend's exception as ``__cause__``;
  * ``put_if_absent`` returns ``False`` when the object already exists, and
    never overwrites it: it is the commit primitive.

Thread-safety: every backend may be called from many threads at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Protocol, runtime_checkable


@dataclass(frozen=True)
class ObjectMeta:
    """What ``head`` returns about an object.

    ``mtime`` is seconds since the epoch as the storage reports it; lakekv uses
    it as the authoritative commit time of a root file (``AS OF TIMESTAMP``).
    """

    path: str
    size: int
    mtime: float
    etag: str | None = None


@runtime_checkable
class ObjectStore(Protocol):
    """Primitive operations on immutable objects under one root."""

    url: str

    def get(self, path: str) -> bytes:
        """Return the whole object. Raises FileNotFoundError if missing."""
        ...

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)``; shorter only if the object ends first."""
        ...

    def head(self, path: str) -> ObjectMeta:
        """Return size, mtime and etag. Raises FileNotFoundError if missing."""
        ...

    def put(self, path: str, data: bytes) -> None:
        """Create or replace an object. Only used for names unique to the writer."""
        ...

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create the object unless it exists; True if we created it.

        Readers never observe a partially written object.
        """
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        """Yield every object whose path starts with ``prefix``, sorted by path."""
        ...

    def delete(self, path: str) -> None:
        """Delete the object; deleting a missing object is not an error."""
        ...

    def close(self) -> None:
        """Release resources (connections, handles). Idempotent."""
        ...


_PART_RE = re.compile(r"^[A-Za-z0-9._\-=+@]+$")


def validate_path(path: str) -> str:
    """Check an object path and return it unchanged.

    Allowed: relative ``/``-separated names made of letters, digits and
    ``. _ - = + @``; no empty parts, no ``.``/``..`` parts, no leading ``/``.

    >>> validate_path("sst/abc.sst")
    'sst/abc.sst'
    >>> validate_path("../etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: object path '../etc/passwd' has a forbidden part '..'

    Raises:
        TypeError: ``path`` is not a str.
        ValueError: the path is empty, absolute, or has a forbidden part.
    """
    if not isinstance(path, str):
        raise TypeError(f"object path must be str, not {type(path).__name__}")
    if not path:
        raise ValueError("object path must not be empty")
    if path.startswith("/"):
        raise ValueError(f"object path {path!r} must be relative to the store root")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"object path {path!r} has a forbidden part {part!r}")
        if not _PART_RE.match(part):
            raise ValueError(f"object path {path!r} has a forbidden character in {part!r}")
    return path


def validate_prefix(prefix: str) -> str:
    """Like :func:`validate_path` but allows ``""`` and a trailing ``/``."""
    if not isinstance(prefix, str):
        raise TypeError(f"list prefix must be str, not {type(prefix).__name__}")
    if prefix == "":
        return prefix
    validate_path(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


@runtime_checkable
class TempFileStore(Protocol):
    """A backend that publishes through temp files and can find those of dead
    writers (:class:`~kvstore.objstore.local.LocalStore`). Not part of
    :class:`ObjectStore`: only the engine's and the lakehouse's GC use it."""

    def stale_temp_files(self, cutoff: float) -> list[ObjectMeta]: ...

    def delete_temp_file(self, path: str) -> None: ...
