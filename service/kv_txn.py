"""``POST /kv/v1/txn``: etcd's ``Txn(compare).Then(ops).Else(ops)`` in one request.

Body::

    {"compare": [{"key": b64, "target": "revision", "op": "==", "revision": 12},
                 {"key": b64, "target": "value", "op": "!=", "value": b64}],
     "success": [{"op": "put", "key": b64, "value": b64, "ttl": 5 | "lease": id},
                 {"op": "delete", "key": b64}, {"op": "get", "key": b64}],
     "failure": [...]}

Every compare must hold for ``success`` to run, else ``failure`` runs. ``op``
is one of ``== != < > <= >=``. A key without a value has revision 0 (so
``revision == 0`` means "absent", as etcd's ``mod_revision``), and no value:
a value compare on it is false whatever the op. The answer is
``{"succeeded", "revision", "responses"}``: one response per op of the branch
that ran (``get``: ``{"key", "value", "revision"}``, value null if absent;
``put`` and ``delete``: ``{}``), and ``revision`` is the commit's seq, which
is every put's new revision.

It runs as one SERIALIZABLE transaction on the newest version, so a commit
racing it on any compared or read key makes it run again: exactly one of
several racing compare-and-sets wins. With ``Idempotency-Key`` the answer is
recorded in the same commit and a retry gets it back (``Idempotent-Replayed``).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from kvstore import SERIALIZABLE, ConflictError, Store, Transaction, leases
from service import idempotency
from service.codec import b64decode, b64encode, client_key, read_json, store_key, ttl_value
from service.errors import ApiError
from service.kv_api import KvState, etag, lease_param
from service.routing import route
from service.security import check_idempotency_key

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}
_MAX_ITEMS = 1024  # compares + ops per request, as etcd's --max-txn-ops default (128) raised for batches


class Compare:
    def __init__(self, key: bytes, target: str, op: str, expected: int | bytes) -> None:
        self.key, self.target, self.op, self.expected = key, target, op, expected

    def holds(self, txn: Transaction) -> bool:
        value, revision = txn.get_with_revision(self.key)
        if self.target == "revision":
            return _OPS[self.op](revision or 0, self.expected)
        return value is not None and _OPS[self.op](value, self.expected)


class TxnOp:
    def __init__(self, kind: str, key: bytes, value: bytes | None, ttl: float | None, lease: int | str | None) -> None:
        self.kind, self.key, self.value, self.ttl, self.lease = kind, key, value, ttl, lease

    def run(self, txn: Transaction) -> dict[str, Any]:
        if self.kind == "get":
            value, revision = txn.get_with_revision(self.key)
            return {"key": b64encode(client_key(self.key)), "value": None if value is None else b64encode(value),
                    "revision": revision}
        if self.kind == "delete":
            txn.delete(self.key)
        elif self.lease is not None:
            assert self.value is not None
            leases.attach_in(txn, self.key, self.value, self.lease)
        else:
            assert self.value is not None
            txn.put(self.key, self.value, self.ttl)
        return {}


def _object(raw: object, what: str, known: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ApiError(400, "ValueError", f"{what} must be an object")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ApiError(400, "ValueError", f"{what} has unknown field(s) {unknown}; known: {sorted(known)}")
    return raw


def _parse_compare(raw: object, what: str) -> Compare:
    data = _object(raw, what, {"key", "target", "op", "revision", "value"})
    key = store_key(b64decode(data.get("key"), f"{what}.key"), f"{what}.key")
    op = data.get("op", "==")
    if op not in _OPS:
        raise ApiError(400, "ValueError", f"{what}.op must be one of {sorted(_OPS)}, got {op!r}")
    target = data.get("target")
    if target == "revision":
        expected = data.get("revision")
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise ApiError(400, "ValueError", f"{what}.revision must be an int >= 0 (0: no value), got {expected!r}")
        if "value" in data:
            raise ApiError(400, "ValueError", f"{what}: a revision compare takes no 'value'")
        return Compare(key, target, op, expected)
    if target == "value":
        if "revision" in data:
            raise ApiError(400, "ValueError", f"{what}: a value compare takes no 'revision'")
        return Compare(key, target, op, b64decode(data.get("value"), f"{what}.value"))
    raise ApiError(400, "ValueError", f"{what}.target must be 'revision' or 'value', got {target!r}")


def _parse_op(raw: object, what: str) -> TxnOp:
    data = _object(raw, what, {"op", "key", "value", "ttl", "lease"})
    key = store_key(b64decode(data.get("key"), f"{what}.key"), f"{what}.key")
    kind = data.get("op")
    if kind == "put":
        ttl, lease = ttl_value(data.get("ttl")), lease_param(data.get("lease"), f"{what}.lease")
        if ttl is not None and lease is not None:
            raise ApiError(400, "ValueError", f"{what}: ttl and lease exclude each other")
        return TxnOp("put", key, b64decode(data.get("value"), f"{what}.value"), ttl, lease)
    if kind in ("delete", "get"):
        extra = sorted({"value", "ttl", "lease"} & set(data))
        if extra:
            raise ApiError(400, "ValueError", f"{what}: a {kind} takes only 'key', not {extra}")
        return TxnOp(kind, key, None, None, None)
    raise ApiError(400, "ValueError", f"{what}.op must be 'put', 'delete' or 'get', got {kind!r}")


def parse(data: dict[str, Any]) -> tuple[list[Compare], list[TxnOp], list[TxnOp]]:
    """The compares and the two branches of a txn body.

    Raises:
        ApiError: 400 naming the first bad field.
    """
    unknown = sorted(set(data) - {"compare", "success", "failure"})
    if unknown:
        raise ApiError(400, "ValueError", f"unknown field(s) {unknown}; known: compare, success, failure")
    lists: dict[str, list[Any]] = {}
    for name in ("compare", "success", "failure"):
        raw = data.get(name, [])
        if not isinstance(raw, list):
            raise ApiError(400, "ValueError", f"{name} must be a list")
        lists[name] = raw
    if sum(len(v) for v in lists.values()) > _MAX_ITEMS:
        raise ApiError(400, "ValueError", f"a txn has at most {_MAX_ITEMS} compares and ops")
    compares = [_parse_compare(raw, f"compare[{i}]") for i, raw in enumerate(lists["compare"])]
    success = [_parse_op(raw, f"success[{i}]") for i, raw in enumerate(lists["success"])]
    failure = [_parse_op(raw, f"failure[{i}]") for i, raw in enumerate(lists["failure"])]
    return compares, success, failure


def execute(
    store: Store, compares: list[Compare], success: list[TxnOp], failure: list[TxnOp],
    idempotency_key: str | None, request_fingerprint: str | None,
) -> tuple[dict[str, Any], bool]:
    """Run the txn; return ``(answer, replayed)``.

    Raises:
        ConflictError: still conflicting after the retries.
        LeaseNotFoundError: a put's lease is gone (nothing written).
    """
    for attempt in range(idempotency.MAX_ATTEMPTS):
        if idempotency_key is not None:
            assert request_fingerprint is not None
            found = idempotency.recorded(store, idempotency_key, request_fingerprint)
            if found is not None:
                seq, record = found
                return {**record["answer"], "revision": seq}, True
        txn = store.begin(SERIALIZABLE, fresh=attempt > 0 or None)
        try:
            succeeded = all(compare.holds(txn) for compare in compares)
            responses = [op.run(txn) for op in (success if succeeded else failure)]
            answer = {"succeeded": succeeded, "responses": responses}
            if idempotency_key is not None and not idempotency.write_record(
                txn, idempotency_key, request_fingerprint, answer
            ):
                txn.commit()  # a duplicate recorded it: wait for its commit, then answer from the record
                continue
            revision = txn.commit()  # a read-only branch: the snapshot's seq
            return {**answer, "revision": revision}, False
        except ConflictError:
            txn.rollback()
        except BaseException:
            txn.rollback()
            raise
    raise ConflictError("txn kept conflicting with concurrent commits; retry it")


async def txn(request: Request) -> JSONResponse:
    state: KvState = request.app.state.kv
    body = await request.body()
    compares, success, failure = parse(await read_json(request))
    idem_key = check_idempotency_key(request.headers.get("idempotency-key"))
    fingerprint = idempotency.fingerprint("POST /kv/v1/txn", body) if idem_key else None
    try:
        answer, replayed = await run_in_threadpool(execute, state.store, compares, success, failure, idem_key, fingerprint)
    except ConflictError:
        state.metrics.conflicts.labels("txn").inc()
        raise
    headers = etag(answer["revision"])
    if replayed:
        state.metrics.idempotent_replays.inc()
        headers["Idempotent-Replayed"] = "true"
    else:
        state.metrics.commits.labels("txn").inc()
    return JSONResponse(answer, headers=headers)


ROUTES = [route("/kv/v1/txn", txn, "POST")]
