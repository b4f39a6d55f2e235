"""etcd's Maintenance.Status and Alarm, and Cluster.MemberList: ``etcdctl endpoint status/health``, ``member list``.

There is no Raft here (:mod:`service.etcd.members`): every server on the
store serves reads and writes, so each reports itself as the leader, raft
term 1 (as every response header says) and the store's revision as its raft
index. The database size is the bytes of the store's objects. lakekv keeps
no alarms: ``AlarmList`` answers none (``endpoint health`` asks), and
raising or clearing one is refused rather than ignored. Adding, removing or
promoting members is refused too (etcd's generated default: UNIMPLEMENTED):
a server joins by starting on the store and leaves by stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Final

import grpc
import grpc.aio

from kvstore.errors import StoreError
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.context import EtcdContext, unary
from service.etcd.members import HEARTBEAT_S, MemberRegistry
from service.etcd.version import ETCD_API_VERSION

_log = logging.getLogger("lakekv.etcd.members")

NO_ALARMS: Final = errors.EtcdError(
    grpc.StatusCode.UNIMPLEMENTED, "etcdserver: lakekv keeps no alarms (only listing them is supported)"
)


class MaintenanceServicer(rpc_pb2_grpc.MaintenanceServicer):
    def __init__(self, context: EtcdContext) -> None:
        self._context = context

    def _db_size(self) -> int:
        return sum(meta.size for meta in self._context.store.objects.list(""))

    @unary
    async def Status(self, request: pb.StatusRequest, context: grpc.aio.ServicerContext) -> pb.StatusResponse:
        ctx = self._context
        revision = await ctx.blocking(ctx.keyspace.latest)
        size = await ctx.blocking(self._db_size)
        return pb.StatusResponse(
            header=ctx.header(revision), version=ETCD_API_VERSION, dbSize=size, dbSizeInUse=size,
            leader=ctx.member_id, raftIndex=revision, raftTerm=1, raftAppliedIndex=revision,
        )

    @unary
    async def Alarm(self, request: pb.AlarmRequest, context: grpc.aio.ServicerContext) -> pb.AlarmResponse:
        if request.action != pb.AlarmRequest.GET:
            raise NO_ALARMS
        return pb.AlarmResponse(header=self._context.header(self._context.store.seq))


class ClusterServicer(rpc_pb2_grpc.ClusterServicer):
    def __init__(self, context: EtcdContext, registry: MemberRegistry) -> None:
        self._context = context
        self._registry = registry

    @unary
    async def MemberList(
        self, request: pb.MemberListRequest, context: grpc.aio.ServicerContext
    ) -> pb.MemberListResponse:
        members = await self._context.blocking(self._registry.members)
        return pb.MemberListResponse(
            header=self._context.header(self._context.store.seq),
            members=[pb.Member(ID=m.id, name=m.name, clientURLs=list(m.client_urls)) for m in members],
        )


async def heartbeat_forever(context: EtcdContext, registry: MemberRegistry) -> None:
    """Announce this server every HEARTBEAT_S until cancelled (the server's stop)."""
    while True:
        try:
            await context.blocking(registry.heartbeat)
        except StoreError as exc:
            _log.warning("member heartbeat failed, retrying: %s", exc)
        await asyncio.sleep(HEARTBEAT_S)


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    registry = MemberRegistry(
        context.store.objects, context.member_id, f"lakekv-{socket.gethostname()}-{os.getpid()}",
        lambda: tuple(context.client_urls),
    )
    rpc_pb2_grpc.add_MaintenanceServicer_to_server(MaintenanceServicer(context), server)  # type: ignore[no-untyped-call]
    rpc_pb2_grpc.add_ClusterServicer_to_server(ClusterServicer(context, registry), server)  # type: ignore[no-untyped-call]
    task = asyncio.get_running_loop().create_task(heartbeat_forever(context, registry))

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await context.blocking(registry.leave)

    context.after_stop.append(stop)
