"""Durable transactions and locks over HTTP, ``/kv/v1/durable/...``.

The catalog's long-running transactions (``catalog.durable``, the YTsaurus
Cypress model) live as records in the lakehouse's own store, so a service
that cannot embed Python can still begin one, keep it alive, lock catalog
nodes and commit or abort it, interoperating with every embedded process:

=======  ==============================================  =====================================
method   path                                            what
=======  ==============================================  =====================================
POST     /kv/v1/durable/txns                             begin ``{"timeout", "parent", "title"}``
GET      /kv/v1/durable/txns?include_finished=true       list records
GET      /kv/v1/durable/txns/{txid}                      attach: the record (404 if none)
POST     /kv/v1/durable/txns/{txid}/ping                 ``{"ancestors": bool}``
POST     /kv/v1/durable/txns/{txid}/commit               one lakehouse version (if topmost)
POST     /kv/v1/durable/txns/{txid}/abort                abort it and its descendants
POST     /kv/v1/durable/txns/{txid}/locks                ``{"node", "mode", "child_key",
                                                          "attribute_key", "waitable", "wait_s"}``
GET      /kv/v1/durable/txns/{txid}/locks                its own locks
DELETE   /kv/v1/durable/txns/{txid}/locks?node=N         unlock N
GET      /kv/v1/durable/locks?node=N                     every lock on N, in queue order
=======  ==============================================  =====================================

Errors: 409 ``LockConflictError`` (the message names the holder, also in
``holder``), 409 ``TransactionStateError``, 410 ``TransactionExpiredError``
(raised as :class:`catalog.errors.DurableTransactionExpiredError`; the wire
keeps the name clients know), 404 ``NoSuchTransactionError``. A waitable
lock may be waited for in the request (``wait_s``, at most
:data:`MAX_WAIT_S`); the answer then says ``"acquired"`` or still
``"pending"``, and the client polls.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable, Final, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

import catalog
from catalog.errors import DurableTransactionExpiredError, LockConflictError, TransactionStateError
from service.codec import query_bool, read_json
from service.routing import route
from service.errors import ApiError

T = TypeVar("T")

# A request waiting for a lock holds a worker thread: bound it, clients poll.
MAX_WAIT_S: Final = 30.0
# How often a waiting request looks at its lock (a catch-up read each time).
_WAIT_POLL_S: Final = 0.05


def _lake(request: Request) -> catalog.Lakehouse:
    return request.app.state.iceberg.lake  # type: ignore[no-any-return]


def _error(exc: BaseException) -> ApiError | None:
    if isinstance(exc, LockConflictError):
        return ApiError(409, "LockConflictError", str(exc))
    if isinstance(exc, TransactionStateError):
        return ApiError(409, "TransactionStateError", str(exc))
    if isinstance(exc, DurableTransactionExpiredError):  # the wire name is the one it had before the rename
        return ApiError(410, "TransactionExpiredError", str(exc))
    if isinstance(exc, (ValueError, TypeError)):
        return ApiError(400, type(exc).__name__, str(exc))
    return None


async def _run(fn: Callable[..., T], *args: Any) -> T:
    try:
        return await run_in_threadpool(fn, *args)
    except Exception as exc:
        error = _error(exc)
        if error is None:
            raise
        raise error from exc


def _attach(lake: catalog.Lakehouse, txid: str) -> Any:
    try:
        return lake.attach(txid)
    except TransactionStateError as exc:  # attach's only reason: no such record
        raise ApiError(404, "NoSuchTransactionError", str(exc)) from None


def _record(txn: Any) -> dict[str, Any]:
    return asdict(txn.record())


async def begin(request: Request) -> JSONResponse:
    data, lake = await read_json(request, ("timeout", "parent", "title")), _lake(request)
    record = await _run(
        lambda: _record(lake.begin_durable(timeout=data.get("timeout"), parent=data.get("parent"), title=data.get("title")))
    )
    return JSONResponse(record, status_code=201)


async def list_transactions(request: Request) -> JSONResponse:
    lake, include = _lake(request), query_bool(request, "include_finished")
    records = await _run(lambda: [asdict(r) for r in lake.transactions(include_finished=include)])
    return JSONResponse({"transactions": records})


async def get_transaction(request: Request) -> JSONResponse:
    lake, txid = _lake(request), request.path_params["txid"]
    return JSONResponse(await _run(lambda: _record(_attach(lake, txid))))


async def ping(request: Request) -> JSONResponse:
    data, lake, txid = await read_json(request, ("ancestors",)), _lake(request), request.path_params["txid"]

    def do() -> dict[str, Any]:
        txn = _attach(lake, txid)
        txn.ping(ancestors=bool(data.get("ancestors", False)))
        return _record(txn)

    return JSONResponse(await _run(do))


async def commit(request: Request) -> JSONResponse:
    lake, txid = _lake(request), request.path_params["txid"]
    await read_json(request, ())

    def do() -> dict[str, Any]:
        txn = _attach(lake, txid)
        txn.commit()
        return _record(txn)

    return JSONResponse(await _run(do))


async def abort(request: Request) -> JSONResponse:
    lake, txid = _lake(request), request.path_params["txid"]
    await read_json(request, ())

    def do() -> dict[str, Any]:
        txn = _attach(lake, txid)
        txn.abort()
        return _record(txn)

    return JSONResponse(await _run(do))


async def lock(request: Request) -> JSONResponse:
    fields = ("node", "mode", "child_key", "attribute_key", "waitable", "wait_s")
    data, lake, txid = await read_json(request, fields), _lake(request), request.path_params["txid"]
    wait_s = data.get("wait_s")
    if wait_s is not None and (isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or not 0 <= wait_s <= MAX_WAIT_S):
        raise ApiError(400, "ValueError", f"wait_s must be a number of seconds in 0..{MAX_WAIT_S:g}")

    def do() -> dict[str, Any]:
        txn = _attach(lake, txid)
        handle = txn.lock(
            data.get("node"), mode=data.get("mode", "exclusive"), child_key=data.get("child_key"),
            attribute_key=data.get("attribute_key"), waitable=bool(data.get("waitable", False)),
        )
        record = handle.record()
        deadline = time.monotonic() + (wait_s or 0)
        while record is not None and record.state == "pending" and time.monotonic() < deadline:
            time.sleep(_WAIT_POLL_S)  # still pending at the deadline: the answer says so, the client polls
            record = handle.record()
        return {"id": handle.id, "node": handle.node, "mode": handle.mode, "txn": handle.txn,
                "state": "released" if record is None else record.state,
                "child_key": handle.child_key, "attribute_key": handle.attribute_key}

    return JSONResponse(await _run(do), status_code=201)


async def txn_locks(request: Request) -> JSONResponse:
    lake, txid = _lake(request), request.path_params["txid"]
    return JSONResponse({"locks": await _run(lambda: [asdict(r) for r in _attach(lake, txid).locks()])})


async def unlock(request: Request) -> JSONResponse:
    lake, txid, node = _lake(request), request.path_params["txid"], request.query_params.get("node", "")
    await _run(lambda: _attach(lake, txid).unlock(node))
    return JSONResponse({})


async def node_locks(request: Request) -> JSONResponse:
    lake, node = _lake(request), request.query_params.get("node", "")
    return JSONResponse({"locks": await _run(lambda: [asdict(r) for r in lake.locks(node)])})


BASE = "/kv/v1/durable"
ROUTES = [
    route(BASE + "/txns", begin, "POST"),
    route(BASE + "/txns", list_transactions, "GET", params=('include_finished',)),
    route(BASE + "/txns/{txid}", get_transaction, "GET"),
    route(BASE + "/txns/{txid}/ping", ping, "POST"),
    route(BASE + "/txns/{txid}/commit", commit, "POST"),
    route(BASE + "/txns/{txid}/abort", abort, "POST"),
    route(BASE + "/txns/{txid}/locks", lock, "POST"),
    route(BASE + "/txns/{txid}/locks", txn_locks, "GET"),
    route(BASE + "/txns/{txid}/locks", unlock, "DELETE", params=('node',)),
    route(BASE + "/locks", node_locks, "GET", params=('node',)),
]
