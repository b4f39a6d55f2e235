"""A base for object-store wrappers: forward every primitive, override a few.

A wrapper that changes one or two primitives (records the paths it puts,
translates a miss into another error, holds a call back in a test) subclasses
:class:`ForwardingStore` and overrides only those, instead of spelling out
the whole protocol again.
"""

from __future__ import annotations

from typing import Iterator

from kvstore.objstore.base import ObjectMeta, ObjectStore


class ForwardingStore:
    """Forwards every :class:`~kvstore.objstore.base.ObjectStore` primitive to ``inner``.

    ``url`` is ``inner``'s; ``close`` closes ``inner`` (override it where the
    wrapper does not own the store).
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url

    def get(self, path: str) -> bytes:
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectMeta:
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> None:
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        return self.inner.put_if_absent(path, data)

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        return self.inner.list(prefix)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def close(self) -> None:
        self.inner.close()
