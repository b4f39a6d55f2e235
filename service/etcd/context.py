"""What every etcd service module shares: :class:`EtcdContext` and the error mapping (see :mod:`service.etcd.server`)."""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

import grpc
import grpc.aio

from kvstore.errors import StoreError
from kvstore.store import Store
from service.config import ServerConfig
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2
from service.etcd.keyspace import Keyspace

_log = logging.getLogger("lakekv.etcd")

T = TypeVar("T")


@dataclass(frozen=True)
class EtcdContext:
    """What every etcd service shares: the config, the store and the key model."""

    config: ServerConfig
    store: Store
    keyspace: Keyspace
    executor: ThreadPoolExecutor
    cluster_id: int
    member_id: int
    # Called (on the loop) when the server stops, before in-flight calls are awaited: a
    # streaming service ends its open streams here, so that long-lived streams (watches,
    # keepalives) do not hold a graceful stop for its whole grace period.
    on_stop: list[Callable[[], None]] = field(default_factory=list)
    # Coroutines the server awaits once it has stopped serving (services' background tasks end there).
    after_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Where clients reach this server (``http://host:port``), filled in once the port is bound.
    client_urls: list[str] = field(default_factory=list)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread (store calls block on storage)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def header(self, revision: int) -> rpc_pb2.ResponseHeader:
        return rpc_pb2.ResponseHeader(
            cluster_id=self.cluster_id, member_id=self.member_id, revision=revision, raft_term=1
        )


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """etcd's status for an error a handler raised, or None for a bug."""
    if isinstance(exc, errors.EtcdError):
        return exc.code, exc.message
    if isinstance(exc, (ValueError, TypeError)):
        return grpc.StatusCode.INVALID_ARGUMENT, f"etcdserver: {exc}"
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"etcdserver: {exc}"
    return None


async def abort_with(context: grpc.aio.ServicerContext, exc: BaseException) -> None:
    """Answer the call with ``exc``'s etcd status; re-raise a bug (grpc logs it, answers UNKNOWN)."""
    status = status_of(exc)
    if status is None:
        _log.error("internal error in %s", type(exc).__name__, exc_info=exc)
        raise exc
    await context.abort(*status)


def unary(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a unary servicer method so its errors become etcd's statuses."""

    @wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await method(self, request, context)
        except (errors.EtcdError, ValueError, TypeError, StoreError) as exc:
            await abort_with(context, exc)
            raise  # unreachable: abort raises

    return wrapper


def check_token(token: str | None, password: str) -> str:
    """The token ``Auth.Authenticate`` hands out for ``password`` (the serve token itself)."""
    if token is None:
        raise errors.AUTH_NOT_ENABLED
    if not hmac.compare_digest(password.encode(), token.encode()):
        raise errors.AUTH_FAILED
    return token


