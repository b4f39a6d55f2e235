"""The contract every key-value store handle keeps, embedded or remote.

:class:`KeyValueStore` is what :func:`kvstore.open` returns: an embedded
:class:`~kvstore.store.Store`, or the handle a registered scheme's opener
builds (``http(s)://``: :class:`kvclient.remote.RemoteStore`, a client of
``lakekv serve``; see :mod:`kvstore.registry`). It lists what both offer with
the same meaning, the same arguments and the same exceptions: code written
against it runs on either. What only an embedded handle offers (snapshots,
Arrow scans, maintenance, time travel) is on :class:`~kvstore.store.Store`
alone; narrow with ``isinstance(db, kvstore.Store)`` before using it.

The transactions, leases and watches such a store hands out have protocols
of their own (:class:`KeyValueTransaction`, :class:`KeyValueLease`,
:class:`KeyValueWatch`). Each method's documentation is on the embedded
class (:class:`~kvstore.store.Store`, :class:`~kvstore.txn.Transaction`,
:class:`~kvstore.leases.Lease`, :class:`~kvstore.watch.Watch`).

The four protocols are ``runtime_checkable``: ``isinstance`` checks that the
names exist, not their signatures (mypy checks those). On Python 3.11 it
also reads each property, which on a remote store is a request.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Callable, Iterator, Protocol, Self, Sequence, TypeVar, runtime_checkable

from kvstore.batch import WriteBatch
from kvstore.oracle import SERIALIZABLE
from kvstore.watch import WatchEvent

T = TypeVar("T")


@runtime_checkable
class KeyValueTransaction(Protocol):
    """One transaction of a :class:`KeyValueStore`; used by one thread at a time.

    ``state`` is ``"active"``, ``"committed"``, ``"aborted"``, ``"failed"``,
    ``"rolled back"`` or ``"expired"``. As a context manager it commits on a
    normal exit and rolls back on an exception.
    """

    @property
    def isolation(self) -> str: ...

    @property
    def start_seq(self) -> int: ...

    @property
    def state(self) -> str: ...

    def get(self, key: bytes) -> bytes | None: ...

    def get_for_update(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]: ...

    def commit(self) -> int: ...

    def rollback(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


@runtime_checkable
class KeyValueLease(Protocol):
    """A granted lease: ``keepalive()`` before it expires, ``revoke()`` to end it with its keys."""

    @property
    def id(self) -> int | str: ...

    @property
    def ttl(self) -> float: ...

    def keepalive(self) -> float: ...

    def remaining(self) -> float: ...

    def revoke(self) -> None: ...

    def keys(self) -> list[bytes]: ...


@runtime_checkable
class KeyValueWatch(Protocol):
    """An iterator of :class:`~kvstore.watch.WatchEvent`; ``close()`` (from any thread) ends it."""

    @property
    def next_version(self) -> int | None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def __next__(self) -> WatchEvent: ...


@runtime_checkable
class KeyValueStore(Protocol):
    """A store handle, embedded or remote; see the module docstring. Thread-safe."""

    @property
    def url(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def seq(self) -> int: ...

    def refresh(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    # -- writes ---------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl: float | None = None, lease: int | str | None = None) -> int: ...

    def delete(self, key: bytes) -> int: ...

    def write(self, batch: WriteBatch) -> int: ...

    # -- reads ----------------------------------------------------------------

    def get(self, key: bytes, consistency: str | None = None) -> bytes | None: ...

    def get_with_revision(
        self, key: bytes, consistency: str | None = None
    ) -> tuple[bytes | None, int | None]: ...

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
        consistency: str | None = None,
    ) -> Iterator[tuple[bytes, bytes]]: ...

    # -- leases and watches ---------------------------------------------------

    def grant_lease(self, ttl: float) -> KeyValueLease: ...

    def lease(self, lease_id: int | str) -> KeyValueLease: ...

    def leases(self) -> Sequence[KeyValueLease]: ...

    def watch(
        self, prefix: bytes = b"", start: int | None = None, end: int | None = None, *, start_revision: int | None = None
    ) -> KeyValueWatch: ...

    # -- transactions ---------------------------------------------------------

    def begin(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> KeyValueTransaction: ...

    def transaction(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> AbstractContextManager[KeyValueTransaction]: ...

    def run(
        self,
        fn: Callable[[KeyValueTransaction], T],
        isolation: str = SERIALIZABLE,
        retries: int = 10,
        ttl: float | None = None,
    ) -> T: ...


class StoreOpener(Protocol):
    """What a scheme registered in :mod:`kvstore.registry` names: builds a handle on ``url``.

    ``create`` and ``**options`` are those given to :func:`kvstore.open`; an
    opener rejects options it does not know with TypeError or ValueError.
    """

    def __call__(self, url: str, create: bool = True, **options: Any) -> KeyValueStore: ...


__all__ = ["KeyValueLease", "KeyValueStore", "KeyValueTransaction", "KeyValueWatch", "StoreOpener"]
