"""Leases over HTTP (etcd's LeaseGrant / LeaseKeepAlive / LeaseRevoke / LeaseTimeToLive).

=======  ================================  ==============================================
method   path                              what
=======  ================================  ==============================================
POST     /kv/v1/leases                     grant ``{"ttl": seconds}`` -> 201 ``{"id", "ttl"}``
GET      /kv/v1/leases                     ``{"leases": [{"id", "ttl", "remaining"}]}``: every live lease
GET      /kv/v1/leases/{id}                ``{"id", "ttl", "remaining", "keys"}`` (keys still attached, base64);
                                           ``remaining`` is read without extending the lease
POST     /kv/v1/leases/{id}/keepalive      restart its ttl -> ``{"id", "ttl", "remaining"}`` (writes the lease's
                                           record only: its keys keep their revisions, watchers hear nothing)
DELETE   /kv/v1/leases/{id}                revoke: the lease and its keys go in one commit
=======  ================================  ==============================================

A key is attached with ``PUT /kv/v1/keys/{key}`` (``"lease"`` in the JSON
body or ``?lease=`` with a raw body), a batch op's ``"lease"``, or a txn put's.
A lease that expired or was revoked is 404 ``LeaseNotFoundError``; revoking one
that is gone is a no-op, as embedded. Leases live in the store
(:mod:`kvstore.leases`), so any server or embedded process on it sees them.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from kvstore.errors import LeaseNotFoundError
from kvstore.leases import Lease
from service.codec import KV_PREFIX, b64encode, client_key, read_json
from service.errors import ApiError
from service.kv_api import KvState, lease_param
from service.routing import route


def _store(request: Request) -> KvState:
    return request.app.state.kv  # type: ignore[no-any-return]


def _lease_id(request: Request) -> int | str:
    lease_id = lease_param(request.path_params["lease_id"], "the lease id in the path")
    assert lease_id is not None  # a path parameter is never missing
    return lease_id


async def grant(request: Request) -> JSONResponse:
    data = await read_json(request, ("ttl",))
    ttl = data.get("ttl")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise ApiError(400, "ValueError", f"ttl must be a number of seconds, got {ttl!r}")
    lease = await run_in_threadpool(_store(request).store.grant_lease, ttl)
    return JSONResponse({"id": lease.id, "ttl": lease.ttl}, status_code=201)


async def show(request: Request) -> JSONResponse:
    lease_id, store = _lease_id(request), _store(request).store

    def read() -> tuple[Lease, float, list[bytes]]:
        lease = store.lease(lease_id)
        return lease, lease.remaining(), lease.keys()

    lease, remaining, keys = await run_in_threadpool(read)
    # Keys an embedded user attached outside the KV API's key space are not the client's to see.
    client_keys = [b64encode(client_key(key)) for key in keys if key.startswith(KV_PREFIX)]
    return JSONResponse({"id": lease.id, "ttl": lease.ttl, "remaining": remaining, "keys": client_keys})


async def every(request: Request) -> JSONResponse:
    store = _store(request).store

    def read() -> list[dict[str, float | int | str]]:
        found = []
        for lease in store.leases():
            try:
                found.append({"id": lease.id, "ttl": lease.ttl, "remaining": lease.remaining()})
            except LeaseNotFoundError:
                continue  # expired or revoked since it was listed
        return found

    return JSONResponse({"leases": await run_in_threadpool(read)})


async def keepalive(request: Request) -> JSONResponse:
    lease_id, store = _lease_id(request), _store(request).store
    await read_json(request, ())  # a keepalive renews the lease's own ttl: a "ttl" sent is refused, not ignored

    def extend() -> tuple[Lease, float]:
        lease = store.lease(lease_id)
        return lease, lease.keepalive()

    lease, remaining = await run_in_threadpool(extend)
    return JSONResponse({"id": lease.id, "ttl": lease.ttl, "remaining": remaining})


async def revoke(request: Request) -> JSONResponse:
    lease_id, store = _lease_id(request), _store(request).store

    def end() -> None:
        try:
            lease = store.lease(lease_id)
        except LeaseNotFoundError:
            return  # already gone, keys with it: revoking is done
        lease.revoke()

    await run_in_threadpool(end)
    return JSONResponse({})


ROUTES = [
    route("/kv/v1/leases", grant, "POST"),
    route("/kv/v1/leases", every, "GET"),
    route("/kv/v1/leases/{lease_id}", show, "GET"),
    route("/kv/v1/leases/{lease_id}/keepalive", keepalive, "POST"),
    route("/kv/v1/leases/{lease_id}", revoke, "DELETE"),
]
