"""In-memory object store for tests and benchmarks.

State is per instance (two ``MemoryStore()`` never share objects); the
``memory://name`` URL form shares one instance per name inside a process via
:func:`named_memory_store`, so a test can "reopen" a store by URL.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Callable, Iterator

from kvstore.errors import ObjectStoreError
from kvstore.objstore.base import ObjectMeta, validate_path, validate_prefix


class MemoryStore:
    """Dict-backed store; one lock makes every primitive atomic."""

    def __init__(
        self, url: str = "memory://", *, conditional_create: bool = True, clock: Callable[[], float] = time.time
    ) -> None:
        # conditional_create=False models an object store without If-None-Match
        # (put_if_absent is refused); the LMDB commit store wraps such stores.
        # clock stamps objects (ObjectMeta.mtime): a test can run the storage's
        # clock ahead to make what it wrote old, however slow the machine is.
        self.url = url
        self.conditional_create = conditional_create
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[str, tuple[bytes, float]] = {}

    def get(self, path: str) -> bytes:
        validate_path(path)
        with self._lock:
            entry = self._objects.get(path)
        if entry is None:
            raise FileNotFoundError(path)
        return entry[0]

    def get_range(self, path: str, start: int, end: int) -> bytes:
        if start < 0 or end < start:
            raise ValueError(f"invalid range [{start}, {end}) for {path!r}")
        return self.get(path)[start:end]

    def head(self, path: str) -> ObjectMeta:
        validate_path(path)
        with self._lock:
            entry = self._objects.get(path)
        if entry is None:
            raise FileNotFoundError(path)
        data, mtime = entry
        return ObjectMeta(path, len(data), mtime, hashlib.md5(data).hexdigest())

    def put(self, path: str, data: bytes) -> None:
        validate_path(path)
        data = bytes(data)
        with self._lock:
            self._objects[path] = (data, self._clock())

    def put_if_absent(self, path: str, data: bytes) -> bool:
        validate_path(path)
        if not self.conditional_create:
            raise ObjectStoreError(
                f"{self.url} was opened without conditional create; "
                "wrap it in an LMDB commit store (objstore.lmdb_commit)"
            )
        data = bytes(data)
        with self._lock:
            if path in self._objects:
                return False
            self._objects[path] = (data, self._clock())
            return True

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        validate_prefix(prefix)
        with self._lock:
            items = sorted((p, e) for p, e in self._objects.items() if p.startswith(prefix))
        for path, (data, mtime) in items:
            yield ObjectMeta(path, len(data), mtime, None)

    def delete(self, path: str) -> None:
        validate_path(path)
        with self._lock:
            self._objects.pop(path, None)

    def close(self) -> None:
        """Nothing to release; objects stay readable for later handles."""


_named: dict[str, MemoryStore] = {}
_named_lock = threading.Lock()


def named_memory_store(name: str, *, conditional_create: bool = True) -> MemoryStore:
    """Return the process-wide store for ``memory://name`` (created on first use)."""
    with _named_lock:
        store = _named.get(name)
        if store is None:
            store = _named[name] = MemoryStore(f"memory://{name}", conditional_create=conditional_create)
        return store
