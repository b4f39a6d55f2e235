"""The KV and transaction API, ``/kv/v1/...``.

=======  =====================================  ==========================================
method   path                                   what
=======  =====================================  ==========================================
GET      /kv/v1/info                            ``{"version", "seq"}`` of the store
POST     /kv/v1/refresh                         catch up with other writers
GET      /kv/v1/keys/{key}                      value (JSON, or raw with Accept: octet-stream)
PUT      /kv/v1/keys/{key}                      set (JSON ``{"value", "ttl"}`` or raw body + ?ttl=)
DELETE   /kv/v1/keys/{key}                      delete
GET      /kv/v1/scan                            one page: ?start&end&prefix&reverse&limit&page_size&cursor
POST     /kv/v1/batch                           ``{"ops": [{"op": "put"|"delete", "key", "value", "ttl"}]}``
POST     /kv/v1/txns                            begin ``{"isolation", "ttl"}`` -> ``{"id", ...}``
GET      /kv/v1/txns/{id}/keys/{key}            read in the transaction (?for_update=true)
PUT      /kv/v1/txns/{id}/keys/{key}            buffer a put
DELETE   /kv/v1/txns/{id}/keys/{key}            buffer a delete
GET      /kv/v1/txns/{id}/scan                  one page of the transaction's view
POST     /kv/v1/txns/{id}/commit                commit -> ``{"seq"}``
POST     /kv/v1/txns/{id}/rollback              discard
=======  =====================================  ==========================================

Keys in paths are unpadded base64url (see :mod:`service.codec`). Writes and
commits accept ``Idempotency-Key`` (see :mod:`service.idempotency`); a replayed
answer carries ``Idempotent-Replayed: true``. Every store call runs in a worker
thread: commits block until their root file is durable.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Iterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kvstore import SERIALIZABLE, ConflictError, Store
from service import idempotency
from service.codec import (
    b64decode,
    client_keys_in,
    b64encode,
    client_key,
    path_key_decode,
    path_key_encode,
    query_bool,
    query_key,
    query_number,
    read_json,
    store_key,
    store_range,
    ttl_value,
)
from service.config import ServerConfig
from service.routing import route
from service.errors import ApiError
from service.metrics import Metrics
from service.security import check_idempotency_key, check_txn_id
from service.txn_registry import TxnRegistry

OCTET_STREAM = "application/octet-stream"


@dataclass
class KvState:
    """What the KV handlers share; built by the app's lifespan."""

    config: ServerConfig
    store: Store
    txns: TxnRegistry
    metrics: Metrics


def _state(request: Request) -> KvState:
    return request.app.state.kv  # type: ignore[no-any-return]


def _key(request: Request) -> bytes:
    return store_key(path_key_decode(request.path_params["key"], "key"))


def _txn_id(request: Request) -> str:
    return check_txn_id(request.path_params["txn_id"])


def _value_response(request: Request, stored_key: bytes, value: bytes | None) -> Response:
    if value is None:
        raise ApiError(404, "NoSuchKeyError", "key not found")
    if OCTET_STREAM in request.headers.get("accept", ""):
        return Response(value, media_type=OCTET_STREAM)
    return JSONResponse({"key": b64encode(client_key(stored_key)), "value": b64encode(value)})


async def _put_body(request: Request) -> tuple[bytes, float | None]:
    """The value and ttl of a PUT: a raw body (+ ?ttl=) or JSON ``{"value", "ttl"}``."""
    if request.headers.get("content-type", "").startswith(OCTET_STREAM):
        return await request.body(), ttl_value(query_number(request, "ttl", float))
    data = await read_json(request)
    if "value" not in data:
        raise ApiError(400, "ValueError", "body must have a base64 'value'")
    return b64decode(data["value"], "value"), ttl_value(data.get("ttl"))


def _parse_ops(data: dict[str, Any]) -> list[idempotency.Op]:
    raw_ops = data.get("ops")
    if not isinstance(raw_ops, list) or not raw_ops:
        raise ApiError(400, "ValueError", "body must have a non-empty list 'ops'")
    ops: list[idempotency.Op] = []
    for i, raw in enumerate(raw_ops):
        if not isinstance(raw, dict):
            raise ApiError(400, "ValueError", f"ops[{i}] must be an object")
        key = store_key(b64decode(raw.get("key"), f"ops[{i}].key"), f"ops[{i}].key")
        if raw.get("op") == "put":
            ops.append(("put", key, b64decode(raw.get("value"), f"ops[{i}].value"), ttl_value(raw.get("ttl"))))
        elif raw.get("op") == "delete":
            ops.append(("delete", key, None, None))
        else:
            raise ApiError(400, "ValueError", f"ops[{i}].op must be 'put' or 'delete', got {raw.get('op')!r}")
    return ops


async def _commit(
    request: Request, api: str, fn: Callable[..., tuple[int, bool]], *args: Any
) -> JSONResponse:
    """Run a committing call in a worker thread; count it; answer ``{"seq"}``."""
    metrics = _state(request).metrics
    try:
        seq, replayed = await run_in_threadpool(fn, *args)
    except ConflictError as exc:
        metrics.conflicts.labels(api).inc()
        raise ConflictError(client_keys_in(str(exc))) from exc
    headers = {}
    if replayed:
        metrics.idempotent_replays.inc()
        headers["Idempotent-Replayed"] = "true"
    else:
        metrics.commits.labels(api).inc()
    return JSONResponse({"seq": seq}, headers=headers)


async def _commit_ops(request: Request, ops: list[idempotency.Op], body: bytes) -> JSONResponse:
    idem_key = check_idempotency_key(request.headers.get("idempotency-key"))
    fingerprint = idempotency.fingerprint(request.method + " " + request.url.path, body) if idem_key else None
    return await _commit(request, "kv", idempotency.commit_ops, _state(request).store, ops, idem_key, fingerprint)


def _page(rows: Iterator[tuple[bytes, bytes]], page_rows: int) -> JSONResponse:
    items = list(islice(rows, page_rows + 1))
    cursor = None
    if len(items) > page_rows:
        items = items[:page_rows]
        cursor = path_key_encode(client_key(items[-1][0]))
    return JSONResponse({"items": [[b64encode(client_key(k)), b64encode(v)] for k, v in items], "cursor": cursor})


def _scan_args(request: Request) -> tuple[bytes, bytes | None, bool, int]:
    """``(lo, hi, reverse, page_rows)`` of a scan page request."""
    config = _state(request).config
    reverse = query_bool(request, "reverse")
    lo, hi = store_range(
        query_key(request, "start"), query_key(request, "end"), query_key(request, "prefix"),
        query_key(request, "cursor"), reverse,
    )
    page_rows = query_number(request, "page_size", int, config.scan_page_rows)
    if not 1 <= page_rows <= config.max_scan_page_rows:
        raise ApiError(400, "ValueError", f"page_size must be in 1..{config.max_scan_page_rows}, got {page_rows}")
    limit = query_number(request, "limit", int)
    if limit is not None:
        if limit < 0:
            raise ApiError(400, "ValueError", f"limit must be a non-negative int, got {limit}")
        page_rows = min(page_rows, limit)
    return lo, hi, reverse, page_rows


# -- plain store ---------------------------------------------------------------


async def info(request: Request) -> JSONResponse:
    store = _state(request).store
    return JSONResponse({"version": store.version, "seq": store.seq})


async def refresh(request: Request) -> JSONResponse:
    store = _state(request).store
    version = await run_in_threadpool(store.refresh)
    return JSONResponse({"version": version, "seq": store.seq})


async def get_key(request: Request) -> Response:
    key = _key(request)
    value = await run_in_threadpool(_state(request).store.get, key)
    return _value_response(request, key, value)


async def put_key(request: Request) -> JSONResponse:
    key = _key(request)
    value, ttl = await _put_body(request)
    return await _commit_ops(request, [("put", key, value, ttl)], await request.body())


async def delete_key(request: Request) -> JSONResponse:
    return await _commit_ops(request, [("delete", _key(request), None, None)], b"")


async def scan(request: Request) -> JSONResponse:
    lo, hi, reverse, page_rows = _scan_args(request)
    if page_rows == 0:
        return JSONResponse({"items": [], "cursor": None})
    store = _state(request).store
    return await run_in_threadpool(lambda: _page(store.scan(lo, hi, reverse=reverse), page_rows))


async def batch(request: Request) -> JSONResponse:
    data = await read_json(request)
    return await _commit_ops(request, _parse_ops(data), await request.body())


# -- interactive transactions --------------------------------------------------


async def begin(request: Request) -> JSONResponse:
    data = await read_json(request)
    isolation = data.get("isolation", SERIALIZABLE)
    ttl = ttl_value(data.get("ttl"))
    txn_id, txn = await run_in_threadpool(_state(request).txns.begin, isolation, ttl)
    return JSONResponse(
        {"id": txn_id, "isolation": txn.isolation, "start_seq": txn.start_seq, "version": txn.version},
        status_code=201,
    )


async def txn_get(request: Request) -> Response:
    txn_id, key, for_update = _txn_id(request), _key(request), query_bool(request, "for_update")
    txns = _state(request).txns

    def read() -> bytes | None:
        with txns.use(txn_id) as txn:
            return txn.get_for_update(key) if for_update else txn.get(key)

    return _value_response(request, key, await run_in_threadpool(read))


async def txn_put(request: Request) -> JSONResponse:
    txn_id, key = _txn_id(request), _key(request)
    value, ttl = await _put_body(request)
    txns = _state(request).txns

    def write() -> None:
        with txns.use(txn_id) as txn:
            txn.put(key, value, ttl)
            txns.note_write(txn_id, key)

    await run_in_threadpool(write)
    return JSONResponse({})


async def txn_delete(request: Request) -> JSONResponse:
    txn_id, key = _txn_id(request), _key(request)
    txns = _state(request).txns

    def write() -> None:
        with txns.use(txn_id) as txn:
            txn.delete(key)
            txns.note_write(txn_id, key)

    await run_in_threadpool(write)
    return JSONResponse({})


async def txn_scan(request: Request) -> JSONResponse:
    txn_id = _txn_id(request)
    lo, hi, reverse, page_rows = _scan_args(request)
    txns = _state(request).txns

    def read() -> JSONResponse:
        with txns.use(txn_id) as txn:
            # Even an empty page joins the read set: the range was looked at.
            return _page(txn.scan(lo, hi, reverse=reverse), page_rows)

    if page_rows == 0:
        return JSONResponse({"items": [], "cursor": None})
    return await run_in_threadpool(read)


async def txn_commit(request: Request) -> JSONResponse:
    txn_id = _txn_id(request)
    idem_key = check_idempotency_key(request.headers.get("idempotency-key"))
    state = _state(request)

    def commit() -> tuple[int, bool]:
        try:
            digest = state.txns.writes_fingerprint(txn_id)
            with state.txns.use(txn_id) as txn:
                assert digest is not None, "use() found the transaction"
                return idempotency.commit_transaction(state.store, txn, idem_key, digest)
        except ApiError as exc:
            # A retry of a commit whose answer was lost: the transaction is
            # gone (finished, or the server restarted), but the record says
            # whether it committed.
            if exc.status in (404, 410):
                seq = idempotency.commit_recorded_only(state.store, idem_key)
                if seq is not None:
                    return seq, True
            raise

    return await _commit(request, "txn", commit)


async def txn_rollback(request: Request) -> JSONResponse:
    txn_id = _txn_id(request)
    txns = _state(request).txns

    def rollback() -> None:
        with txns.use(txn_id) as txn:
            txn.rollback()

    await run_in_threadpool(rollback)
    return JSONResponse({})


ROUTES = [
    route("/kv/v1/info", info, "GET"),
    route("/kv/v1/refresh", refresh, "POST"),
    route("/kv/v1/keys/{key}", get_key, "GET"),
    route("/kv/v1/keys/{key}", put_key, "PUT", params=('ttl',)),
    route("/kv/v1/keys/{key}", delete_key, "DELETE"),
    route("/kv/v1/scan", scan, "GET", params=('start', 'end', 'prefix', 'cursor', 'reverse', 'page_size', 'limit')),
    route("/kv/v1/batch", batch, "POST"),
    route("/kv/v1/txns", begin, "POST"),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_get, "GET", params=('for_update',)),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_put, "PUT", params=('ttl',)),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_delete, "DELETE"),
    route("/kv/v1/txns/{txn_id}/scan", txn_scan, "GET", params=('start', 'end', 'prefix', 'cursor', 'reverse', 'page_size', 'limit')),
    route("/kv/v1/txns/{txn_id}/commit", txn_commit, "POST"),
    route("/kv/v1/txns/{txn_id}/rollback", txn_rollback, "POST"),
]
