"""etcd's ``Auth`` service, as far as clients need it to present the serve token.

``Authenticate(name, password)`` answers the serve token itself when
``password`` is that token (any user name): clients then send it as the
``token`` metadata (see :mod:`service.etcd.server`). ``AuthStatus`` says
whether a token is required. lakekv has no users or roles: the other Auth
calls answer etcd's UNIMPLEMENTED.
"""

from __future__ import annotations

import grpc.aio

from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.context import EtcdContext, check_token, unary


class AuthServicer(rpc_pb2_grpc.AuthServicer):
    def __init__(self, context: EtcdContext) -> None:
        self._context = context

    @unary
    async def Authenticate(
        self, request: pb.AuthenticateRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuthenticateResponse:
        if not request.name:
            raise errors.USER_EMPTY
        token = check_token(self._context.config.token, request.password)
        return pb.AuthenticateResponse(header=self._context.header(self._context.store.seq), token=token)

    @unary
    async def AuthStatus(self, request: pb.AuthStatusRequest, context: grpc.aio.ServicerContext) -> pb.AuthStatusResponse:
        return pb.AuthStatusResponse(
            header=self._context.header(self._context.store.seq), enabled=self._context.config.token is not None
        )


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    rpc_pb2_grpc.add_AuthServicer_to_server(AuthServicer(context), server)  # type: ignore[no-untyped-call]  # generated, untyped
