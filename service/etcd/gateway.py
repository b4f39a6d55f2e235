"""etcd's JSON gateway (``/v3/kv/range``, ``/v3/watch``, ``/v3/lease/...``) on the HTTP port.

etcd 3.5 serves its gRPC API a second time as JSON through grpc-gateway
(v1), and HTTP-only etcd clients speak that. This module is the same thing
for ``lakekv serve --etcd-listen``: each path of etcd's ``google.api.http``
annotations (v3.5.1 ``rpc.proto``, ``v3lock.proto``, ``v3election.proto``)
is one POST route here that parses the body into the request message, calls
the method on this server's own gRPC API (one loopback channel, as etcd's
gateway dials itself) and answers with the response message. So the gateway
can never disagree with gRPC: it has no logic of its own.

The JSON mapping is grpc-gateway v1's default (``JSONPb{OrigName: true}``):
field names as in the ``.proto`` (``range_end``, ``create_revision``,
``ID``), bytes base64, 64-bit integers as strings, enums by name, fields at
their default value left out. Unlike grpc-gateway, an unknown field is
refused (400 naming it), never ignored: a typo must not change a request's
meaning.

Streams (``/v3/watch``, ``/v3/lease/keepalive``, ``/v3/election/observe``):
the body is one or more JSON request objects, one after another, read whole
before the call starts (so requests cannot be added to a call in flight: a
cancel is a disconnect); the answer
is one line per response, ``{"result": {...}}``, and, if the call fails
part-way, a last line ``{"error": {"grpc_code", "http_code", "message",
"http_status"}}``. A watch stays open after its requests until the client
disconnects; a keepalive ends after answering them.

Errors of unary calls: the gRPC status as grpc-gateway maps it (NOT_FOUND →
404, INVALID_ARGUMENT/OUT_OF_RANGE/FAILED_PRECONDITION → 400, ...) with the
body ``{"error": message, "code": grpc code, "message": message}``.

``GET /version`` answers etcd's ``{"etcdserver", "etcdcluster"}``.

Authentication is the HTTP server's (``Authorization: Bearer <token>``); the
gateway then presents the serve token to the gRPC API itself.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from service.etcd.version import ETCD_API_VERSION, ETCD_CLUSTER_VERSION

if TYPE_CHECKING:
    import grpc.aio
    from google.protobuf.message import Message

# grpc and the message classes load at the first gateway call, not with the
# HTTP app: a server without --etcd-listen never needs them (start-up time).
_RPC, _LOCK, _ELECTION = (
    "service.etcd.api.etcdserverpb.rpc_pb2", "service.etcd.api.v3lockpb.v3lock_pb2",
    "service.etcd.api.v3electionpb.v3election_pb2",
)
# grpc-gateway v1's HTTPStatusFromCode, by gRPC code number.
_HTTP_STATUS: Final = {
    0: 200, 1: 408, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 16: 401, 8: 429, 9: 400, 10: 409, 11: 400,
    12: 501, 13: 500, 14: 503, 15: 500,
}
_INVALID_ARGUMENT: Final = 3
_UNIMPLEMENTED: Final = 12
# The largest request body a gateway call reads (etcd's own gRPC limit is 1.5 MiB).
MAX_BODY_BYTES: Final = 16 * 1024 * 1024


@dataclass(frozen=True)
class Method:
    """One gRPC method behind a gateway path: its full name, message classes (module, name) and shape."""

    name: str
    module: str
    request_name: str
    response_name: str
    kind: str  # "unary", "server_stream" or "bidi"
    # A bidi call whose stream stays open after the body's requests (a watch), until the client disconnects.
    hold_open: bool = False

    @property
    def request(self) -> type[Message]:
        return getattr(importlib.import_module(self.module), self.request_name)  # type: ignore[no-any-return]

    @property
    def response(self) -> type[Message]:
        return getattr(importlib.import_module(self.module), self.response_name)  # type: ignore[no-any-return]


def _m(
    service: str, method: str, module: str = _RPC, kind: str = "unary", request: str = "", response: str = "",
    hold_open: bool = False,
) -> Method:
    return Method(
        f"/{service}/{method}", module, request or f"{method}Request", response or f"{method}Response", kind, hold_open
    )


_KV, _LEASE = "etcdserverpb.KV", "etcdserverpb.Lease"
_REVOKE = _m(_LEASE, "LeaseRevoke")
_TIMETOLIVE = _m(_LEASE, "LeaseTimeToLive")
_LEASES = _m(_LEASE, "LeaseLeases")

# etcd v3.5.1's gateway paths, each with its method.
METHODS: Final[dict[str, Method]] = {
    "/v3/kv/range": _m(_KV, "Range"),
    "/v3/kv/put": _m(_KV, "Put"),
    "/v3/kv/deleterange": _m(_KV, "DeleteRange"),
    "/v3/kv/txn": _m(_KV, "Txn"),
    "/v3/kv/compaction": _m(_KV, "Compact", request="CompactionRequest", response="CompactionResponse"),
    "/v3/watch": _m("etcdserverpb.Watch", "Watch", kind="bidi", hold_open=True),
    "/v3/lease/grant": _m(_LEASE, "LeaseGrant"),
    "/v3/lease/revoke": _REVOKE,
    "/v3/kv/lease/revoke": _REVOKE,
    "/v3/lease/keepalive": _m(_LEASE, "LeaseKeepAlive", kind="bidi"),
    "/v3/lease/timetolive": _TIMETOLIVE,
    "/v3/kv/lease/timetolive": _TIMETOLIVE,
    "/v3/lease/leases": _LEASES,
    "/v3/kv/lease/leases": _LEASES,
    "/v3/maintenance/status": _m("etcdserverpb.Maintenance", "Status"),
    "/v3/maintenance/alarm": _m("etcdserverpb.Maintenance", "Alarm"),
    "/v3/cluster/member/list": _m("etcdserverpb.Cluster", "MemberList"),
    "/v3/lock/lock": _m("v3lockpb.Lock", "Lock", _LOCK),
    "/v3/lock/unlock": _m("v3lockpb.Lock", "Unlock", _LOCK),
    "/v3/election/campaign": _m("v3electionpb.Election", "Campaign", _ELECTION),
    "/v3/election/proclaim": _m("v3electionpb.Election", "Proclaim", _ELECTION),
    "/v3/election/leader": _m("v3electionpb.Election", "Leader", _ELECTION, request="LeaderRequest"),
    "/v3/election/observe": _m(
        "v3electionpb.Election", "Observe", _ELECTION, "server_stream", request="LeaderRequest",
        response="LeaderResponse",
    ),
    "/v3/election/resign": _m("v3electionpb.Election", "Resign", _ELECTION),
}


def to_json(message: Message) -> dict[str, Any]:
    """grpc-gateway v1's JSON for ``message`` (proto field names, int64 as strings, bytes base64)."""
    from google.protobuf import json_format

    as_json: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return as_json


def from_json(data: object, cls: type[Message]) -> Message:
    """``data`` (a decoded JSON object) as a ``cls`` message; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a {cls.DESCRIPTOR.name} must be a JSON object, not {type(data).__name__}")
    from google.protobuf import json_format

    try:
        return json_format.ParseDict(data, cls())
    except json_format.ParseError as exc:
        raise ValueError(f"bad {cls.DESCRIPTOR.name}: {exc}") from None


def split_json_objects(text: str) -> tuple[list[object], str]:
    """The complete JSON values at the start of ``text`` (one after another) and the unparsed rest."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return values, ""
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return values, text[position:]  # incomplete: wait for more of the body
        values.append(value)
        position = end


def _error_response(code: int, message: str) -> JSONResponse:
    """grpc-gateway v1's answer to a failed unary call (``code``: the gRPC status code number)."""
    return JSONResponse({"error": message, "code": code, "message": message}, status_code=_HTTP_STATUS.get(code, 500))


def _stream_error_line(code: int, message: str) -> bytes:
    http_code = _HTTP_STATUS.get(code, 500)
    error = {"grpc_code": code, "http_code": http_code, "message": message,
             "http_status": HTTPStatus(http_code).phrase}
    return json.dumps({"error": error}, separators=(",", ":")).encode() + b"\n"


def _result_line(message: Message) -> bytes:
    return json.dumps({"result": to_json(message)}, separators=(",", ":")).encode() + b"\n"


class Gateway:
    """The loopback channel to this server's gRPC API and the calls made on it."""

    def __init__(self, target: str, token: str | None) -> None:
        self._target = target
        self._metadata = (("token", token),) if token is not None else None
        self._channel: grpc.aio.Channel | None = None

    def _callable(self, method: Method) -> Any:
        if self._channel is None:
            import grpc.aio

            self._channel = grpc.aio.insecure_channel(self._target)
        serialize, deserialize = method.request.SerializeToString, method.response.FromString
        if method.kind == "unary":
            return self._channel.unary_unary(method.name, serialize, deserialize)
        if method.kind == "server_stream":
            return self._channel.unary_stream(method.name, serialize, deserialize)
        return self._channel.stream_stream(method.name, serialize, deserialize)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()

    async def unary(self, method: Method, body: bytes) -> Response:
        try:
            request = from_json(_decode_one(body), method.request)
        except ValueError as exc:
            return _error_response(_INVALID_ARGUMENT, str(exc))
        import grpc.aio

        try:
            response = await self._callable(method)(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            return _error_response(exc.code().value[0], exc.details() or "")
        return JSONResponse(to_json(response))

    async def stream(self, method: Method, body: bytes) -> Response:
        try:
            if method.kind == "server_stream":
                call = self._callable(method)(from_json(_decode_one(body), method.request), metadata=self._metadata)
            else:
                requests = [from_json(value, method.request) for value in _decode_many(body)]
                call = self._callable(method)(_send(requests, method.hold_open), metadata=self._metadata)
        except ValueError as exc:
            return _error_response(_INVALID_ARGUMENT, str(exc))
        return StreamingResponse(_lines(call), media_type="application/json")


def _decode_one(body: bytes) -> object:
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except ValueError:
        raise ValueError("the request body is not valid JSON") from None
    except RecursionError:
        raise ValueError("the request body is nested too deeply") from None


async def _read_body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ValueError(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    return body


def _decode_many(body: bytes) -> list[object]:
    """The JSON values of a streaming call's body, one after another (an empty body: one empty request)."""
    try:
        values, rest = split_json_objects(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("the request body is not UTF-8") from None
    except RecursionError:
        raise ValueError("the request body is nested too deeply") from None
    if rest.strip():
        raise ValueError("the request body is not a sequence of JSON objects")
    return values or [{}]


async def _send(requests: list[Message], hold_open: bool) -> AsyncIterator[Message]:
    """A streaming call's requests; with ``hold_open``, then nothing more until the call is cancelled.

    The whole body is read before the call starts: once the response streams,
    the server reads the connection only to notice the client leaving. So a
    client cannot add requests (a second watch, a cancel) to a call in flight.
    """
    for request in requests:
        yield request
    if hold_open:
        await asyncio.Event().wait()  # until the call is cancelled (the client disconnected)


async def _lines(call: Any) -> AsyncIterator[bytes]:
    import grpc.aio

    try:
        async for response in call:
            yield _result_line(response)
    except grpc.aio.AioRpcError as exc:
        yield _stream_error_line(exc.code().value[0], exc.details() or "")
    finally:
        call.cancel()


def _gateway(request: Request) -> Gateway | None:
    """The app's gateway, made at its first call; None when the server has no etcd API."""
    state = request.app.state
    etcd = getattr(state, "etcd", None)
    if etcd is None:
        return None
    gateway: Gateway | None = getattr(state, "etcd_gateway", None)
    if gateway is None:
        gateway = state.etcd_gateway = Gateway(loopback_target(etcd.context.config.etcd_listen, etcd.port),
                                               etcd.context.config.token)
    return gateway


def loopback_target(listen: str, port: int) -> str:
    """Where this process reaches its own gRPC API: the bound host, or loopback for a wildcard bind."""
    host = listen.rpartition(":")[0].strip("[]")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def handle(request: Request) -> Response:
    gateway = _gateway(request)
    if gateway is None:
        return _error_response(
            _UNIMPLEMENTED, "etcd's API is not served here: start lakekv serve with --etcd-listen"
        )
    method = METHODS[request.url.path]
    try:
        body = await _read_body(request)
    except ValueError as exc:
        return _error_response(_INVALID_ARGUMENT, str(exc))
    if method.kind == "unary":
        return await gateway.unary(method, body)
    return await gateway.stream(method, body)


async def version(request: Request) -> Response:
    """etcd's ``GET /version`` (clients such as etcd3gw read it to choose the API path)."""
    if _gateway(request) is None:
        return _error_response(
            _UNIMPLEMENTED, "etcd's API is not served here: start lakekv serve with --etcd-listen"
        )
    return JSONResponse({"etcdserver": ETCD_API_VERSION, "etcdcluster": ETCD_CLUSTER_VERSION})


ROUTES: Final = [Route(path, handle, methods=["POST"]) for path in METHODS] + [
    Route("/version", version, methods=["GET"])
]
