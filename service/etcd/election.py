"""etcd's Election service (v3election): Campaign, Proclaim, Leader, Observe, Resign.

etcd's recipe (``client/v3/concurrency/election.go``, which its v3election
server runs against itself), on the keyspace: a candidate's key is
``<name>/<lease id in hex>`` holding its value; the leader is the key under
``<name>/`` with the lowest create revision. Campaign puts the key (or, when
it is already there, proclaims the new value) and waits until every key
created before it is gone (:mod:`service.etcd.waiting`). Proclaim and Resign
act only while the key still has the create revision the leader was elected
with (``LeaderKey.rev``). Observe streams the leader as it changes: etcd too
promises the latest leader value, not every intermediate one.

Errors are etcd's, which are plain Go errors there (gRPC code UNKNOWN):
``election: no leader``, ``election: not leader``, ``"leader" field must be
provided``. A lease id of 0 gets a new 60-second lease, as etcd's session would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

import grpc
import grpc.aio

from kvstore.errors import StoreError
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.v3electionpb import v3election_pb2 as epb
from service.etcd.api.v3electionpb import v3election_pb2_grpc
from service.etcd.context import EtcdContext, abort_with, unary
from service.etcd.lease import Leases
from service.etcd.lock import created_is, owner_key, session_lease
from service.etcd.waiting import Changes, OpenStreams, first_created, wait_deletes

NO_LEADER: Final = errors.EtcdError(grpc.StatusCode.UNKNOWN, "election: no leader")
NOT_LEADER: Final = errors.EtcdError(grpc.StatusCode.UNKNOWN, "election: not leader")
MISSING_LEADER: Final = errors.EtcdError(grpc.StatusCode.UNKNOWN, '"leader" field must be provided')


class Elections:
    """The election recipe over one server's keyspace (coroutines; store calls on worker threads)."""

    def __init__(self, context: EtcdContext, leases: Leases) -> None:
        self._context = context
        self._leases = leases

    async def _txn(self, request: pb.TxnRequest) -> pb.TxnResponse:
        return await self._context.blocking(self._context.keyspace.txn, request)

    async def campaign(self, name: bytes, lease_id: int, value: bytes) -> epb.CampaignResponse:
        context = self._context
        lease_id = await context.blocking(session_lease, context, self._leases, lease_id)
        prefix = name + b"/"
        key = owner_key(prefix, lease_id)
        response = await self._txn(pb.TxnRequest(
            compare=[created_is(key, 0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=key, value=value, lease=lease_id))],
            failure=[pb.RequestOp(request_range=pb.RangeRequest(key=key))],
        ))
        revision = response.header.revision
        if not response.succeeded:
            existing = response.responses[0].response_range.kvs[0]
            revision = existing.create_revision
            if existing.value != value:
                candidate = epb.LeaderKey(name=name, key=key, rev=revision, lease=lease_id)
                try:
                    await self.proclaim(candidate, value)
                except errors.EtcdError:
                    await self.resign(candidate)
                    raise
        try:
            await wait_deletes(context, prefix, revision - 1)
        except asyncio.CancelledError:
            await asyncio.shield(self.resign(epb.LeaderKey(name=name, key=key, rev=revision, lease=lease_id)))
            raise
        leader = epb.LeaderKey(name=name, key=key, rev=revision, lease=lease_id)
        return epb.CampaignResponse(header=context.header(response.header.revision), leader=leader)

    async def proclaim(self, leader: epb.LeaderKey, value: bytes) -> pb.ResponseHeader:
        response = await self._txn(pb.TxnRequest(
            compare=[created_is(leader.key, leader.rev)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=leader.key, value=value, lease=leader.lease))],
        ))
        if not response.succeeded:
            raise NOT_LEADER
        return self._context.header(response.header.revision)

    async def resign(self, leader: epb.LeaderKey) -> pb.ResponseHeader:
        response = await self._txn(pb.TxnRequest(
            compare=[created_is(leader.key, leader.rev)],
            success=[pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=leader.key))],
        ))
        return self._context.header(response.header.revision)

    async def leader(self, name: bytes) -> epb.LeaderResponse:
        response = await self._context.blocking(self._context.keyspace.range, first_created(name + b"/"))
        if not response.kvs:
            raise NO_LEADER
        return epb.LeaderResponse(header=self._context.header(response.header.revision), kv=response.kvs[0])

    async def observe(self, name: bytes) -> AsyncIterator[epb.LeaderResponse]:
        """Each new leader, and each new value it proclaims, from the current one on."""
        request = first_created(name + b"/")
        last: tuple[bytes, int] | None = None
        with Changes(self._context) as changes:
            while True:
                changes.arm()
                response = await self._context.blocking(self._context.keyspace.range, request)
                if response.kvs:
                    kv = response.kvs[0]
                    if (kv.key, kv.mod_revision) != last:
                        last = (kv.key, kv.mod_revision)
                        yield epb.LeaderResponse(header=self._context.header(response.header.revision), kv=kv)
                await changes.wait()


class ElectionServicer(v3election_pb2_grpc.ElectionServicer):
    def __init__(self, context: EtcdContext, elections: Elections) -> None:
        self._elections = elections
        self._streams = OpenStreams(context)

    @unary
    async def Campaign(self, request: epb.CampaignRequest, context: grpc.aio.ServicerContext) -> epb.CampaignResponse:
        return await self._elections.campaign(request.name, request.lease, request.value)

    @unary
    async def Proclaim(self, request: epb.ProclaimRequest, context: grpc.aio.ServicerContext) -> epb.ProclaimResponse:
        if not request.HasField("leader"):
            raise MISSING_LEADER
        return epb.ProclaimResponse(header=await self._elections.proclaim(request.leader, request.value))

    @unary
    async def Leader(self, request: epb.LeaderRequest, context: grpc.aio.ServicerContext) -> epb.LeaderResponse:
        return await self._elections.leader(request.name)

    async def Observe(
        self, request: epb.LeaderRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[epb.LeaderResponse]:
        try:
            async for response in self._streams.until_stopped(self._elections.observe(request.name)):
                yield response
        except (errors.EtcdError, ValueError, TypeError, StoreError) as exc:
            await abort_with(context, exc)

    @unary
    async def Resign(self, request: epb.ResignRequest, context: grpc.aio.ServicerContext) -> epb.ResignResponse:
        if not request.HasField("leader"):
            raise MISSING_LEADER
        return epb.ResignResponse(header=await self._elections.resign(request.leader))


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    leases = context.keyspace.leases
    assert isinstance(leases, Leases), "the Lease service registers before Election"
    servicer = ElectionServicer(context, Elections(context, leases))
    v3election_pb2_grpc.add_ElectionServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
