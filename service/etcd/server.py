"""The etcd v3 gRPC server of ``lakekv serve --etcd-listen HOST:PORT``.

It runs on the event loop of the HTTP server (``grpc.aio``), over the same
store handle, so HTTP and gRPC writes share one group commit. Each service
is a module with ``add_to_server(context, server)``; :data:`SERVICES` lists
them.

Codegen: the message classes and stubs (:mod:`service.etcd.api`) are
generated from etcd's own ``.proto`` files (go.etcd.io/etcd/api/v3 and
server/v3, v3.5.1) by ``make etcd-proto`` and committed with the stripped
``.proto`` sources: installing lakekv then needs grpcio and protobuf only,
not grpcio-tools and Go; regenerating is one make target, and the
committed output is reviewed like code (``service/etcd/api/generate.py``).

Contract for service modules (Lease, Lock, Election, Maintenance, Cluster
add themselves here):

* write ``def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None``
  that calls the generated ``add_<Name>Servicer_to_server(servicer, server)``
  (message classes and stubs: :mod:`service.etcd.api`, e.g.
  ``service.etcd.api.etcdserverpb.rpc_pb2`` / ``rpc_pb2_grpc``), and append it
  to :data:`SERVICES`;
* take :class:`~service.etcd.context.EtcdContext` from
  :mod:`service.etcd.context` (which must not import this module), and
  decorate each unary method with its ``unary`` (streams: use its
  ``abort_with``): an ``EtcdError`` becomes etcd's
  status code and message; ``ValueError``/``TypeError`` become
  INVALID_ARGUMENT; a ``StoreError`` becomes UNAVAILABLE with its message;
* a streaming service registers in ``context.on_stop`` a callback that
  ends its open streams (a graceful stop then waits for unary calls only);
* run blocking store calls with ``await context.blocking(fn, *args)`` (the
  server's worker threads); never block the loop;
* headers: ``context.header(revision)`` (cluster id: the store's; member
  id: this process's; raft term 1). The store-wide revision is the commit seq
  (``store.seq``); :mod:`service.etcd.keyspace` holds etcd's key model
  (create/mod revision, version, lease per key) and its lease hook
  (:class:`~service.etcd.keyspace.LeaseHook`, ``context.keyspace.leases``).

With ``--tls-cert``/``--tls-key`` the etcd port speaks TLS with the same
certificate. Authentication follows the HTTP rules (:mod:`service.security`):
without a serve token every call is open (the bind is loopback, :func:`check_bind`);
with one, every call but ``Auth/Authenticate`` must carry the metadata
``token: <serve token>``. ``Authenticate`` accepts any user name with the
serve token as password and hands the token back, which is how
``etcdctl --user root:$TOKEN`` and clientv3's ``Username``/``Password``
flow; a missing token is etcd's "user name is empty", a wrong one its
"invalid auth token".
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import grpc
import grpc.aio

from kvstore.store import Store
from service.config import ServerConfig
from service.etcd import auth, election, errors, kv, lease, lock, maintenance, watch
from service.etcd.context import EtcdContext
from service.etcd.keyspace import Keyspace

_log = logging.getLogger("lakekv.etcd")

# Only Authenticate may be called without a token (it is how a client gets one).
OPEN_METHODS: Final = frozenset({"/etcdserverpb.Auth/Authenticate"})
# etcd's gRPC receive limit: its --max-request-bytes (1.5 MiB) plus 512 KiB of gRPC overhead.
MAX_RECEIVE_BYTES: Final = 1536 * 1024 + 512 * 1024


class TokenAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc.aio is untyped
    """Refuse calls without the serve token in the ``token`` metadata (see the module docstring)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        if details.method in OPEN_METHODS:
            return await continuation(details)
        presented = None
        for name, value in details.invocation_metadata or ():
            if name == "token":
                presented = value.encode() if isinstance(value, str) else value
                break
        if presented is None:
            return _refusal(errors.USER_EMPTY)
        if not hmac.compare_digest(presented, self._token):
            return _refusal(errors.INVALID_AUTH_TOKEN)
        return await continuation(details)


def _refusal(error: errors.EtcdError) -> grpc.RpcMethodHandler:
    # A stream-stream handler answers any kind of call: it aborts before reading.
    async def refuse(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(error.code, error.message)

    return grpc.stream_stream_rpc_method_handler(refuse)


# Every service the server runs: add yours here (see the module docstring).
SERVICES: list[Callable[[EtcdContext, grpc.aio.Server], None]] = [
    kv.add_to_server,
    watch.add_to_server,
    auth.add_to_server,
    lease.add_to_server,  # before lock and election, which use its leases
    lock.add_to_server,
    election.add_to_server,
    maintenance.add_to_server,
]


class EtcdServer:
    """A started gRPC server; ``await stop()`` ends it (in-flight calls get ``grace_s``)."""

    def __init__(self, server: grpc.aio.Server, context: EtcdContext, port: int) -> None:
        self.server = server
        self.context = context
        self.port = port

    async def stop(self, grace_s: float) -> None:
        for end_streams in self.context.on_stop:
            end_streams()
        await self.server.stop(grace_s)
        for stop in self.context.after_stop:
            await stop()
        self.context.executor.shutdown(wait=False)


def _id64(seed: bytes) -> int:
    """A stable non-zero id below 2**63 (etcd's ids are uint64; some clients print them as int64)."""
    return int.from_bytes(hashlib.blake2b(seed, digest_size=8).digest(), "big") >> 1 or 1


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:2379`` for IPv6) as ``(host, port)``.

    Raises:
        ValueError: not HOST:PORT with a port in 0..65535.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--etcd-listen must be HOST:PORT, not {listen!r}")
    return host.strip("[]"), int(port)


async def start(config: ServerConfig, store: Store) -> EtcdServer:
    """Start serving etcd's API on ``config.etcd_listen`` over ``store``.

    Raises:
        RuntimeError: the address could not be bound.
    """
    assert config.etcd_listen is not None
    host, port = parse_listen(config.etcd_listen)
    interceptors = [TokenAuth(config.token)] if config.token is not None else []
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES), ("grpc.so_reuseport", 0)],
    )
    context = EtcdContext(
        config=config, store=store, keyspace=Keyspace(store),
        executor=ThreadPoolExecutor(config.worker_threads, thread_name_prefix="etcd"),
        # The cluster is the store (every server on it shares the id); a member is one server process.
        cluster_id=_id64(store.url.encode()), member_id=_id64(store.writer_id.encode()),
    )
    await context.blocking(context.keyspace.start_at_etcds_first_revision)
    for add in SERVICES:
        add(context, server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if config.tls_cert is not None and config.tls_key is not None:
        # The HTTP server's certificate serves the etcd port too: a token never travels in clear text
        # where the HTTP API's would not (etcdctl --cacert, clientv3 TLS config).
        with open(config.tls_key, "rb") as key_file, open(config.tls_cert, "rb") as cert_file:
            credentials = grpc.ssl_server_credentials([(key_file.read(), cert_file.read())])
        bound = server.add_secure_port(address, credentials)
    else:
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise RuntimeError(f"could not bind the etcd API to {config.etcd_listen}")
    context.client_urls.append(f"http://{address.rpartition(':')[0]}:{bound}")
    await server.start()
    _log.info("etcd v3 API on %s:%d", host, bound)
    return EtcdServer(server, context, bound)
