"""Early lock release (kvstore.inflight): a key lock handed over while the
holder's commit is in flight, and what its next holder may and may not do."""

from __future__ import annotations

import random
import re
import threading
import uuid

import pytest

import kvstore
from kvstore.errors import CommitError, ConflictError
from kvstore.format.rows import PUT
from kvstore.inflight import InFlight, overlay_of
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore


ROOT_FILE = re.compile(r"_[01]+\.ipc")  # kvstore.format.root.root_path


class GatedStore(MemoryStore):
    """A memory store whose next root-file publish waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__(f"memory://{uuid.uuid4().hex}")
        self._armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def hold_next_publish(self) -> None:
        self._armed = True
        self.entered.clear()
        self.gate.clear()

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self._armed and ROOT_FILE.fullmatch(path):
            self._armed = False
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().put_if_absent(path, data)


@pytest.fixture
def gated():
    store = GatedStore()
    db = kvstore.open(store, poll_interval_s=0)
    yield store, db
    store.gate.set()
    db.close()


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    """Run ``fn()`` in a thread; the dict gets "result" or "error"."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the test thread, which asserts on it
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def _busy_committer(store: GatedStore, db, key: bytes = b"z", value: bytes = b"z") -> tuple[threading.Thread, dict]:
    """A blind put whose publish is held at the gate: later commits queue behind it."""
    store.hold_next_publish()
    blocker = _in_thread(lambda: db.put(key, value))
    assert store.entered.wait(10)
    return blocker


def _queue_commit(db, txn) -> tuple[threading.Thread, dict]:
    """Commit ``txn`` in a thread and return once its lock is handed over (it is queued)."""
    keys = set(txn._lock_keys)  # internals: the keys it locked, to see early lock release hand them over
    thread, box = _in_thread(txn.commit)
    for _ in range(2000):
        if not (db._txns.locks.held_by(txn.id) & keys) or box:  # internals: the key locks it still holds
            break
        threading.Event().wait(0.005)
    return thread, box


def _open_gate_and_join(store: GatedStore, *threads: threading.Thread) -> None:
    store.gate.set()
    for thread in threads:
        thread.join(30)


def test_the_next_holder_reads_a_queued_commit_and_both_land_in_order(gated) -> None:
    store, db = gated
    db.put(b"k", b"0")
    blocker = _busy_committer(store, db)
    first = db.begin()
    first.put(b"k", b"%d" % (int(first.get_for_update(b"k")) + 1))
    first_thread, first_box = _queue_commit(db, first)
    assert not first_box, "the first commit finished although the committer is held"

    second = db.begin()
    assert second.get_for_update(b"k") == b"1"  # the queued, not yet durable write
    assert db.get(b"k") == b"0"  # nobody else sees it
    second.put(b"k", b"2")
    second_thread, second_box = _queue_commit(db, second)

    _open_gate_and_join(store, blocker[0], first_thread, second_thread)
    assert "error" not in first_box and "error" not in second_box, (first_box, second_box)
    assert first_box["result"] < second_box["result"]
    assert db.get(b"k") == b"2"
    assert first.state == second.state == "committed"
    assert db.stats()["key_locks"] == 0 and db.stats()["running_transactions"] == 0


def test_a_failed_commit_takes_down_the_transactions_that_read_it(gated) -> None:
    store, db = gated
    db.put(b"k", b"0")
    doomed = db.begin()
    doomed.get(b"x")  # the blind write of x held at the gate will commit first
    doomed.put(b"k", b"%d" % (int(doomed.get_for_update(b"k")) + 1))
    blocker = _busy_committer(store, db, key=b"x", value=b"changed")
    doomed_thread, doomed_box = _queue_commit(db, doomed)

    reader = db.begin()
    assert reader.get_for_update(b"k") == b"1"
    reader.put(b"k", b"2")
    reader_thread, reader_box = _queue_commit(db, reader)

    _open_gate_and_join(store, blocker[0], doomed_thread, reader_thread)
    assert isinstance(doomed_box.get("error"), ConflictError) and doomed_box["error"].key == b"x"
    error = reader_box.get("error")
    assert isinstance(error, ConflictError) and "did not commit" in str(error)
    assert reader.state == "aborted"
    assert db.get(b"k") == b"0"  # neither the failed commit nor its reader landed
    # The retry of the reader now succeeds.
    assert db.run(lambda txn: txn.put(b"k", b"%d" % (int(txn.get_for_update(b"k")) + 1))) is None
    assert db.get(b"k") == b"1"


def test_a_reader_in_the_same_group_as_an_unencodable_commit_does_not_land(gated) -> None:
    """The group is validated, then one member cannot be encoded (a TTL past
    the format's range): the committer retries the rest, minus its readers."""
    store, db = gated
    db.put(b"k", b"0")
    blocker = _busy_committer(store, db)
    bad = db.begin()
    bad.get_for_update(b"k")
    # put() refuses such a TTL; the committer still must not trust that every
    # member encodes (see test_committer), so the row is planted directly.
    bad._writes[b"k"] = (PUT, b"1", 2**70)  # internals: a row put() would refuse, planted in the write set
    bad_thread, bad_box = _queue_commit(db, bad)
    reader = db.begin()
    assert reader.get_for_update(b"k") == b"1"
    reader.put(b"k", b"2")
    reader_thread, reader_box = _queue_commit(db, reader)
    bystander_thread, bystander_box = _in_thread(lambda: db.put(b"other", b"v"))
    _open_gate_and_join(store, blocker[0], bad_thread, reader_thread, bystander_thread)
    assert isinstance(bad_box.get("error"), CommitError) and "could not be encoded" in str(bad_box["error"])
    assert isinstance(reader_box.get("error"), ConflictError) and "did not commit" in str(reader_box["error"])
    assert "error" not in bystander_box
    assert db.get(b"k") == b"0" and db.get(b"other") == b"v"


@pytest.mark.parametrize("lands", [True, False])
def test_a_read_only_reader_waits_for_what_it_read(gated, lands: bool) -> None:
    store, db = gated
    db.put(b"k", b"0")
    first = db.begin()
    if not lands:
        first.get(b"x")
    first.put(b"k", b"%d" % (int(first.get_for_update(b"k")) + 1))
    blocker = _busy_committer(store, db, key=b"x" if not lands else b"z")
    first_thread, first_box = _queue_commit(db, first)

    reader = db.begin()
    assert reader.get_for_update(b"k") == b"1"
    reader_thread, reader_box = _in_thread(reader.commit)  # no writes: waits for first
    reader_thread.join(0.2)
    assert reader_thread.is_alive(), "a read-only commit returned before what it read was durable"
    _open_gate_and_join(store, blocker[0], first_thread, reader_thread)
    if lands:
        assert reader_box.get("result") == first_box["result"]  # the seq of the view it read
        assert reader.state == "committed"
    else:
        assert isinstance(reader_box.get("error"), ConflictError)
        assert reader.state == "aborted"


def test_a_snapshot_reader_of_in_flight_writes_is_validated_like_serializable(gated) -> None:
    """It read y before a blind write of y that commits before its ancestor:
    no snapshot holds both that y and the ancestor's k, so it must abort."""
    store, db = gated
    db.put(b"k", b"0")
    db.put(b"y", b"old")
    first = db.begin()
    first.put(b"k", b"%d" % (int(first.get_for_update(b"k")) + 1))
    blocker = _busy_committer(store, db, key=b"y", value=b"new")
    first_thread, _ = _queue_commit(db, first)

    reader = db.begin("snapshot")
    assert reader.get_for_update(b"k") == b"1"
    assert reader.get(b"y") == b"old"
    reader.put(b"k", b"2")
    reader_thread, reader_box = _queue_commit(db, reader)
    _open_gate_and_join(store, blocker[0], first_thread, reader_thread)
    assert isinstance(reader_box.get("error"), ConflictError) and reader_box["error"].key == b"y"
    assert db.get(b"k") == b"1"


def test_scans_see_in_flight_writes_under_their_own(gated) -> None:
    store, db = gated
    db.put(b"k", b"0")
    db.put(b"a", b"base")
    first = db.begin()
    first.get_for_update(b"k")
    first.put(b"k", b"1")
    first.put(b"b", b"from-first")
    first.put(b"c", b"from-first")
    first.delete(b"a")
    blocker = _busy_committer(store, db)
    first_thread, _ = _queue_commit(db, first)

    second = db.begin()
    assert second.get_for_update(b"k") == b"1"
    second.put(b"c", b"mine")
    # Bounded below z: the held blind put of z commits before first, so a
    # scan over it would be a phantom (and is, see the oracle tests).
    assert list(second.scan(end=b"y")) == [(b"b", b"from-first"), (b"c", b"mine"), (b"k", b"1")]
    assert list(second.scan(end=b"y", reverse=True, limit=2)) == [(b"k", b"1"), (b"c", b"mine")]
    assert second.get(b"a") is None
    second_thread, second_box = _queue_commit(db, second)
    _open_gate_and_join(store, blocker[0], first_thread, second_thread)
    assert "error" not in second_box
    assert list(db.scan()) == [(b"b", b"from-first"), (b"c", b"mine"), (b"k", b"1"), (b"z", b"z")]


def test_a_transaction_that_read_before_locking_does_not_read_in_flight_writes(gated) -> None:
    store, db = gated
    db.put(b"k", b"0")
    first = db.begin()
    first.put(b"k", b"%d" % (int(first.get_for_update(b"k")) + 1))
    blocker = _busy_committer(store, db)
    first_thread, _ = _queue_commit(db, first)
    late = db.begin()
    late.get(b"other")  # its snapshot is fixed now
    assert late.get_for_update(b"k") == b"0"
    late.put(b"k", b"x")
    late_thread, late_box = _queue_commit(db, late)
    _open_gate_and_join(store, blocker[0], first_thread, late_thread)
    assert isinstance(late_box.get("error"), ConflictError)  # first wrote k after its start
    assert db.get(b"k") == b"1"


def test_ancestors_after_drops_what_the_head_has_and_stops_at_a_failure() -> None:
    class Commit:
        def __init__(self, seq: int, committed: bool, error: Exception | None = None) -> None:
            self.seq, self.committed, self.error = seq, committed, error
            self.mutations = {b"k": (1, b"%d" % seq, None)}

    landed, queued, failed, after = Commit(5, True), Commit(7, False), Commit(8, False, ConflictError("x")), Commit(9, False)
    assert InFlight((landed, queued, failed, after)).ancestors_after(5) == (queued,)
    assert InFlight((landed, queued)).ancestors_after(4) == (landed, queued)  # published, not in that head yet
    assert overlay_of((landed, queued))[b"k"] == (1, b"7", None)


# -- many threads, failures injected: every committed history is serial -----------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hot_key_histories_stay_serial_with_failed_publishes(seed: int) -> None:
    """Threads increment one counter through get_for_update while a blind
    writer overwrites it and publishes fail at random (before or after the
    write landed). Ordered by commit seq, every committed increment read
    exactly the value the previous committed write left."""
    inner = MemoryStore(f"memory://{uuid.uuid4().hex}")
    faulty = FaultyStore(inner, seed=seed, ops=("put_if_absent",))
    events: list[tuple[int, bytes | None, bytes]] = []  # (seq, value read or None for blind, value written)
    record = threading.Lock()
    with kvstore.open(faulty, poll_interval_s=0, backoff_min_s=0.0005, backoff_max_s=0.002) as db:
        db.put(b"counter", b"0")
        events.append((db.seq, None, b"0"))
        faulty.error_rate = faulty.after_rate = 0.05  # from here on

        def increment(tid: int) -> None:
            rng = random.Random(seed * 100 + tid)
            for _ in range(40):
                txn = db.begin(rng.choice(["serializable", "snapshot"]))
                try:
                    read = txn.get_for_update(b"counter")
                    written = b"%d" % (int(read) + 1)
                    txn.put(b"counter", written)
                    seq = txn.commit()
                except (ConflictError, CommitError):
                    continue  # refused: it wrote nothing, so it has no place in the history
                with record:
                    events.append((seq, read, written))

        def blind() -> None:
            for i in range(20):
                try:
                    seq = db.put(b"counter", b"%d" % (1000 * (i + 1)))
                except CommitError:
                    continue  # refused: as above
                with record:
                    events.append((seq, None, b"%d" % (1000 * (i + 1))))

        pool = [threading.Thread(target=increment, args=(t,)) for t in range(8)] + [threading.Thread(target=blind)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(300)
        assert not any(thread.is_alive() for thread in pool)
        final = db.get(b"counter")
    events.sort()
    assert len({seq for seq, _, _ in events}) == len(events), "two commits got one seq"
    for (seq, _, previous), (next_seq, read, _) in zip(events, events[1:]):
        if read is not None:
            assert read == previous, f"the commit at seq {next_seq} read {read!r}, but seq {seq} wrote {previous!r}"
    assert final == events[-1][2]
    assert len(events) > 100
    # Failures were injected (before and after the write landed). The committer
    # reads an ambiguous root back, so they surface as refusals only rarely;
    # the refusals here are mostly ConflictErrors from the blind writer, and
    # whether any happens at all depends on thread scheduling (about one run
    # in ten had none), so no refusal is required. The cascade of a
    # failed commit is pinned deterministically by
    # test_a_failed_commit_takes_down_the_transactions_that_read_it; here the
    # claim is that histories stay serial whatever failed.
    assert {r.fault for r in faulty.log if r.fault} == {"before", "after"}
