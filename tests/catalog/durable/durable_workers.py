"""Drivers that run durable-transaction calls here or in another process.

A :class:`Driver` speaks plain values (ids, lock references, states) so the
same scenario can run with both parties in one process or in two. The remote
driver re-raises the worker's exception as the same class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import multiprocessing
import time
import traceback
from dataclasses import dataclass
from typing import Any

import kvstore
from catalog.durable import TransactionManager, errors
from catalog.durable.manager import Lock
from catalog.durable.records import LockRecord

STORE_OPTIONS = {"poll_interval_s": 0, "background_maintenance": False}


class FakeClock:
    """Wall-clock stand-in: milliseconds that move only when a test says so."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)


class SkewedClock:
    """The wall clock, ``skew_ms`` ahead: time runs as usual and a test moves it on
    (:meth:`later`) instead of sleeping. Give every process of a scenario one
    (:meth:`RemoteDriver.later` moves a worker's) and move them on together, so
    they agree on expiry as real clocks do."""

    def __init__(self) -> None:
        self.skew_ms = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.skew_ms

    def later(self, seconds: float) -> None:
        self.skew_ms += int(seconds * 1000)


@dataclass(frozen=True)
class LockRef:
    node: str
    seq: int
    id: str
    txn: str
    mode: str
    state: str


def _ref(lock: Lock, state: str) -> LockRef:
    return LockRef(lock.node, lock.seq, lock.id, lock.txn, lock.mode, state)


def _lock_handle(manager: TransactionManager, ref: LockRef) -> Lock:
    record = LockRecord(id=ref.id, node=ref.node, seq=ref.seq, txn=ref.txn, mode=ref.mode, state=ref.state)
    return Lock(manager, record)


class Driver(ABC):
    """The calls a scenario makes; see LocalDriver for their meaning."""

    @abstractmethod
    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the named step (in this process or another) and return its result."""

    def begin(self, timeout: float | None = None, parent: str | None = None, title: str | None = None) -> str:
        return self.call("begin", timeout=timeout, parent=parent, title=title)  # type: ignore[no-any-return]

    def lock(self, txid: str, node: str, mode: str = "exclusive", **kwargs: Any) -> LockRef:
        return self.call("lock", txid, node, mode, **kwargs)  # type: ignore[no-any-return]

    def lock_state(self, ref: LockRef) -> str:
        return self.call("lock_state", ref)  # type: ignore[no-any-return]

    def wait(self, ref: LockRef, timeout: float) -> str:
        return self.call("wait", ref, timeout)  # type: ignore[no-any-return]

    def unlock(self, txid: str, node: str) -> None:
        self.call("unlock", txid, node)

    def commit(self, txid: str) -> None:
        self.call("commit", txid)

    def abort(self, txid: str) -> None:
        self.call("abort", txid)

    def ping(self, txid: str, ancestors: bool = False) -> None:
        self.call("ping", txid, ancestors)

    def state(self, txid: str) -> str:
        return self.call("state", txid)  # type: ignore[no-any-return]

    def holders(self, node: str) -> list[tuple[str, str, str | None, str]]:
        """``(txid, mode, key, state)`` of every lock on ``node``, in queue order."""
        return self.call("holders", node)  # type: ignore[no-any-return]


class LocalDriver(Driver):
    def __init__(self, manager: TransactionManager) -> None:
        self.manager = manager

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, "_" + name)(*args, **kwargs)

    def _begin(self, timeout: float | None, parent: str | None, title: str | None) -> str:
        return self.manager.begin(timeout=timeout, parent=parent, title=title).id

    def _lock(self, txid: str, node: str, mode: str, **kwargs: Any) -> LockRef:
        lock = self.manager.attach(txid).lock(node, mode, **kwargs)
        return _ref(lock, lock.state)

    def _lock_state(self, ref: LockRef) -> str:
        return _lock_handle(self.manager, ref).state

    def _wait(self, ref: LockRef, timeout: float) -> str:
        return _lock_handle(self.manager, ref).wait(timeout).state

    def _unlock(self, txid: str, node: str) -> None:
        self.manager.attach(txid).unlock(node)

    def _commit(self, txid: str) -> None:
        self.manager.attach(txid).commit()

    def _abort(self, txid: str) -> None:
        self.manager.abort(txid)

    def _ping(self, txid: str, ancestors: bool) -> None:
        self.manager.attach(txid).ping(ancestors=ancestors)

    def _state(self, txid: str) -> str:
        return self.manager.attach(txid).state

    def _holders(self, node: str) -> list[tuple[str, str, str | None, str]]:
        return [(lock.txn, lock.mode, lock.key, lock.state) for lock in self.manager.locks(node)]


def _serve(conn: Any) -> None:
    store = None
    driver: LocalDriver | None = None
    clock = SkewedClock()
    while True:
        message = conn.recv()
        if message is None:
            break
        name, args, kwargs = message
        try:
            if name == "open":
                store = kvstore.open(args[0], **STORE_OPTIONS)
                clock = SkewedClock()
                driver = LocalDriver(TransactionManager(store, clock=clock, poll_max_s=0.02))
                result: Any = None
            elif name == "later":
                clock.later(args[0])
                result = None
            elif name == "close_store":
                if store is not None:
                    store.close()
                store = driver = None
                result = None
            else:
                assert driver is not None, "open a store first"
                result = driver.call(name, *args, **kwargs)
            conn.send(("ok", result))
        except Exception as exc:  # every failure goes back to the test, re-raised there
            conn.send(("err", type(exc).__name__, str(exc), traceback.format_exc()))
    if store is not None:
        store.close()


_ERRORS = {
    "LockConflictError": errors.LockConflictError,
    "DurableTransactionExpiredError": errors.DurableTransactionExpiredError,
    "TransactionStateError": errors.TransactionStateError,
    "TimeoutError": TimeoutError,
    "ValueError": ValueError,
    "TypeError": TypeError,
}


class RemoteDriver(Driver):
    """A worker process (spawned) serving driver calls over a pipe."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self._proc.start()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._conn.send((name, args, kwargs))
        reply = self._conn.recv()
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, trace = reply
        error_type = _ERRORS.get(kind)
        if error_type is errors.LockConflictError:
            raise errors.LockConflictError(message, node="?", mode="?", key=None, holder=None)
        if error_type is not None:
            raise error_type(message)
        raise RuntimeError(f"worker raised {kind}: {message}\n{trace}")

    def open(self, url: str) -> None:
        self.call("open", url)

    def close_store(self) -> None:
        self.call("close_store")

    def later(self, seconds: float) -> None:
        """Move the worker's clock (a :class:`SkewedClock`, reset by :meth:`open`) on by ``seconds``."""
        self.call("later", seconds)

    def close(self) -> None:
        self._conn.send(None)
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.terminate()


# -- acceptance 3: one durable transaction shared by several processes ----------------

LAKE_OPTIONS = {"poll_interval_s": 0, "background_maintenance": False}


def append_in_transaction(url: str, txid: str, table: str, n: int) -> None:
    """Attach to ``txid`` and append ``n`` rows to ``table`` (staged: nothing visible until commit)."""
    import pyarrow as pa

    import catalog

    with catalog.open(url, **LAKE_OPTIONS) as lake:
        tx = lake.attach(txid)
        tx.ping()
        tx.load_table(table).append(pa.table({"id": list(range(n)), "day": ["mon"] * n}))


def commit_transaction(url: str, txid: str) -> None:
    import catalog

    with catalog.open(url, **LAKE_OPTIONS) as lake:
        lake.attach(txid).commit()


def attach_and_hang(url: str, txid: str, ready: Any) -> None:
    """Attach, report ready, then wait forever for a commit that never comes (the test kills us)."""
    import time

    import catalog

    with catalog.open(url, **LAKE_OPTIONS) as lake:
        lake.attach(txid)
        ready.put("attached")
        while True:
            time.sleep(1)
