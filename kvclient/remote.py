"""A client for a ``lakekv serve`` server with the embedded store's API.

``kvstore.open("http://127.0.0.1:8181", token=...)`` returns a
:class:`RemoteStore` (this package registers the ``http`` and ``https``
schemes with :mod:`kvstore.registry`): ``put/get/get_with_revision/delete/write/scan`` (with
compare-and-set batches and leased puts), ``watch``, ``grant_lease``/``lease``,
``begin``/``transaction``/``run`` and transactions with ``get/get_for_update/put/delete/scan/commit/
rollback`` behave as on :class:`~kvstore.store.Store` (both satisfy
:class:`kvstore.api.KeyValueStore`), raise the same
exceptions (the server sends the exception's name; see ``service.errors``),
and validate arguments locally with the same messages. Not offered remotely:
``snapshot()`` and ``scan_batches()`` (use a transaction for several
consistent reads) and maintenance, which the server's own handle runs.

Transport (:mod:`kvclient.transport`): every request may be retried on a
transport failure, because every request is safe to repeat; each write or
commit carries an ``Idempotency-Key`` the server records in the same commit,
so a repeated one is answered from the record instead of committing twice.
Hence, as embedded, a caller never sees "outcome unknown": a write either
returns its seq or raises.

A scan is fetched in pages; each page is a consistent snapshot, but a paged
scan outside a transaction may see commits made between pages (inside a
transaction every page reads the transaction's snapshot).

Thread-safety: a RemoteStore may be shared by threads; a RemoteTransaction is
used by one thread at a time, as embedded.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any, Callable, ContextManager, Iterator, TypeVar

from kvclient.transport import HttpTransport, get_value, path_key, raise_error, scan_pages
from kvclient.watch import RemoteWatch
from kvstore.batch import (
    WriteBatch, check_key, check_lease_id, check_limit, check_value, expiry_from_ttl, scan_bounds,
)
from kvstore.errors import (
    ConflictError,
    SnapshotTooOldError,
    StoreClosedError,
    TransactionClosedError,
    TransactionExpiredError,
)
from kvstore.format.rows import PUT
from kvstore.freshness import check_consistency
from kvstore.oracle import ISOLATION_LEVELS, SERIALIZABLE
from kvstore.retrying import run_with_retries, transaction_scope
from kvstore.watch import check_watch_args

T = TypeVar("T")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _ttl_of(expire_at_ms: int | None) -> float | None:
    """A WriteBatch keeps absolute expiries; the wire carries seconds from now."""
    if expire_at_ms is None:
        return None
    return max(0.001, (expire_at_ms - time.time() * 1000) / 1000)


def _scan_query(
    start: bytes | None, end: bytes | None, prefix: bytes | None, reverse: bool, limit: int | None
) -> dict[str, str]:
    scan_bounds(start, end, prefix)  # validate locally, with the embedded messages
    check_limit(limit)
    query = {"reverse": "true" if reverse else "false"}
    for name, value in (("start", start), ("end", end), ("prefix", prefix)):
        if value is not None:
            query[name] = path_key(value, name)
    return query


class RemoteStore:
    """The :class:`~kvstore.store.Store` API over HTTP. Build with ``kvstore.open(url)``."""

    def __init__(
        self, url: str, token: str | None = None, timeout: float = 60.0, retry_s: float = 10.0,
        page_rows: int = 1000, create: bool = True, ca_file: str | None = None,
    ) -> None:
        """Args:
            url: ``http(s)://host:port`` of the server.
            token: bearer token, if the server requires one.
            ca_file: PEM file of the CA (or self-signed certificate) to trust for https.
            timeout: seconds to wait for one response.
            retry_s: how long transport failures are retried before ObjectStoreError.
            page_rows: rows per scan page.
            create: accepted for signature parity with ``kvstore.open``; the
                server's store always exists.
        """
        if token is not None and not isinstance(token, str):
            raise TypeError(f"token must be a str, not {type(token).__name__}")
        self._http = HttpTransport(url, token, timeout, retry_s, ca_file)
        self._page_rows = page_rows
        self._closed = False

    @property
    def url(self) -> str:
        return self._http.url

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"remote store {self.url} is closed")

    def close(self) -> None:
        """Close this thread's connection; the handle cannot be used afterwards. Idempotent."""
        self._closed = True
        self._http.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state -------------------------------------------------------------

    def _info(self) -> dict[str, int]:
        self._check_open()
        return self._http.json("GET", "/kv/v1/info")  # type: ignore[no-any-return]

    @property
    def version(self) -> int:
        """The latest version the server's store handle has seen."""
        return self._info()["version"]

    @property
    def seq(self) -> int:
        return self._info()["seq"]

    def refresh(self) -> int:
        """Make the server catch up with other writers; return the latest version."""
        self._check_open()
        return int(self._http.json("POST", "/kv/v1/refresh")["version"])

    # -- writes ------------------------------------------------------------

    def _commit_json(self, method: str, path: str, payload: Any) -> int:
        headers = {"Idempotency-Key": uuid.uuid4().hex}  # the same key on every retry of this call
        return int(self._http.json(method, path, payload, headers=headers)["seq"])

    def put(self, key: bytes, value: bytes, ttl: float | None = None, lease: int | str | None = None) -> int:
        """Durably set ``key`` to ``value`` (for ``ttl`` seconds, or as long as ``lease``); return the commit's seq."""
        self._check_open()
        if lease is not None:
            return self.write(WriteBatch().put(key, value, ttl, lease=lease))
        key, value = check_key(key), check_value(value)
        expiry_from_ttl(ttl)  # validates
        return self._commit_json("PUT", "/kv/v1/keys/" + path_key(key), {"value": _b64(value), "ttl": ttl})

    def delete(self, key: bytes) -> int:
        """Durably delete ``key``; return the commit's seq."""
        self._check_open()
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        return int(self._http.json("DELETE", "/kv/v1/keys/" + path_key(check_key(key)), headers=headers)["seq"])

    def write(self, batch: WriteBatch) -> int:
        """Apply every operation of ``batch`` atomically (one seq); return that seq."""
        self._check_open()
        if not isinstance(batch, WriteBatch):
            raise TypeError(f"batch must be a WriteBatch, not {type(batch).__name__}")
        if not len(batch):
            raise ValueError("batch is empty")
        ops: list[dict[str, Any]] = []
        conditions, leases = batch.conditions, batch.leases
        for key, (kind, value, expire_at_ms) in batch:
            path_key(key)  # the HTTP key bound applies to batches too
            op: dict[str, Any]
            if kind == PUT and key in leases:
                op = {"op": "put", "key": _b64(key), "value": _b64(value or b""), "lease": leases[key]}
            elif kind == PUT:
                op = {"op": "put", "key": _b64(key), "value": _b64(value or b""), "ttl": _ttl_of(expire_at_ms)}
            else:
                op = {"op": "delete", "key": _b64(key)}
            if key in conditions:
                expected = conditions[key]
                op.update({"if_absent": True} if expected is None else {"if_seq": expected})
            ops.append(op)
        return self._commit_json("POST", "/kv/v1/batch", {"ops": ops})

    # -- leases and watches -------------------------------------------------

    def grant_lease(self, ttl: float) -> RemoteLease:
        """A new lease of ``ttl`` seconds, as :meth:`kvstore.store.Store.grant_lease`."""
        self._check_open()
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
            raise ValueError(f"a lease's ttl must be a number of seconds > 0, not {ttl!r}")
        answer = self._http.json("POST", "/kv/v1/leases", {"ttl": ttl})
        return RemoteLease(self._http, answer["id"], answer["ttl"])

    def lease(self, lease_id: int | str) -> RemoteLease:
        """A handle on lease ``lease_id`` (granted by any client or process).

        Raises:
            TypeError: not a lease id. LeaseNotFoundError: it expired or was revoked.
        """
        self._check_open()
        answer = self._http.json("GET", f"/kv/v1/leases/{check_lease_id(lease_id)}")
        return RemoteLease(self._http, answer["id"], answer["ttl"])

    def leases(self) -> list[RemoteLease]:
        """Every lease alive now, granted by any client or process."""
        self._check_open()
        return [RemoteLease(self._http, lease["id"], lease["ttl"])
                for lease in self._http.json("GET", "/kv/v1/leases")["leases"]]

    def watch(
        self, prefix: bytes = b"", start: int | None = None, end: int | None = None, *, start_revision: int | None = None
    ) -> RemoteWatch:
        """Changes of the keys under ``prefix``, as :meth:`kvstore.store.Store.watch`, streamed by the server.

        ``start_revision`` replays every change with that revision or later (a key's revision works);
        ``start`` and ``end`` take versions. A dropped connection is resumed from the next revision, so
        no event is missed or repeated, for up to ``retry_s`` of the server being unreachable.

        Raises:
            TypeError / ValueError: a bad argument. SnapshotTooOldError: (while
            iterating) ``start`` is no longer retained.
        """
        self._check_open()
        check_watch_args(prefix, start, end)
        if start_revision is not None:
            if start is not None:
                raise TypeError("give start= (a version) or start_revision=, not both")
            if isinstance(start_revision, bool) or not isinstance(start_revision, int) or start_revision < 0:
                raise TypeError(f"start_revision must be a revision (an int >= 0), not {start_revision!r}")
        return RemoteWatch(self._http, prefix, start, end, start_revision)

    # -- reads -------------------------------------------------------------

    def get(self, key: bytes, consistency: str | None = None) -> bytes | None:
        """The value of ``key``, or None; linearizable unless ``consistency="serializable"``."""
        self._check_open()
        query = None if consistency is None else {"consistency": check_consistency(consistency)}
        return get_value(self._http, "/kv/v1/keys/" + path_key(check_key(key)), query)

    def get_with_revision(self, key: bytes, consistency: str | None = None) -> tuple[bytes | None, int | None]:
        """``(value, revision)`` of ``key``, ``(None, None)`` if it has no value; as embedded."""
        self._check_open()
        query = None if consistency is None else {"consistency": check_consistency(consistency)}
        status, _, data = self._http.request(
            "GET", "/kv/v1/keys/" + path_key(check_key(key)), headers={"Accept": "application/json"}, query=query
        )
        if status == 404 and b"NoSuchKeyError" in data:
            return None, None
        if status >= 400:
            raise_error(status, data)
        answer = json.loads(data)
        return base64.b64decode(answer["value"]), int(answer["revision"])

    def scan(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        reverse: bool = False, limit: int | None = None, consistency: str | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for live keys in ``[start, end)`` (and with ``prefix``), page by page."""
        self._check_open()
        query = _scan_query(start, end, prefix, bool(reverse), limit)
        if consistency is not None:
            query["consistency"] = check_consistency(consistency)
        return scan_pages(self._http, "/kv/v1/scan", query, limit, self._page_rows)

    # -- transactions ------------------------------------------------------

    def begin(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> RemoteTransaction:
        """Start a transaction on the server (always at its latest version: ``fresh`` is implied,
        whatever is passed; it is accepted for the signature of :meth:`kvstore.store.Store.begin`)."""
        self._check_open()
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        answer = self._http.json("POST", "/kv/v1/txns", {"isolation": isolation, "ttl": ttl})
        return RemoteTransaction(self, answer["id"], answer["isolation"], answer["start_seq"], answer["version"])

    def transaction(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> ContextManager[RemoteTransaction]:
        """``with store.transaction() as txn:`` commits on normal exit, rolls back on exception."""
        return transaction_scope(self.begin(isolation, ttl, fresh))

    def run(
        self, fn: Callable[[RemoteTransaction], T], isolation: str = SERIALIZABLE, retries: int = 10,
        ttl: float | None = None,
    ) -> T:
        """Run ``fn(txn)`` and commit, retrying conflicts up to ``retries`` times (as embedded:
        :func:`kvstore.retrying.run_with_retries`, backoff 1 ms to 200 ms)."""
        return run_with_retries(lambda fresh: self.begin(isolation, ttl, fresh), fn, retries, 0.001, 0.2)


def open_remote(url: str, create: bool = True, **options: Any) -> RemoteStore:
    """Open a client of the ``lakekv serve`` server at ``url``: the ``http`` and ``https`` opener.

    Registered in the ``lakekv.stores`` entry-point group (pyproject.toml),
    so that :func:`kvstore.open` reaches it without importing this package
    (see :mod:`kvstore.registry`); its signature is
    :class:`kvstore.api.StoreOpener`.

    Args:
        url: ``http(s)://host[:port][/base]`` of the server.
        create: accepted as :func:`kvstore.open` passes it; the server's store always exists.
        **options: :class:`RemoteStore` arguments (``token``, ``timeout``,
            ``retry_s``, ``page_rows``, ``ca_file``).

    Raises:
        TypeError: an unknown option, or a ``token`` that is not a str.
        ValueError: ``url`` is not ``http(s)://host[:port]``.
    """
    return RemoteStore(url, create=create, **options)


class RemoteLease:
    """A lease on the server; see :class:`kvstore.leases.Lease`."""

    def __init__(self, client: HttpTransport, lease_id: int | str, ttl: float) -> None:
        self._http = client
        self.id = lease_id
        self.ttl = ttl

    def keepalive(self) -> float:
        """Restart the lease's ttl; return the seconds until it expires now.

        Raises:
            LeaseNotFoundError: it has already expired or was revoked.
        """
        return float(self._http.json("POST", f"/kv/v1/leases/{self.id}/keepalive")["remaining"])

    def revoke(self) -> None:
        """Delete the lease and its keys in one commit; a no-op if it is already gone."""
        self._http.json("DELETE", f"/kv/v1/leases/{self.id}")

    def remaining(self) -> float:
        """The seconds until it expires, read without extending it.

        Raises:
            LeaseNotFoundError: it has already expired or was revoked.
        """
        return float(self._http.json("GET", f"/kv/v1/leases/{self.id}")["remaining"])

    def keys(self) -> list[bytes]:
        """The keys attached to the lease now."""
        return [base64.b64decode(k) for k in self._http.json("GET", f"/kv/v1/leases/{self.id}")["keys"]]

    def __repr__(self) -> str:
        return f"RemoteLease({self.id}, ttl={self.ttl:g}s)"


class RemoteTransaction:
    """A server-side transaction driven over HTTP; see :class:`~kvstore.txn.Transaction`."""

    def __init__(self, store: RemoteStore, txn_id: str, isolation: str, start_seq: int, version: int) -> None:
        self._store = store
        self._http = store._http
        self.id = txn_id
        self.isolation = isolation
        self.start_seq = start_seq
        self.version = version
        self._state = "active"
        self._path = f"/kv/v1/txns/{txn_id}"

    @property
    def state(self) -> str:
        """As embedded: ``"active"``, ``"committed"``, ``"aborted"``, ``"failed"``, ``"rolled back"`` or ``"expired"``."""
        return self._state

    def _check_active(self) -> None:
        if self._state == "expired":
            raise TransactionExpiredError(f"transaction {self.id} outlived its TTL")
        if self._state != "active":
            raise TransactionClosedError(f"transaction {self.id} is already {self._state}")
        self._store._check_open()

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except TransactionExpiredError:
            self._state = "expired"
            raise

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` in this transaction: own writes, else its snapshot."""
        self._check_active()
        path = f"{self._path}/keys/{path_key(check_key(key))}"
        return self._call(lambda: get_value(self._http, path))

    def get_for_update(self, key: bytes) -> bytes | None:
        """Like :meth:`get`, and abort at commit if anyone wrote ``key`` after our start."""
        self._check_active()
        path = f"{self._path}/keys/{path_key(check_key(key))}"
        return self._call(lambda: get_value(self._http, path, {"for_update": "true"}))

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        """Buffer ``key = value`` on the server; visible to this transaction's reads at once."""
        self._check_active()
        key, value = check_key(key), check_value(value)
        expiry_from_ttl(ttl)
        payload = {"value": _b64(value), "ttl": ttl}
        self._call(lambda: self._http.json("PUT", f"{self._path}/keys/{path_key(key)}", payload))

    def delete(self, key: bytes) -> None:
        """Buffer a delete of ``key``."""
        self._check_active()
        path = f"{self._path}/keys/{path_key(check_key(key))}"
        self._call(lambda: self._http.json("DELETE", path))

    def scan(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        reverse: bool = False, limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of this transaction's view, page by page (each page joins the read set)."""
        self._check_active()
        query = _scan_query(start, end, prefix, bool(reverse), limit)
        return scan_pages(self._http, f"{self._path}/scan", query, limit, self._store._page_rows)

    def commit(self, idempotency_key: str | None = None) -> int:
        """Validate and make the writes durable (exactly once); return the commit seq.

        Args:
            idempotency_key: commit at most once under this key (1-128 of
                ``A-Za-z0-9._:-``), even across transactions: a rerun of the
                same logical transaction after a crash or lost answer reuses it
                and gets the first commit's seq back. Default: a fresh key,
                which makes this call's own transport retries safe.

        Raises:
            ConflictError: as embedded; retry the whole transaction.
            TransactionExpiredError / TransactionClosedError: as named.
        """
        self._check_active()
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        # The states after a commit attempt are the embedded ones (see Transaction.state).
        try:
            seq = int(self._call(lambda: self._http.json("POST", f"{self._path}/commit", headers=headers))["seq"])
        except (ConflictError, SnapshotTooOldError):
            self._state = "aborted"
            raise
        except TransactionExpiredError:
            raise  # _call marked it expired
        except BaseException:
            self._state = "failed"
            raise
        self._state = "committed"
        return seq

    def rollback(self) -> None:
        """Discard the transaction. Idempotent; a no-op after commit."""
        if self._state != "active":
            return
        self._state = "rolled back"
        status, _, data = self._http.request("POST", f"{self._path}/rollback")
        # 404/410: already gone on the server (expired, restarted): nothing left to discard.
        if status >= 400 and status not in (404, 410):
            raise_error(status, data)

    def __enter__(self) -> RemoteTransaction:
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None and self._state == "active":
            self.commit()
        else:
            self.rollback()
