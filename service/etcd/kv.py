"""etcd's ``KV`` service: Range, Put, DeleteRange, Txn, Compact (the model is :mod:`service.etcd.keyspace`)."""

from __future__ import annotations

from typing import Final

import grpc.aio
from google.protobuf.message import Message

from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.context import EtcdContext, unary


# etcd's --max-request-bytes default: a larger write is refused with "request is too large".
MAX_REQUEST_BYTES: Final = 1536 * 1024


def _check_size(request: Message) -> None:
    if request.ByteSize() > MAX_REQUEST_BYTES:
        raise errors.REQUEST_TOO_LARGE


class KVServicer(rpc_pb2_grpc.KVServicer):
    def __init__(self, context: EtcdContext) -> None:
        self._context = context
        self._keyspace = context.keyspace

    def _fill(self, response: pb.RangeResponse) -> None:
        header = self._context.header(response.header.revision)
        response.header.CopyFrom(header)

    @unary
    async def Range(self, request: pb.RangeRequest, context: grpc.aio.ServicerContext) -> pb.RangeResponse:
        if not request.range_end and not request.revision and self._context.store.reads_without_waiting():
            # One key, its data in memory or local files and the view known current: no
            # storage request and no lock, so answered on the loop without a thread hop.
            response = self._keyspace.range(request)
        else:
            response = await self._context.blocking(self._keyspace.range, request)
        self._fill(response)
        return response

    @unary
    async def Put(self, request: pb.PutRequest, context: grpc.aio.ServicerContext) -> pb.PutResponse:
        _check_size(request)
        response = await self._context.blocking(self._keyspace.put, request)
        self._fill(response)
        return response

    @unary
    async def DeleteRange(
        self, request: pb.DeleteRangeRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteRangeResponse:
        response = await self._context.blocking(self._keyspace.delete_range, request)
        self._fill(response)
        return response

    @unary
    async def Txn(self, request: pb.TxnRequest, context: grpc.aio.ServicerContext) -> pb.TxnResponse:
        _check_size(request)
        response = await self._context.blocking(self._keyspace.txn, request)
        self._fill(response)
        return response

    @unary
    async def Compact(self, request: pb.CompactionRequest, context: grpc.aio.ServicerContext) -> pb.CompactionResponse:
        response = await self._context.blocking(self._keyspace.compact, request.revision)
        self._fill(response)
        return response


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    rpc_pb2_grpc.add_KVServicer_to_server(KVServicer(context), server)  # type: ignore[no-untyped-call]  # generated, untyped
