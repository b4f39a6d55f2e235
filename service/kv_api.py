"""The KV and transaction API, ``/kv/v1/...``.

=======  =====================================  ==========================================
method   path                                   what
=======  =====================================  ==========================================
GET      /kv/v1/info                            ``{"revision", "seq", "version"}`` of the store (?consistency)
POST     /kv/v1/refresh                         catch up with other writers
POST     /kv/v1/compact                         ``{"revision"}``: raise the compaction floor (etcd's Compact)
GET      /kv/v1/compact                         ``{"compacted_revision"}``: the floor (0: none)
GET      /kv/v1/keys/{key}                      value and revision (JSON, or raw with Accept: octet-stream);
                                                ?revision=N (as right after commit N; 410 below the
                                                compaction floor), ?consistency; ?version=N is deprecated
PUT      /kv/v1/keys/{key}                      set (JSON ``{"value", "ttl", "lease"}`` or raw body + ?ttl&lease);
                                                ``If-Match: "rev"`` / ``If-None-Match: *``: 412 when it fails
DELETE   /kv/v1/keys/{key}                      delete (``If-Match: "rev"``)
GET      /kv/v1/scan                            one page: ?start&end&prefix&reverse&limit&page_size&cursor&consistency;
                                                ?revision=N: as right after commit N (every page the same N)
POST     /kv/v1/batch                           ``{"ops": [{"op": "put"|"delete", "key", "value", "ttl",
                                                "lease", "if_seq", "if_absent"}]}``: one commit, all or nothing
POST     /kv/v1/txns                            begin ``{"isolation", "ttl"}`` -> ``{"id", ...}``
GET      /kv/v1/txns/{id}/keys/{key}            read in the transaction (?for_update=true)
PUT      /kv/v1/txns/{id}/keys/{key}            buffer a put
DELETE   /kv/v1/txns/{id}/keys/{key}            buffer a delete
GET      /kv/v1/txns/{id}/scan                  one page of the transaction's view
POST     /kv/v1/txns/{id}/commit                commit -> ``{"seq"}``
POST     /kv/v1/txns/{id}/rollback              discard
=======  =====================================  ==========================================

The compare-and-set (``/kv/v1/txn``), watch and lease routes are in
:mod:`service.kv_txn`, :mod:`service.kv_watch` and :mod:`service.kv_leases`.

Revisions: a key's revision is the seq of the commit that wrote its value.
Every key answer carries it, as ``"revision"`` and as ``ETag: "<revision>"``;
every write answers ``{"seq", "revision"}`` (the same number) with its ETag.
Reads are linearizable unless ``?consistency=serializable``: they see every
write acknowledged before the request, by this or any other server or
process (:mod:`kvstore.freshness`).

Keys in paths are unpadded base64url (see :mod:`service.codec`). Writes and
commits accept ``Idempotency-Key`` (see :mod:`service.idempotency`); a replayed
answer carries ``Idempotent-Replayed: true``. Every store call runs in a worker
thread: commits block until their root file is durable.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import islice
from concurrent.futures import Future
from typing import Any, Awaitable, Iterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kvstore import SERIALIZABLE, ConflictError, PreconditionFailedError, SnapshotTooOldError, Store, WriteBatch
from kvstore.batch import check_lease_id
from kvstore.freshness import check_consistency
from kvstore.reader import visible_value
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


def etag(revision: int) -> dict[str, str]:
    """The ``ETag`` header of a key at ``revision``."""
    return {"ETag": f'"{revision}"'}


def _value_response(request: Request, stored_key: bytes, value: bytes | None, revision: int | None) -> Response:
    """The value, with its revision unless None (a transaction's own buffered write has none yet)."""
    if value is None:
        raise ApiError(404, "NoSuchKeyError", "key not found")
    headers = etag(revision) if revision is not None else None
    if OCTET_STREAM in request.headers.get("accept", ""):
        return Response(value, media_type=OCTET_STREAM, headers=headers)
    body: dict[str, Any] = {"key": b64encode(client_key(stored_key)), "value": b64encode(value)}
    if revision is not None:
        body["revision"] = revision
    return JSONResponse(body, headers=headers)


def consistency_param(request: Request) -> str | None:
    """``?consistency=``: None (the default, linearizable) or a checked level."""
    raw = request.query_params.get("consistency")
    return None if raw is None else check_consistency(raw)


def lease_param(raw: object, what: str) -> int | str | None:
    """A lease id from a request (None: no lease); 400 naming ``what`` if it is not one.

    An int64 comes as a JSON number or as decimal text (a path, a query, or a JSON string as etcd's
    gateway writes int64s); 32 hex characters name a lease granted before ids were int64s.
    """
    if raw is None:
        return None
    if isinstance(raw, str) and raw.isdigit() and len(raw) <= 19:
        raw = int(raw)
    try:
        return check_lease_id(raw)
    except TypeError as exc:
        raise ApiError(400, "ValueError", f"{what}: {exc}") from None


def _revision_value(raw: object, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ApiError(400, "ValueError", f"{what} must be a revision (an int >= 1), got {raw!r}")
    return raw


def _conditions(request: Request) -> tuple[int | None, bool]:
    """``(if_seq, if_absent)`` from ``If-Match: "rev"`` / ``If-None-Match: *``."""
    if_match = request.headers.get("if-match")
    if_none_match = request.headers.get("if-none-match")
    if if_match is not None and if_none_match is not None:
        raise ApiError(400, "ValueError", "If-Match and If-None-Match exclude each other")
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise ApiError(400, "ValueError", f"If-None-Match must be *, got {if_none_match!r}")
        return None, True
    if if_match is None:
        return None, False
    text = if_match.strip()
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        text = text[1:-1]
    if not text.isdigit() or int(text) < 1:
        raise ApiError(400, "ValueError", f'If-Match must be a revision ETag such as "12", got {if_match!r}')
    return int(text), False


async def _put_body(request: Request) -> tuple[bytes, float | None, int | str | None]:
    """The value, ttl and lease of a PUT: a raw body (+ ?ttl=&lease=) or JSON ``{"value", "ttl", "lease"}``."""
    if request.headers.get("content-type", "").startswith(OCTET_STREAM):
        return (
            await request.body(), ttl_value(query_number(request, "ttl", float)),
            lease_param(request.query_params.get("lease"), "lease"),
        )
    data = await read_json(request, ("value", "ttl", "lease"))
    if "value" not in data:
        raise ApiError(400, "ValueError", "body must have a base64 'value'")
    for name in ("ttl", "lease"):
        if request.query_params.get(name) is not None:
            raise ApiError(400, "ValueError", f"with a JSON body, {name} goes in the body, not the query")
    return b64decode(data["value"], "value"), ttl_value(data.get("ttl")), lease_param(data.get("lease"), "lease")


def _parse_ops(data: dict[str, Any]) -> WriteBatch:
    raw_ops = data.get("ops")
    if not isinstance(raw_ops, list) or not raw_ops:
        raise ApiError(400, "ValueError", "body must have a non-empty list 'ops'")
    batch = WriteBatch()
    for i, raw in enumerate(raw_ops):
        if not isinstance(raw, dict):
            raise ApiError(400, "ValueError", f"ops[{i}] must be an object")
        known = {"op", "key", "value", "ttl", "lease", "if_seq", "if_absent"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ApiError(400, "ValueError", f"ops[{i}] has unknown field(s) {unknown}; known: {sorted(known)}")
        key = store_key(b64decode(raw.get("key"), f"ops[{i}].key"), f"ops[{i}].key")
        if_seq = None if raw.get("if_seq") is None else _revision_value(raw["if_seq"], f"ops[{i}].if_seq")
        if_absent = raw.get("if_absent", False)
        if not isinstance(if_absent, bool):
            raise ApiError(400, "ValueError", f"ops[{i}].if_absent must be true or false, got {if_absent!r}")
        if raw.get("op") == "put":
            value, ttl = b64decode(raw.get("value"), f"ops[{i}].value"), ttl_value(raw.get("ttl"))
            lease = lease_param(raw.get("lease"), f"ops[{i}].lease")
            try:  # WriteBatch refuses ttl with lease, and if_seq with if_absent
                batch.put(key, value, ttl, if_seq=if_seq, if_absent=if_absent, lease=lease)
            except ValueError as exc:
                raise ApiError(400, "ValueError", f"ops[{i}]: {exc}") from None
        elif raw.get("op") == "delete":
            if if_absent or raw.get("ttl") is not None or raw.get("lease") is not None or "value" in raw:
                raise ApiError(400, "ValueError", f"ops[{i}]: a delete takes only key and if_seq")
            batch.delete(key, if_seq=if_seq)
        else:
            raise ApiError(400, "ValueError", f"ops[{i}].op must be 'put' or 'delete', got {raw.get('op')!r}")
    return batch


async def _commit(request: Request, api: str, outcome: Awaitable[tuple[int, bool]]) -> JSONResponse:
    """Await a commit's ``(seq, replayed)``; count it; answer ``{"seq", "revision"}`` and the ETag."""
    metrics = _state(request).metrics
    try:
        seq, replayed = await outcome
    except ConflictError as exc:
        metrics.conflicts.labels(api).inc()
        raise ConflictError(client_keys_in(str(exc))) from exc
    except PreconditionFailedError as exc:
        raise PreconditionFailedError(client_keys_in(str(exc))) from exc
    headers = etag(seq)
    if replayed:
        metrics.idempotent_replays.inc()
        headers["Idempotent-Replayed"] = "true"
    else:
        metrics.commits.labels(api).inc()
    return JSONResponse({"seq": seq, "revision": seq}, headers=headers)


async def _commit_batch(request: Request, batch: WriteBatch, body: bytes) -> JSONResponse:
    idem_key = check_idempotency_key(request.headers.get("idempotency-key"))
    if idem_key is None:
        # A blind batch joins the committer's queue from the event loop: no
        # worker thread waits on it, and concurrent requests share group commits.
        future = _state(request).store.submit_write(batch)
        if future is not None:
            return await _commit(request, "kv", _first_commit(future))
    # The conditions are part of the request: a retry must carry the same ones.
    conditions = (request.headers.get("if-match", ""), request.headers.get("if-none-match", ""))
    request_text = f"{request.method} {request.url.path} {request.url.query} {conditions}"
    fingerprint = idempotency.fingerprint(request_text, body) if idem_key else None
    store = _state(request).store
    return await _commit(request, "kv", run_in_threadpool(idempotency.commit_batch, store, batch, idem_key, fingerprint))


async def _first_commit(future: Future[int]) -> tuple[int, bool]:
    return await asyncio.wrap_future(future), False


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
    consistency = consistency_param(request)

    def read() -> tuple[int, int]:
        with store.snapshot(fresh=False if consistency == "serializable" else None) as snap:
            return snap.version, snap.seq

    version, seq = await run_in_threadpool(read)
    return JSONResponse({"revision": seq, "seq": seq, "version": version})


async def refresh(request: Request) -> JSONResponse:
    await read_json(request, ())  # takes no field: one sent is refused, not ignored
    store = _state(request).store
    version = await run_in_threadpool(store.refresh)
    return JSONResponse({"version": version, "seq": store.seq})


async def compact(request: Request) -> JSONResponse:
    """``{"revision": N}``: raise the compaction floor (etcd's Compact); reads and watches below N get 410."""
    data = await read_json(request, ("revision",))
    revision = data.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise ApiError(400, "ValueError", f"revision must be a revision (an int >= 0), got {revision!r}")
    store = _state(request).store
    # A revision not committed yet is a ValueError (400); one at or below the floor, SnapshotTooOldError (410).
    floor = await run_in_threadpool(store.compact_revisions, revision)
    return JSONResponse({"compacted_revision": floor})


async def compacted(request: Request) -> JSONResponse:
    store = _state(request).store
    return JSONResponse({"compacted_revision": await run_in_threadpool(store.compacted_revision)})


async def get_key(request: Request) -> Response:
    key = _key(request)
    store = _state(request).store
    revision = query_number(request, "revision", int)
    version = query_number(request, "version", int)
    consistency = consistency_param(request)
    if revision is None and version is None:
        if store.reads_without_waiting():  # memory and local files only: no thread hop
            value, got = store.get_with_revision(key, consistency)
        else:
            value, got = await run_in_threadpool(store.get_with_revision, key, consistency)
        return _value_response(request, key, value, got)
    if revision is not None and version is not None:
        raise ApiError(400, "ValueError", "revision and version exclude each other (version is the deprecated one)")
    if consistency is not None:
        raise ApiError(400, "ValueError", "revision and consistency exclude each other (a past revision is fixed)")
    if revision is not None:
        return await _get_at_revision(request, key, revision)
    return await _get_at_version(request, key, version)


async def _get_at_revision(request: Request, key: bytes, revision: int) -> Response:
    """``?revision=N``: the key as it was right after the commit with seq N (etcd's Range at a revision)."""
    store = _state(request).store
    if revision < 0:
        raise ApiError(400, "ValueError", f"revision must be >= 0, got {revision}")

    def read_at() -> tuple[bytes | None, int | None]:
        # A future revision is a ValueError (400); one below the compaction floor (or dropped by
        # retention) is SnapshotTooOldError (410), etcd's "required revision has been compacted".
        with store.at(revision=revision) as snap:
            row = snap.get_row(key)
        value = visible_value(row)
        return (None, None) if value is None or row is None else (value, int(row[1]))

    value, got = await run_in_threadpool(read_at)
    return _value_response(request, key, value, got)


async def _get_at_version(request: Request, key: bytes, version: int) -> Response:
    """``?version=N`` (deprecated: a lakekv version, an internal grouping of commits; take ``?revision=``)."""
    store = _state(request).store
    if version < 0:
        raise ApiError(400, "ValueError", f"version must be >= 0, got {version}")

    def read_at() -> tuple[bytes | None, int | None]:
        if version > store.version:
            store.refresh()
        if version > store.version:
            raise ApiError(404, "NoSuchVersionError", f"version {version} does not exist yet (newest: {store.version})")
        with store.at(version) as snap:
            # A version whose commits all lie below the compaction floor is compacted, as a revision is.
            floor = store.compacted_revision()
            if snap.seq < floor:
                raise SnapshotTooOldError(f"version {version} has been compacted (the floor is revision {floor})")
            row = snap.get_row(key)
        value = visible_value(row)
        return (None, None) if value is None or row is None else (value, int(row[1]))

    value, got = await run_in_threadpool(read_at)
    return _value_response(request, key, value, got)


async def put_key(request: Request) -> JSONResponse:
    key = _key(request)
    if_seq, if_absent = _conditions(request)
    value, ttl, lease = await _put_body(request)
    # WriteBatch refuses ttl with lease (a ValueError: 400).
    batch = WriteBatch().put(key, value, ttl, if_seq=if_seq, if_absent=if_absent, lease=lease)
    return await _commit_batch(request, batch, await request.body())


async def delete_key(request: Request) -> JSONResponse:
    key = _key(request)
    if_seq, if_absent = _conditions(request)
    if if_absent:
        raise ApiError(400, "ValueError", "If-None-Match: * makes no sense on DELETE (the key must exist to be deleted)")
    return await _commit_batch(request, WriteBatch().delete(key, if_seq=if_seq), b"")


async def scan(request: Request) -> JSONResponse:
    lo, hi, reverse, page_rows = _scan_args(request)
    consistency = consistency_param(request)
    revision = query_number(request, "revision", int)
    if revision is not None and consistency is not None:
        raise ApiError(400, "ValueError", "revision and consistency exclude each other (a past revision is fixed)")
    if revision is not None and revision < 0:
        raise ApiError(400, "ValueError", f"revision must be >= 0, got {revision}")
    if page_rows == 0:
        return JSONResponse({"items": [], "cursor": None})
    store = _state(request).store
    if revision is None:
        return await run_in_threadpool(
            lambda: _page(store.scan(lo, hi, reverse=reverse, consistency=consistency), page_rows)
        )

    def page_at() -> JSONResponse:
        # Every page of a paged scan names the same revision, so the pages are one consistent view.
        with store.at(revision=revision) as snap:
            return _page(snap.scan(lo, hi, reverse=reverse), page_rows)

    return await run_in_threadpool(page_at)


async def batch(request: Request) -> JSONResponse:
    data = await read_json(request, ("ops",))
    return await _commit_batch(request, _parse_ops(data), await request.body())


# -- interactive transactions --------------------------------------------------


async def begin(request: Request) -> JSONResponse:
    data = await read_json(request, ("isolation", "ttl"))
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

    def read() -> tuple[bytes | None, int | None]:
        with txns.use(txn_id) as txn:
            if for_update:
                return txn.get_for_update(key), None
            return txn.get_with_revision(key)

    value, revision = await run_in_threadpool(read)
    return _value_response(request, key, value, revision)


async def txn_put(request: Request) -> JSONResponse:
    txn_id, key = _txn_id(request), _key(request)
    value, ttl, lease = await _put_body(request)
    if lease is not None:
        raise ApiError(400, "ValueError", "a lease is attached by a plain write or POST /kv/v1/txn, not inside an interactive transaction")
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
    await read_json(request, ())
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

    return await _commit(request, "txn", run_in_threadpool(commit))


async def txn_rollback(request: Request) -> JSONResponse:
    txn_id = _txn_id(request)
    await read_json(request, ())
    txns = _state(request).txns

    def rollback() -> None:
        with txns.use(txn_id) as txn:
            txn.rollback()

    await run_in_threadpool(rollback)
    return JSONResponse({})


ROUTES = [
    route("/kv/v1/info", info, "GET", params=("consistency",)),
    route("/kv/v1/refresh", refresh, "POST"),
    route("/kv/v1/compact", compact, "POST"),
    route("/kv/v1/compact", compacted, "GET"),
    route("/kv/v1/keys/{key}", get_key, "GET", params=("revision", "version", "consistency")),
    route("/kv/v1/keys/{key}", put_key, "PUT", params=("ttl", "lease")),
    route("/kv/v1/keys/{key}", delete_key, "DELETE"),
    route("/kv/v1/scan", scan, "GET",
          params=("start", "end", "prefix", "cursor", "reverse", "page_size", "limit", "consistency", "revision")),
    route("/kv/v1/batch", batch, "POST"),
    route("/kv/v1/txns", begin, "POST"),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_get, "GET", params=('for_update',)),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_put, "PUT", params=('ttl',)),
    route("/kv/v1/txns/{txn_id}/keys/{key}", txn_delete, "DELETE"),
    route("/kv/v1/txns/{txn_id}/scan", txn_scan, "GET", params=('start', 'end', 'prefix', 'cursor', 'reverse', 'page_size', 'limit')),
    route("/kv/v1/txns/{txn_id}/commit", txn_commit, "POST"),
    route("/kv/v1/txns/{txn_id}/rollback", txn_rollback, "POST"),
]
