"""Acceptance 2 of issue 36: the same random operation sequences against etcd 3.5.1 and ``lakekv serve
--etcd-listen`` give the same responses (revisions, prev_kv, compare results, error codes and messages),
ignoring cluster and member ids.

Both servers stay up for the whole module; each example works under a key prefix of its own, and
revisions are compared relative to each server's revision when the example began (etcd starts at 1,
a lakekv store at 0: the steps between revisions are what must agree).
"""

from __future__ import annotations

import itertools
import queue
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from tests.service.etcd_peers import EtcdPeer, LakekvEtcd

NAMES = [b"a", b"b", b"c", b"d"]
_examples = itertools.count()


class Side:
    """One server under test: its KV stub and the revision its current example began at."""

    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.insecure_channel(endpoint)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)
        self.base = 0

    def revision(self) -> int:
        """The current revision, relative to the example's start."""
        return int(self.kv.Range(pb.RangeRequest(key=b"\x00", count_only=True)).header.revision) - self.base

    def events(self, prefix: bytes, last: int) -> list[Message]:
        """Every event under ``prefix`` since the example began, with prev_kv, up to relative revision ``last``."""
        requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
        requests.put(pb.WatchRequest(create_request=pb.WatchCreateRequest(
            key=prefix, range_end=prefix[:-1] + b"0", start_revision=self.base + 1, prev_kv=True)))
        responses = self.watch.Watch(iter(requests.get, None), timeout=60)
        try:
            assert next(responses).created
            events: list[Message] = []
            while not events or events[-1].kv.mod_revision < last:
                events.extend(normalise(event, self.base) for event in next(responses).events)
            return events
        finally:
            requests.put(None)
            responses.cancel()

    def begin(self) -> None:
        self.base = self.kv.Range(pb.RangeRequest(key=b"\x00", range_end=b"\x00", count_only=True)).header.revision

    def call(self, method: str, request: Message) -> Any:
        try:
            return normalise(getattr(self.kv, method)(request, timeout=60), self.base)
        except grpc.RpcError as exc:
            return ("error", exc.code(), exc.details())


def normalise(message: Message, base: int) -> Message:
    """A copy without cluster/member ids and raft term, revisions relative to ``base``."""
    copy = type(message)()
    copy.CopyFrom(message)
    _relative(copy, base)
    return copy


def _relative(message: Message, base: int) -> None:
    for field, value in message.ListFields():
        if field.message_type is None:
            if field.name in ("cluster_id", "member_id", "raft_term"):
                message.ClearField(field.name)
            elif field.name in ("revision", "mod_revision", "create_revision") and value:
                setattr(message, field.name, value - base)
        elif field.is_repeated:
            for item in value:
                _relative(item, base)
        else:
            _relative(value, base)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    etcd = EtcdPeer(tmp_path_factory.mktemp("etcd")).start()
    tmp = tmp_path_factory.mktemp("lakekv")
    lakekv = LakekvEtcd(str(tmp / "store"), tmp / "serve.log").start()
    try:
        yield Side(etcd.endpoint), Side(lakekv.endpoint)
    finally:
        lakekv.stop()
        etcd.stop()


# -- operations, built for one example's prefix and each side's base revision --------------

Build = Any  # (prefix, base) -> request


def keys() -> st.SearchStrategy[bytes]:
    return st.sampled_from(NAMES)


def range_end() -> st.SearchStrategy[bytes | None]:
    return st.sampled_from([None, b"c", b"z"])  # None: the single key; else a bound under the prefix


def rel_revision() -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=12)


@st.composite
def put_op(draw: Any) -> Build:
    key, value = draw(keys()), draw(st.binary(max_size=3))
    prev_kv, ignore_value = draw(st.booleans()), draw(st.sampled_from([False, False, False, True]))
    if ignore_value and draw(st.booleans()):
        value = b""

    def build(prefix: bytes, base: int) -> pb.PutRequest:
        return pb.PutRequest(key=prefix + key, value=value, prev_kv=prev_kv, ignore_value=ignore_value)

    return build


@st.composite
def delete_op(draw: Any) -> Build:
    key, end, prev_kv = draw(keys()), draw(range_end()), draw(st.booleans())

    def build(prefix: bytes, base: int) -> pb.DeleteRangeRequest:
        return pb.DeleteRangeRequest(key=prefix + key, range_end=prefix + end if end else b"", prev_kv=prev_kv)

    return build


@st.composite
def range_op(draw: Any) -> Build:
    key, end = draw(keys()), draw(range_end())
    limit = draw(st.sampled_from([0, 0, 1, 2]))
    order = draw(st.sampled_from([pb.RangeRequest.NONE, pb.RangeRequest.ASCEND, pb.RangeRequest.DESCEND]))
    target = draw(st.sampled_from([pb.RangeRequest.KEY, pb.RangeRequest.VERSION, pb.RangeRequest.CREATE,
                                   pb.RangeRequest.MOD, pb.RangeRequest.VALUE]))
    keys_only, count_only = draw(st.booleans()), draw(st.sampled_from([False, False, True]))
    revision = draw(st.sampled_from([None, None, None]) | rel_revision())
    min_mod, max_mod, min_create, max_create = (draw(st.sampled_from([None, None]) | rel_revision()) for _ in range(4))
    serializable = draw(st.booleans())

    def build(prefix: bytes, base: int) -> pb.RangeRequest:
        return pb.RangeRequest(
            key=prefix + key, range_end=prefix + end if end else b"", limit=limit, sort_order=order,
            sort_target=target, keys_only=keys_only, count_only=count_only,
            revision=base + revision if revision is not None else 0,
            min_mod_revision=base + min_mod if min_mod is not None else 0,
            max_mod_revision=base + max_mod if max_mod is not None else 0,
            min_create_revision=base + min_create if min_create is not None else 0,
            max_create_revision=base + max_create if max_create is not None else 0,
            serializable=serializable,
        )

    return build


@st.composite
def compare(draw: Any) -> Build:
    key = draw(keys())
    target = draw(st.sampled_from([pb.Compare.VALUE, pb.Compare.VERSION, pb.Compare.CREATE, pb.Compare.MOD]))
    result = draw(st.sampled_from([pb.Compare.EQUAL, pb.Compare.NOT_EQUAL, pb.Compare.GREATER, pb.Compare.LESS]))
    number = draw(st.integers(min_value=0, max_value=6))
    value = draw(st.binary(max_size=2))

    def build(prefix: bytes, base: int) -> pb.Compare:
        c = pb.Compare(key=prefix + key, target=target, result=result)
        if target == pb.Compare.VALUE:
            c.value = value
        elif target == pb.Compare.VERSION:
            c.version = number
        elif target == pb.Compare.CREATE:
            c.create_revision = base + number if number else 0
        else:
            c.mod_revision = base + number if number else 0
        return c

    return build


def request_op(depth: int) -> st.SearchStrategy[Build]:
    leaves = [put_op(), delete_op(), range_op()]
    options = leaves + [txn_op(depth + 1)] if depth < 2 else leaves
    return st.one_of(*options).map(lambda build: _as_request_op(build))


def _as_request_op(build: Build) -> Build:
    def op(prefix: bytes, base: int) -> pb.RequestOp:
        request = build(prefix, base)
        field = {
            pb.PutRequest: "request_put", pb.DeleteRangeRequest: "request_delete_range",
            pb.RangeRequest: "request_range", pb.TxnRequest: "request_txn",
        }[type(request)]
        return pb.RequestOp(**{field: request})

    return op


@st.composite
def txn_op(draw: Any, depth: int = 0) -> Build:
    compares = draw(st.lists(compare(), max_size=2))
    success = draw(st.lists(request_op(depth), max_size=3))
    failure = draw(st.lists(request_op(depth), max_size=2))

    def build(prefix: bytes, base: int) -> pb.TxnRequest:
        return pb.TxnRequest(
            compare=[c(prefix, base) for c in compares], success=[op(prefix, base) for op in success],
            failure=[op(prefix, base) for op in failure],
        )

    return build


METHODS = {pb.PutRequest: "Put", pb.DeleteRangeRequest: "DeleteRange", pb.RangeRequest: "Range", pb.TxnRequest: "Txn"}
operations = st.lists(st.one_of(put_op(), put_op(), delete_op(), range_op(), txn_op()), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(ops=operations)
def test_the_same_operations_give_the_same_responses(sides: tuple[Side, Side], ops: list[Build]) -> None:
    etcd, lakekv = sides
    prefix = b"ex%d/" % next(_examples)
    etcd.begin()
    lakekv.begin()
    for step, build in enumerate(ops):
        theirs = build(prefix, etcd.base)
        method = METHODS[type(theirs)]
        expected = etcd.call(method, theirs)
        got = lakekv.call(method, build(prefix, lakekv.base))
        assert got == expected, f"step {step}: {method} {theirs}\netcd:   {expected}\nlakekv: {got}"
    final = pb.RangeRequest(key=prefix, range_end=prefix[:-1] + b"0")
    assert lakekv.call("Range", final) == etcd.call("Range", final)
    last = etcd.revision()
    assert lakekv.revision() == last
    if last > 0:  # something was written: the two watch histories (with prev_kv) are the same
        assert lakekv.events(prefix, last) == etcd.events(prefix, last)


def test_errors_of_compaction_and_revisions_match(sides: tuple[Side, Side]) -> None:
    etcd, lakekv = sides
    prefix = b"compaction/"
    for side in sides:
        side.begin()
        for value in (b"1", b"2", b"3"):
            side.kv.Put(pb.PutRequest(key=prefix + b"k", value=value))
    for request, method in (
        (lambda base: pb.RangeRequest(key=prefix + b"k", revision=base + 100), "Range"),
        (lambda base: pb.CompactionRequest(revision=base + 100), "Compact"),
        (lambda base: pb.CompactionRequest(revision=base + 2), "Compact"),
        (lambda base: pb.CompactionRequest(revision=base + 1), "Compact"),
        (lambda base: pb.RangeRequest(key=prefix + b"k", revision=base + 1), "Range"),
        (lambda base: pb.RangeRequest(key=prefix + b"k", revision=base + 2), "Range"),
        (lambda base: pb.RangeRequest(key=b""), "Range"),
        (lambda base: pb.PutRequest(key=prefix + b"k", lease=12345), "Put"),
        (lambda base: pb.PutRequest(key=prefix + b"missing", ignore_lease=True), "Put"),
    ):
        assert lakekv.call(method, request(lakekv.base)) == etcd.call(method, request(etcd.base)), method


def test_a_range_in_a_txn_bounds_the_txns_own_keys_by_its_revision(sides: tuple[Side, Side]) -> None:
    """Found by the random test: a key put earlier in the same txn has the txn's revision as its
    create/mod revision, so max/min revision bounds at that revision include it (lakekv left it out)."""
    answers = []
    for side in sides:
        side.begin()
        prefix = b"own-bounds/"
        side.kv.Put(pb.PutRequest(key=prefix + b"a", value=b"1"))
        own = side.base + 2  # the txn's revision: one after the put above
        ranges = [
            pb.RangeRequest(key=prefix + b"a", range_end=prefix + b"z", **{bound: own})
            for bound in ("max_create_revision", "max_mod_revision", "min_create_revision", "min_mod_revision")
        ]
        txn = pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=prefix + b"b", value=b"2"))]
                            + [pb.RequestOp(request_range=r) for r in ranges])
        answers.append(side.call("Txn", txn))
    etcd, lakekv = answers
    assert [len(r.response_range.kvs) for r in etcd.responses[1:]] == [2, 2, 1, 1]
    assert lakekv == etcd
