"""etcd's Lock service (v3lock): ``Lock(name, lease)`` → the ownership key, ``Unlock(key)``.

etcd's recipe (``client/v3/concurrency/mutex.go``, which its v3lock server
runs against itself), on the keyspace: the caller's key is
``<name>/<lease id in hex>``, put with the lease if it is not there yet; the
lock is held by the key under ``<name>/`` with the lowest create revision,
so a caller waits until every key created before its own is gone (deleted,
or its lease expired: :mod:`service.etcd.waiting`). Mutual exclusion is the
keyspace's: the txn that puts the key is serializable, and a key whose lease
expired is invisible to every server at once. A caller that gives up while
waiting (cancelled call) has its key deleted, as etcd does.

A lease id of 0 gets a new 60-second lease, as etcd's session would grant.
"""

from __future__ import annotations

import asyncio
from typing import Final

import grpc
import grpc.aio

from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.v3lockpb import v3lock_pb2 as lockpb
from service.etcd.api.v3lockpb import v3lock_pb2_grpc
from service.etcd.context import EtcdContext, unary
from service.etcd.lease import Leases
from service.etcd.waiting import first_created, wait_deletes

# concurrency.NewSession's default TTL, for a Lock or Campaign without a lease.
SESSION_TTL_S: Final = 60
SESSION_EXPIRED: Final = errors.EtcdError(grpc.StatusCode.UNKNOWN, "session expired")


def session_lease(context: EtcdContext, leases: Leases, lease_id: int) -> int:
    """``lease_id``, or for 0 a new lease of :data:`SESSION_TTL_S` (blocking)."""
    return lease_id or leases.grant(SESSION_TTL_S).id


def owner_key(prefix: bytes, lease_id: int) -> bytes:
    """clientv3's ``fmt.Sprintf("%s%x", pfx, lease)`` (Go prints a negative int64 as ``-hex``)."""
    return prefix + format(lease_id, "x").encode()


def _put(key: bytes, value: bytes, lease_id: int) -> pb.RequestOp:
    return pb.RequestOp(request_put=pb.PutRequest(key=key, value=value, lease=lease_id))


def _get(request: pb.RangeRequest) -> pb.RequestOp:
    return pb.RequestOp(request_range=request)


def created_is(key: bytes, revision: int) -> pb.Compare:
    return pb.Compare(key=key, target=pb.Compare.CREATE, result=pb.Compare.EQUAL, create_revision=revision)


async def delete_quietly(context: EtcdContext, key: bytes) -> None:
    """Delete ``key`` even while the calling task is being cancelled."""
    await asyncio.shield(context.blocking(context.keyspace.delete_range, pb.DeleteRangeRequest(key=key)))


async def acquire(context: EtcdContext, leases: Leases, name: bytes, lease_id: int) -> lockpb.LockResponse:
    """etcd's ``Mutex.Lock`` under ``name``, held by ``lease_id``."""
    lease_id = await context.blocking(session_lease, context, leases, lease_id)
    prefix = name + b"/"
    key = owner_key(prefix, lease_id)
    request = pb.TxnRequest(
        compare=[created_is(key, 0)],
        success=[_put(key, b"", lease_id), _get(first_created(prefix))],
        failure=[_get(pb.RangeRequest(key=key)), _get(first_created(prefix))],
    )
    response = await context.blocking(context.keyspace.txn, request)
    mine = response.header.revision if response.succeeded else response.responses[0].response_range.kvs[0].create_revision
    owner = response.responses[1].response_range.kvs
    if not owner or owner[0].create_revision == mine:
        return lockpb.LockResponse(header=context.header(response.header.revision), key=key)
    try:
        await wait_deletes(context, prefix, mine - 1)
    except asyncio.CancelledError:
        await delete_quietly(context, key)
        raise
    check = await context.blocking(context.keyspace.range, pb.RangeRequest(key=key))
    if not check.kvs:
        raise SESSION_EXPIRED  # the lease ended while waiting: the key went with it
    return lockpb.LockResponse(header=context.header(check.header.revision), key=key)


class LockServicer(v3lock_pb2_grpc.LockServicer):
    def __init__(self, context: EtcdContext, leases: Leases) -> None:
        self._context = context
        self._leases = leases

    @unary
    async def Lock(self, request: lockpb.LockRequest, context: grpc.aio.ServicerContext) -> lockpb.LockResponse:
        return await acquire(self._context, self._leases, request.name, request.lease)

    @unary
    async def Unlock(self, request: lockpb.UnlockRequest, context: grpc.aio.ServicerContext) -> lockpb.UnlockResponse:
        response = await self._context.blocking(self._context.keyspace.delete_range, pb.DeleteRangeRequest(key=request.key))
        return lockpb.UnlockResponse(header=self._context.header(response.header.revision))


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    leases = context.keyspace.leases
    assert isinstance(leases, Leases), "the Lease service registers before Lock"
    v3lock_pb2_grpc.add_LockServicer_to_server(LockServicer(context, leases), server)  # type: ignore[no-untyped-call]
