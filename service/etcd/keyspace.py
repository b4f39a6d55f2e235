"""etcd's key model on a lakekv store: Range, Put, DeleteRange, Txn and Compact.

Keys and records. etcd key ``K`` is the store key ``KEYS + K`` (under the
reserved prefix, apart from the ``/kv`` API's keys); its value is a 24-byte
header, big-endian int64 ``create_revision`` (0: "the revision of this very
row", which a creating commit cannot know before it commits), ``version``
and ``lease``, then the value. ``mod_revision`` is the row's own revision:
the seq of the commit that wrote it. The store-wide revision is the commit
seq (:mod:`kvstore.revisions`), so etcd's revisions and lakekv's are one
number: a fresh store is at revision 0 where etcd starts at 1, and any
commit to the store (the ``/kv`` API, the catalog) moves it too.

Requests. Reads run on a snapshot: linearizable unless ``serializable``,
at ``revision`` when given (:meth:`kvstore.store.Store.at`). A request that
writes (Put, DeleteRange, a Txn with a put or delete in it) runs as one
SERIALIZABLE lakekv transaction on the newest version, retried on
conflict: its compares and reads are validated at commit, so it is
atomic and linearizable like etcd's. A delete that finds nothing and a
txn that writes nothing commit nothing and keep the revision, as in etcd.

Inside a writing txn the revision it will commit at is unknown until the
commit: responses are built with :data:`PENDING` there and patched
afterwards (:func:`_settle`).

Leases belong to :class:`LeaseHook` (the Lease service sets
``Keyspace.leases``): it checks and attaches a put's lease, hears of
deletes, and says which leases are live, so reads skip the keys of an
ended lease (lease-aware reads: a keepalive need not rewrite keys). Without
a hook, a put with a lease is refused as etcd refuses an unknown lease.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol, TypeVar

from google.protobuf.message import Message

from kvstore.errors import SnapshotTooOldError
from kvstore.leases import RESERVED
from kvstore.store import Store
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.mvccpb import kv_pb2

NAMESPACE: Final = RESERVED + b"etcd/"
KEYS: Final = NAMESPACE + b"k/"
# Written with a commit that changes several keys: their order in the request, which the
# engine's rows (sorted by key) do not keep and etcd's watch events follow (its sub-revisions).
ORDER_KEY: Final = NAMESPACE + b"order"
_LENGTH: Final = struct.Struct(">I")
_KEYS_END: Final = KEYS[:-1] + bytes([KEYS[-1] + 1])  # just past every key under KEYS
_HEADER: Final = struct.Struct(">qqq")
# A marker committed once in a fresh store (see Keyspace.start_at_etcds_first_revision).
GENESIS: Final = RESERVED + b"etcd/genesis"
# etcd's --max-txn-ops default.
MAX_TXN_OPS: Final = 128
M = TypeVar("M", bound=Message)
# A revision not known until the commit (see the module docstring).
PENDING: Final = -1


class LeaseHook(Protocol):
    """What the Lease service does when keys are written (called inside the writing transaction)."""

    def check(self, txn: Any, lease: int) -> None:
        """Raise errors.LEASE_NOT_FOUND unless ``lease`` (not 0) is alive."""

    def on_put(self, txn: Any, key: bytes, old_lease: int, new_lease: int) -> int | None:
        """Attach ``key`` to ``new_lease`` (0: none); return the row's expiry (ms since the epoch) or None.

        Raises:
            errors.EtcdError: LEASE_NOT_FOUND when ``new_lease`` is not alive.
        """

    def on_delete(self, txn: Any, key: bytes, old_lease: int) -> None:
        """``key`` (attached to ``old_lease``, 0: none) is being deleted."""

    def live(self, lease: int) -> bool:
        """False once ``lease`` has ended: reads then skip its keys (before any revoke deletes them).
        Called for every leased key a read meets: keep it cheap (no storage request)."""


def encode(value: bytes, create_revision: int, version: int, lease: int) -> bytes:
    return _HEADER.pack(create_revision, version, lease) + value


def decode(store_key: bytes, raw: bytes, revision: int) -> kv_pb2.KeyValue:
    """The etcd record of a row (``revision``: its mod revision)."""
    create, version, lease = _HEADER.unpack_from(raw)
    return kv_pb2.KeyValue(
        key=store_key[len(KEYS):], value=raw[_HEADER.size:], create_revision=create or revision,
        mod_revision=revision, version=version, lease=lease,
    )


def encode_order(keys: list[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(key)) + key for key in keys)


def decode_order(raw: bytes) -> list[bytes]:
    """The store keys a commit changed, in the order its request changed them."""
    keys, at = [], 0
    while at < len(raw):
        (size,) = _LENGTH.unpack_from(raw, at)
        keys.append(raw[at + _LENGTH.size: at + _LENGTH.size + size])
        at += _LENGTH.size + size
    return keys


def key_bounds(key: bytes, range_end: bytes) -> tuple[bytes, bytes]:
    """Store-key bounds ``[lo, hi)`` of etcd's ``key``/``range_end`` (empty end: the key; ``\\0``: every key from it)."""
    lo = KEYS + key
    if not range_end:
        return lo, lo + b"\x00"
    if range_end == b"\x00":
        return lo, _KEYS_END
    return lo, KEYS + range_end


class _Reader(Protocol):
    def items(self, lo: bytes, hi: bytes) -> Iterator[kv_pb2.KeyValue]: ...


def _lease_filter(hook: LeaseHook | None, kvs: Iterator[kv_pb2.KeyValue]) -> Iterator[kv_pb2.KeyValue]:
    """``kvs`` without those whose lease the hook says has ended (lease-aware reads)."""
    if hook is None:
        return kvs
    return (kv for kv in kvs if not kv.lease or hook.live(kv.lease))


class _SnapshotReader:
    def __init__(self, snapshot: Any, leases: LeaseHook | None) -> None:
        self._snapshot = snapshot
        self._leases = leases

    def items(self, lo: bytes, hi: bytes) -> Iterator[kv_pb2.KeyValue]:
        if hi <= lo:
            return iter(())
        rows = self._snapshot.scan_with_revision(lo, hi)
        return _lease_filter(self._leases, (decode(key, raw, revision) for key, raw, revision in rows))


class _TxnReader:
    """Reads inside a writing transaction: its own writes (``own``, PENDING revisions) over its view."""

    def __init__(self, txn: Any, own: dict[bytes, kv_pb2.KeyValue | None], leases: LeaseHook | None) -> None:
        self._txn = txn
        self._own = own
        self._leases = leases

    def items(self, lo: bytes, hi: bytes) -> Iterator[kv_pb2.KeyValue]:
        return _lease_filter(self._leases, self._items(lo, hi))

    def one(self, store_key: bytes) -> kv_pb2.KeyValue | None:
        """The record of one key (a point read: no range joins the read set)."""
        if store_key in self._own:
            return self._own[store_key]
        raw, revision = self._txn.get_with_revision(store_key)
        if raw is None:
            return None
        kv = decode(store_key, raw, revision)
        return next(_lease_filter(self._leases, iter((kv,))), None)

    def _items(self, lo: bytes, hi: bytes) -> Iterator[kv_pb2.KeyValue]:
        if hi <= lo:
            return
        for key, raw in list(self._txn.scan(lo, hi)):
            mine = self._own.get(key)
            if mine is not None:
                yield mine
            else:
                _, revision = self._txn.get_with_revision(key)
                yield decode(key, raw, revision)


def _is_write(ops: Any) -> bool:
    for op in ops:
        kind = op.WhichOneof("request")
        if kind in ("request_put", "request_delete_range"):
            return True
        if kind == "request_txn" and (_is_write(op.request_txn.success) or _is_write(op.request_txn.failure)):
            return True
    return False


def check_txn(request: pb.TxnRequest) -> None:
    """etcd's checks of a txn before anything runs (v3rpc ``checkTxnRequest`` then ``checkIntervals``):
    op counts, empty keys, flags, in every branch, then the same key written twice.

    Raises:
        errors.EtcdError: TOO_MANY_OPS, EMPTY_KEY, VALUE_PROVIDED, LEASE_PROVIDED, KEY_NOT_FOUND, DUPLICATE_KEY.
    """
    _check_txn_request(request, MAX_TXN_OPS)
    _intervals(request.success)
    _intervals(request.failure)


def check_put(request: pb.PutRequest) -> None:
    if not request.key:
        raise errors.EMPTY_KEY
    if request.ignore_value and request.value:
        raise errors.VALUE_PROVIDED
    if request.ignore_lease and request.lease:
        raise errors.LEASE_PROVIDED


def _check_txn_request(request: pb.TxnRequest, max_ops: int) -> None:
    ops = max(len(request.compare), len(request.success), len(request.failure))
    if ops > max_ops:
        raise errors.TOO_MANY_OPS
    if any(not compare.key for compare in request.compare):
        raise errors.EMPTY_KEY
    for op in (*request.success, *request.failure):
        kind = op.WhichOneof("request")
        if kind == "request_range" or kind == "request_delete_range":
            if not getattr(op, kind).key:
                raise errors.EMPTY_KEY
        elif kind == "request_put":
            check_put(op.request_put)
        elif kind == "request_txn":
            _check_txn_request(op.request_txn, max_ops - ops)
        else:
            raise errors.KEY_NOT_FOUND  # etcd's answer to an empty op


def _intervals(ops: Any) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """etcd's ``checkIntervals``: the keys ``ops`` put and the ranges they delete, refusing overlaps."""
    dels: list[tuple[bytes, bytes]] = []
    for op in ops:
        if op.WhichOneof("request") == "request_delete_range":
            dels.append(key_bounds(op.request_delete_range.key, op.request_delete_range.range_end))

    def deleted(key: bytes) -> bool:
        store_key = KEYS + key
        return any(lo <= store_key < hi for lo, hi in dels)

    puts: set[bytes] = set()
    for op in ops:
        if op.WhichOneof("request") != "request_txn":
            continue
        puts_then, dels_then = _intervals(op.request_txn.success)
        puts_else, dels_else = _intervals(op.request_txn.failure)
        for key in puts_then:
            if key in puts or deleted(key):
                raise errors.DUPLICATE_KEY
            puts.add(key)
        for key in puts_else:
            # A key of both branches is fine: only one of them runs.
            if (key in puts and key not in puts_then) or deleted(key):
                raise errors.DUPLICATE_KEY
            puts.add(key)
        dels.extend(dels_then)
        dels.extend(dels_else)
    for op in ops:
        if op.WhichOneof("request") == "request_put":
            key = op.request_put.key
            if key in puts or deleted(key):
                raise errors.DUPLICATE_KEY
            puts.add(key)
    return puts, dels


def _compare(reader: _Reader, compare: pb.Compare) -> bool:
    kvs = list(reader.items(*key_bounds(compare.key, compare.range_end)))
    if not kvs:
        if compare.target == pb.Compare.VALUE:
            return False  # etcd: a value compare on a missing key always fails
        kvs = [kv_pb2.KeyValue()]
    return all(_compare_kv(compare, kv) for kv in kvs)


def _compare_kv(compare: pb.Compare, kv: kv_pb2.KeyValue) -> bool:
    target = compare.target
    if target == pb.Compare.VALUE:
        mine: Any = kv.value
        theirs: Any = compare.value
    elif target == pb.Compare.VERSION:
        mine, theirs = kv.version, compare.version
    elif target == pb.Compare.CREATE:
        mine, theirs = kv.create_revision, compare.create_revision
    elif target == pb.Compare.MOD:
        mine, theirs = kv.mod_revision, compare.mod_revision
    elif target == pb.Compare.LEASE:
        mine, theirs = kv.lease, compare.lease
    else:
        raise ValueError(f"unknown compare target {target}")
    result = compare.result
    if result == pb.Compare.EQUAL:
        return bool(mine == theirs)
    if result == pb.Compare.NOT_EQUAL:
        return bool(mine != theirs)
    if result == pb.Compare.GREATER:
        return bool(mine > theirs)
    if result == pb.Compare.LESS:
        return bool(mine < theirs)
    raise ValueError(f"unknown compare result {result}")


def compare_path(reader: _Reader, request: pb.TxnRequest) -> list[bool]:
    """The outcome of every compare on the branches a txn takes, in execution order, all read before
    any op runs (etcd's ``compareToPath``: a nested txn's compares do not see the outer txn's writes)."""
    succeeded = all(_compare(reader, compare) for compare in request.compare)
    path = [succeeded]
    for op in request.success if succeeded else request.failure:
        if op.WhichOneof("request") == "request_txn":
            path.extend(compare_path(reader, op.request_txn))
    return path


def ops_on_path(request: pb.TxnRequest, path: Iterator[bool]) -> Iterator[Any]:
    """The non-txn ops a txn runs along ``path`` (as etcd's ``checkRequests`` visits them)."""
    for op in request.success if next(path) else request.failure:
        if op.WhichOneof("request") == "request_txn":
            yield from ops_on_path(op.request_txn, path)
        else:
            yield op


def _ordinal(revision: int) -> int:
    """A revision for ordering and bounds: one still PENDING in this txn is newer than every committed one
    (else a lock waiter's own new key would sort first by create revision and take the lock)."""
    return (1 << 63) - 1 if revision == PENDING else revision


_SORT_KEYS: Final[dict[int, Callable[[kv_pb2.KeyValue], Any]]] = {
    pb.RangeRequest.KEY: lambda kv: kv.key,
    pb.RangeRequest.VERSION: lambda kv: kv.version,
    pb.RangeRequest.CREATE: lambda kv: _ordinal(kv.create_revision),
    pb.RangeRequest.MOD: lambda kv: _ordinal(kv.mod_revision),
    pb.RangeRequest.VALUE: lambda kv: kv.value,
}


def _range(
    reader: _Reader, request: pb.RangeRequest, revision: int, own_revision: int | None = None
) -> pb.RangeResponse:
    """etcd's Range over ``reader`` (apply.go's ``Range``); ``revision`` goes in the header.

    ``own_revision``: inside a writing txn, the revision its own writes (still
    PENDING) get, for the revision bounds: etcd applies a txn at the next
    revision, so a key the txn created passes ``max_create_revision`` at that
    revision. (A commit landing between the txn's start and its own would move
    its revision past this; the bounds answer as if the txn came first.)
    """

    def bounded(value: int) -> int:
        return own_revision if value == PENDING and own_revision is not None else _ordinal(value)

    kvs = list(reader.items(*key_bounds(request.key, request.range_end)))
    count = len(kvs)
    if request.count_only:
        return pb.RangeResponse(header=pb.ResponseHeader(revision=revision), count=count)
    if request.max_mod_revision:
        kvs = [kv for kv in kvs if bounded(kv.mod_revision) <= request.max_mod_revision]
    if request.min_mod_revision:
        kvs = [kv for kv in kvs if bounded(kv.mod_revision) >= request.min_mod_revision]
    if request.max_create_revision:
        kvs = [kv for kv in kvs if bounded(kv.create_revision) <= request.max_create_revision]
    if request.min_create_revision:
        kvs = [kv for kv in kvs if bounded(kv.create_revision) >= request.min_create_revision]
    order = request.sort_order
    if request.sort_target != pb.RangeRequest.KEY and order == pb.RangeRequest.NONE:
        order = pb.RangeRequest.ASCEND
    if order != pb.RangeRequest.NONE:
        sort_key = _SORT_KEYS.get(request.sort_target)
        if sort_key is None or order not in (pb.RangeRequest.ASCEND, pb.RangeRequest.DESCEND):
            raise ValueError(f"unknown sort target {request.sort_target} or order {order}")
        kvs.sort(key=sort_key, reverse=order == pb.RangeRequest.DESCEND)
    more = False
    if request.limit > 0 and len(kvs) > request.limit:
        kvs = kvs[: request.limit]
        more = True
    if request.keys_only:
        for kv in kvs:
            kv.value = b""
    return pb.RangeResponse(header=pb.ResponseHeader(revision=revision), kvs=kvs, count=count, more=more)


def _check_range_request(request: pb.RangeRequest) -> None:
    if not request.key:
        raise errors.EMPTY_KEY
    if request.limit < 0:
        raise ValueError("limit must not be negative")


class _WriteRun:
    """One attempt at a writing request inside lakekv transaction ``txn``."""

    def __init__(self, keyspace: Keyspace, txn: Any) -> None:
        self.keyspace = keyspace
        self.txn = txn
        self.own: dict[bytes, kv_pb2.KeyValue | None] = {}  # insertion order: the order of the writes
        self.reader = _TxnReader(txn, self.own, keyspace.leases)
        self.begin = txn.start_seq

    @property
    def changed(self) -> bool:
        return bool(self.own)

    def read_revision(self) -> int:
        # etcd: a read after this txn's own writes reads at the txn's own revision.
        return PENDING if self.changed else self.begin

    def range(self, request: pb.RangeRequest) -> pb.RangeResponse:
        _check_range_request(request)
        if request.revision > 0:
            return self.keyspace.range_at(request, request.revision, header=self.read_revision(), current=self.begin)
        return _range(self.reader, request, self.read_revision(), own_revision=self.begin + 1)

    def _check_requests(self, request: pb.TxnRequest, path: list[bool]) -> None:
        """etcd's checks of the ops a txn will run, on the view before any of them: puts' leases and
        ignore_* flags first, then ranges' revisions (apply.go ``checkRequests``)."""
        ops = list(ops_on_path(request, iter(path)))
        for op in ops:
            if op.WhichOneof("request") == "request_put":
                self._check_put(op.request_put)
        for op in ops:
            if op.WhichOneof("request") == "request_range" and op.request_range.revision > 0:
                self.keyspace.check_revision(op.request_range.revision, self.begin)

    def _check_put(self, request: pb.PutRequest) -> kv_pb2.KeyValue | None:
        """The key's record before the put, after etcd's checks of the put (its lease, then ignore_*)."""
        if request.lease:
            hook = self.keyspace.leases
            if hook is None:
                raise errors.LEASE_NOT_FOUND
            hook.check(self.txn, request.lease)
        prev = self.reader.one(KEYS + request.key)
        if (request.ignore_value or request.ignore_lease) and prev is None:
            raise errors.KEY_NOT_FOUND
        return prev

    def put(self, request: pb.PutRequest) -> pb.PutResponse:
        check_put(request)
        store_key = KEYS + request.key
        prev = self._check_put(request)
        value = prev.value if request.ignore_value and prev is not None else request.value
        lease = prev.lease if request.ignore_lease and prev is not None else request.lease
        hook = self.keyspace.leases
        expire_at_ms = None
        if hook is not None:
            expire_at_ms = hook.on_put(self.txn, request.key, prev.lease if prev is not None else 0, lease)
        version = prev.version + 1 if prev is not None else 1
        create = prev.create_revision if prev is not None else 0
        self.txn.put(store_key, encode(value, create, version, lease), expire_at_ms=expire_at_ms)
        self.own[store_key] = kv_pb2.KeyValue(
            key=request.key, value=value, create_revision=create or PENDING, mod_revision=PENDING,
            version=version, lease=lease,
        )
        response = pb.PutResponse(header=pb.ResponseHeader(revision=PENDING))
        if request.prev_kv and prev is not None:
            response.prev_kv.CopyFrom(prev)
        return response

    def delete_range(self, request: pb.DeleteRangeRequest) -> pb.DeleteRangeResponse:
        if not request.key:
            raise errors.EMPTY_KEY
        found = list(self.reader.items(*key_bounds(request.key, request.range_end)))
        hook = self.keyspace.leases
        for kv in found:
            store_key = KEYS + kv.key
            if hook is not None:
                hook.on_delete(self.txn, kv.key, kv.lease)
            self.txn.delete(store_key)
            self.own[store_key] = None
        response = pb.DeleteRangeResponse(
            header=pb.ResponseHeader(revision=self.read_revision()), deleted=len(found)
        )
        if request.prev_kv:
            response.prev_kvs.extend(found)
        return response

    def txn_request(self, request: pb.TxnRequest, path: Iterator[bool] | None = None) -> pb.TxnResponse:
        """Run ``request``; a nested txn (given the outer ``path``) has an empty header, as etcd's."""
        top = path is None
        if path is None:
            taken = compare_path(self.reader, request)
            self._check_requests(request, taken)
            path = iter(taken)
        succeeded = next(path)
        response = pb.TxnResponse(header=pb.ResponseHeader(), succeeded=succeeded)
        for op in request.success if succeeded else request.failure:
            kind = op.WhichOneof("request")
            if kind == "request_range":
                response.responses.add().response_range.CopyFrom(self.range(op.request_range))
            elif kind == "request_put":
                response.responses.add().response_put.CopyFrom(self.put(op.request_put))
            elif kind == "request_delete_range":
                response.responses.add().response_delete_range.CopyFrom(self.delete_range(op.request_delete_range))
            elif kind == "request_txn":
                response.responses.add().response_txn.CopyFrom(self.txn_request(op.request_txn, path))
            else:
                raise ValueError("a txn op must be a range, put, delete_range or txn request")
        if top:
            response.header.revision = self.read_revision()
        return response


def _settle(message: Message, revision: int) -> None:
    """Replace every PENDING revision in ``message`` (headers, kvs) with ``revision``."""
    for field, value in message.ListFields():
        if field.message_type is None:
            if field.name in ("revision", "mod_revision", "create_revision") and value == PENDING:
                setattr(message, field.name, revision)
        elif field.is_repeated:
            for item in value:
                _settle(item, revision)
        else:
            _settle(value, revision)


class Keyspace:
    """etcd's KV over ``store`` (see the module docstring). Thread-safe; calls block."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.leases: LeaseHook | None = None

    # -- reads ----------------------------------------------------------------

    def range(self, request: pb.RangeRequest) -> pb.RangeResponse:
        """etcd's Range (linearizable unless ``serializable``; at ``revision`` when given).

        Raises:
            errors.EtcdError: EMPTY_KEY, COMPACTED, FUTURE_REV.
        """
        _check_range_request(request)
        with self.store.snapshot(fresh=None if not request.serializable else False) as snapshot:
            if request.revision > 0:
                return self.range_at(request, request.revision, header=snapshot.seq)
            return _range(_SnapshotReader(snapshot, self.leases), request, snapshot.seq)

    def check_revision(self, revision: int, current: int) -> None:
        """Refuse a read at ``revision`` when the reader's view is at ``current``: FUTURE_REV, COMPACTED."""
        if revision > current:
            raise errors.FUTURE_REV
        if revision < self.store.compacted_revision():
            raise errors.COMPACTED

    def range_at(
        self, request: pb.RangeRequest, revision: int, header: int, current: int | None = None
    ) -> pb.RangeResponse:
        """Range as of ``revision`` (the response header says ``header``; the reader's view is at
        ``current``, default ``header``)."""
        self.check_revision(revision, header if current is None else current)
        try:
            snapshot = self.store.at(revision=revision)
        except SnapshotTooOldError:
            raise errors.COMPACTED from None
        with snapshot:
            return _range(_SnapshotReader(snapshot, self.leases), request, header)

    # -- writes ---------------------------------------------------------------

    def _write(self, apply: Callable[[_WriteRun], M]) -> M:
        def attempt(txn: Any) -> M:
            run = _WriteRun(self, txn)
            response = apply(run)
            if len(run.own) > 1:
                txn.put(ORDER_KEY, encode_order(list(run.own)))
            revision = txn.commit() if run.changed else run.begin
            _settle(response, revision)
            return response

        return self.store.run(attempt)

    def put(self, request: pb.PutRequest) -> pb.PutResponse:
        """etcd's Put. Raises errors.EtcdError: EMPTY_KEY, VALUE_PROVIDED, LEASE_PROVIDED, KEY_NOT_FOUND, LEASE_NOT_FOUND."""
        return self._write(lambda run: run.put(request))

    def delete_range(self, request: pb.DeleteRangeRequest) -> pb.DeleteRangeResponse:
        """etcd's DeleteRange. Raises errors.EtcdError: EMPTY_KEY."""
        return self._write(lambda run: run.delete_range(request))

    def txn(self, request: pb.TxnRequest) -> pb.TxnResponse:
        """etcd's Txn. Raises errors.EtcdError: as its ops, and TOO_MANY_OPS, DUPLICATE_KEY."""
        check_txn(request)
        if _is_write(request.success) or _is_write(request.failure):
            return self._write(lambda run: run.txn_request(request))
        with self.store.snapshot() as snapshot:
            return _ReadOnlyTxn(self, snapshot).txn_request(request)

    # -- history --------------------------------------------------------------

    def compact(self, revision: int) -> pb.CompactionResponse:
        """etcd's Compact: raise the compaction floor. Raises errors.EtcdError: COMPACTED, FUTURE_REV."""
        current = self.latest()
        if revision > current:
            raise errors.FUTURE_REV
        try:
            self.store.compact_revisions(revision)
        except SnapshotTooOldError:
            raise errors.COMPACTED from None
        return pb.CompactionResponse(header=pb.ResponseHeader(revision=current))

    def start_at_etcds_first_revision(self) -> None:
        """Bring a fresh store (revision 0) to revision 1, where an empty etcd starts.

        clientv3's concurrency recipes wait for keys created before their own
        (``waitDeletes(pfx, rev - 1)``) and read a bound of 0 as "no bound":
        a campaign whose key got revision 1 would wait for its own key forever
        (``etcdctl elect`` on a fresh store). So the first etcd write must be
        at revision 2, as on etcd: one commit of a reserved marker, by the
        first server on the store (others find it and write nothing).
        """
        if self.latest() > 0:
            return

        def mark(txn: Any) -> None:
            if txn.get(GENESIS) is None:
                txn.put(GENESIS, b"")

        self.store.run(mark)

    def latest(self) -> int:
        """The newest revision of the store (catching up with other writers first)."""
        self.store.refresh()
        return self.store.seq


class _ReadOnlyTxn:
    """A txn with no put or delete: compares and ranges on one snapshot, nothing committed."""

    def __init__(self, keyspace: Keyspace, snapshot: Any) -> None:
        self.keyspace = keyspace
        self.snapshot = snapshot
        self.reader = _SnapshotReader(snapshot, keyspace.leases)

    def txn_request(self, request: pb.TxnRequest, path: Iterator[bool] | None = None) -> pb.TxnResponse:
        top = path is None
        if path is None:
            taken = compare_path(self.reader, request)
            for op in ops_on_path(request, iter(taken)):
                if op.request_range.revision > 0:
                    self.keyspace.check_revision(op.request_range.revision, self.snapshot.seq)
            path = iter(taken)
        succeeded = next(path)
        response = pb.TxnResponse(header=pb.ResponseHeader(), succeeded=succeeded)
        if top:
            response.header.revision = self.snapshot.seq
        for op in request.success if succeeded else request.failure:
            kind = op.WhichOneof("request")
            if kind == "request_range":
                _check_range_request(op.request_range)
                if op.request_range.revision > 0:
                    result = self.keyspace.range_at(op.request_range, op.request_range.revision, self.snapshot.seq)
                else:
                    result = _range(self.reader, op.request_range, self.snapshot.seq)
                response.responses.add().response_range.CopyFrom(result)
            elif kind == "request_txn":
                response.responses.add().response_txn.CopyFrom(self.txn_request(op.request_txn, path))
            else:
                raise ValueError("a txn op must be a range, put, delete_range or txn request")
        return response
