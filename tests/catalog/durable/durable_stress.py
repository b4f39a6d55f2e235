"""Random multi-process workload over durable transactions and locks, and
the checker that replays the store's history to prove the lock invariants.

Worker: begin (sometimes nested), lock (random mode, key, waitable), wait,
stage an operation, ping, commit, abort, or walk away and let the transaction
expire — on a few nodes so everything contends.

Checker: reads every root file of the version chain in order, applies each
commit's write set (seq by seq) to a model of the ``sys/txn/`` keys, and
after every seq checks the touched nodes with :func:`catalog.durable.locks.check_node`:
no two incompatible locks acquired at once by unrelated transactions, and no
pending lock waiting behind nothing incompatible. It also derives every
acquire and release with the seq (and version) it happened at, and checks
that every lock a worker saw acquired was acquired in the history.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import kvstore
from catalog.durable import DurableTransactionExpiredError, LockConflictError, TransactionManager, TransactionStateError
from catalog.durable import keys, lifecycle
from catalog.durable.locks import check_node
from catalog.durable.records import ACQUIRED, ACTIVE, LockRecord, TxnRecord
from catalog.durable.work import Work
from kvstore.chain import VersionChain
from kvstore.format.rows import PUT

NODES = ("n0", "n1", "n2", "n3")
STORE_OPTIONS = {"poll_interval_s": 0, "background_maintenance": False}
EXPECTED = (LockConflictError, DurableTransactionExpiredError, TransactionStateError, TimeoutError)


def _apply_noop(work: Work, record: TxnRecord, ops: list[dict[str, Any]]) -> None:
    # Stands in for the catalog: one real write, so topmost commits with ops are not empty.
    work.txn.put(b"stress/applied/" + record.id.encode(), str(len(ops)).encode())


def worker(url: str, seed: int, duration_s: float, out: Any) -> None:
    """Run random operations for ``duration_s``; put (outcome counts, acquired lock ids) on ``out``."""
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    seen_acquired: list[str] = []
    with kvstore.open(url, **STORE_OPTIONS) as store:
        manager = TransactionManager(store, poll_max_s=0.05, apply_ops=_apply_noop)
        stop = time.monotonic() + duration_s
        while time.monotonic() < stop:
            try:
                _one_transaction(manager, rng, outcomes, seen_acquired)
            except EXPECTED as exc:
                outcomes[type(exc).__name__] += 1
    out.put((dict(outcomes), seen_acquired))


def _one_transaction(manager: TransactionManager, rng: random.Random, outcomes: Counter[str], seen: list[str]) -> None:
    tx = manager.begin(timeout=rng.choice([0.5, 2.0, 5.0]), title="stress")
    current = tx
    for _ in range(rng.randint(1, 5)):
        action = rng.random()
        if action < 0.15 and current is tx:
            current = manager.begin(timeout=2.0, parent=tx)
            outcomes["nested"] += 1
        elif action < 0.75:
            mode = rng.choice(["snapshot", "shared", "shared", "exclusive"])
            key: dict[str, str] = {}
            if mode == "shared" and rng.random() < 0.5:
                key = {rng.choice(["child_key", "attribute_key"]): rng.choice(["a", "b"])}
            lock = current.lock(rng.choice(NODES), mode, waitable=rng.random() < 0.6, **key)
            state = lock.state
            if state == "pending":
                outcomes["pending"] += 1
                lock.wait(timeout=rng.uniform(0.05, 0.8))
                state = "acquired"
            if state == "acquired":
                seen.append(lock.id)
                outcomes["acquired"] += 1
        elif action < 0.85:
            manager.run(lambda work: lifecycle.stage_op(work, current.id, {"kind": "stress"}))
            outcomes["staged"] += 1
        else:
            current.ping(ancestors=True)
        if current is not tx and rng.random() < 0.4:
            (current.commit if rng.random() < 0.7 else current.abort)()
            current = tx
    end = rng.random()
    if end < 0.1:
        outcomes["abandoned"] += 1  # left to expire; someone else will notice
        return
    if current is not tx:
        current.commit()
    if end < 0.7:
        tx.commit()
        outcomes["committed"] += 1
    else:
        tx.abort()
        outcomes["aborted"] += 1


def check_history(url: str, seen_acquired: set[str]) -> dict[str, int]:
    """Replay the chain (see module docstring); return counts; raise AssertionError on a violation."""
    records: dict[str, TxnRecord] = {}
    node_locks: dict[str, dict[int, LockRecord]] = {}
    ever_acquired: set[str] = set()
    events: list[tuple[int, int, str, str]] = []  # (version, seq, "acquire"|"release", lock id)
    checked = 0
    with kvstore.open(url, create=False, **STORE_OPTIONS) as store:
        chain = VersionChain(store.objects)
        for version in chain.list_versions():
            root = chain.read_root(version)
            assert root.delta_sst is None, "stress commits are small; an SST delta means the checker must read it"
            rows = root.delta_batch().to_pylist()
            for seq in sorted({row["seq"] for row in rows}):
                touched: set[str] = set()
                for row in rows:
                    if row["seq"] != seq:
                        continue
                    key, value = row["key"], row["value"] if row["kind"] == PUT else None
                    if key.startswith(keys.TXN_PREFIX):
                        if value is not None:
                            record = TxnRecord.decode(value)
                            records[record.id] = record
                    elif key.startswith(keys.LOCK_PREFIX):
                        node, lock_seq = keys.parse_lock_key(key)
                        locks = node_locks.setdefault(node, {})
                        before = locks.get(lock_seq)
                        if value is None:
                            locks.pop(lock_seq, None)
                        else:
                            locks[lock_seq] = LockRecord.decode(value)
                        after = locks.get(lock_seq)
                        held_before = before if before is not None and before.state == ACQUIRED else None
                        held_after = after if after is not None and after.state == ACQUIRED else None
                        if held_before is not None and (held_after is None or held_after.id != held_before.id):
                            events.append((version, seq, "release", held_before.id))
                        if held_after is not None and (held_before is None or held_before.id != held_after.id):
                            events.append((version, seq, "acquire", held_after.id))
                            ever_acquired.add(held_after.id)
                        touched.add(node)
                for node in touched:
                    ordered = [node_locks[node][s] for s in sorted(node_locks[node])]
                    related = {lock.txn: frozenset(records[lock.txn].ancestors) | {lock.txn} for lock in ordered}
                    problems = check_node(ordered, related)
                    assert not problems, f"version {version} seq {seq}: {problems}"
                    for lock in ordered:
                        assert records[lock.txn].state == ACTIVE, f"seq {seq}: lock of finished {lock.txn}"
                    checked += 1
    missing = seen_acquired - ever_acquired
    assert not missing, f"workers saw {len(missing)} locks acquired that the history never acquired"
    return {
        "versions": len(chain.list_versions()),
        "node_checks": checked,
        "acquires": sum(1 for e in events if e[2] == "acquire"),
        "releases": sum(1 for e in events if e[2] == "release"),
    }
