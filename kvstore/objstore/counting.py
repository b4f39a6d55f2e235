"""A wrapper that counts calls per primitive: used by tests and benchmarks to
prove I/O budgets ("a point read is one range GET", "a commit is one PUT")."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Iterator

from kvstore.objstore.base import ObjectMeta, ObjectStore


class CountingStore:
    """Delegates every call to ``inner`` and counts it by primitive name.

    ``counts`` is a snapshot copy; ``paths`` records ``(op, path)`` in call order
    when ``record_paths`` is set. Thread-safe.
    """

    def __init__(self, inner: ObjectStore, *, record_paths: bool = False) -> None:
        self.inner = inner
        self.url = inner.url
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._record_paths = record_paths
        self.paths: list[tuple[str, str]] = []

    def _count(self, op: str, path: str) -> None:
        with self._lock:
            self._counts[op] += 1
            if self._record_paths:
                self.paths.append((op, path))

    @property
    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self.paths.clear()

    def get(self, path: str) -> bytes:
        self._count("get", path)
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        self._count("get_range", path)
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectMeta:
        self._count("head", path)
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> None:
        self._count("put", path)
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self._count("put_if_absent", path)
        return self.inner.put_if_absent(path, data)

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        self._count("list", prefix)
        return self.inner.list(prefix)

    def delete(self, path: str) -> None:
        self._count("delete", path)
        self.inner.delete(path)

    def close(self) -> None:
        self.inner.close()
