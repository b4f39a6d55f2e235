"""Fault injection: a wrapper that fails, delays or "crashes" object-store calls.

Every layer above the object store is tested through this wrapper. Three kinds
of fault model what a real deployment sees:

* **before**: the call fails without reaching storage (connection refused);
  raises :class:`InjectedFaultError` and ``inner`` is not called;
* **after**: the call reaches storage and takes effect, but the caller gets an
  error (timeout on the response): the *ambiguous* case a committer must
  resolve by reading back;
* **crash**: the process dies; this call and every later one raise
  :class:`CrashedError`, so nothing after the crash point reaches storage.

Faults are either random (``error_rate``, ``after_rate``, restricted to
``ops``) or scripted (:meth:`FaultyStore.fail_next`, :meth:`crash_after`,
:meth:`crash_now`); scripted faults win. Randomness comes from one
``random.Random(seed)`` that is drawn exactly three times per call (fault,
after-fault, latency), whatever the rates, so the same seed and the same call
sequence always give the same faults; ``log`` records every call to prove it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Iterator, TypeVar

from kvstore.errors import CrashedError, InjectedFaultError
from kvstore.objstore.base import ObjectMeta, ObjectStore

OPS: tuple[str, ...] = ("get", "get_range", "head", "put", "put_if_absent", "list", "delete")
"""The primitive names faults can target."""

_T = TypeVar("_T")




@dataclass(frozen=True)
class FaultRecord:
    """One call as FaultyStore saw it; ``fault`` is None, "before", "after" or "crashed"."""

    call_index: int
    op: str
    path: str
    fault: str | None


@dataclass
class _Rule:
    """A scripted fault waiting for a matching call."""

    op: str
    when: str
    path_prefix: str | None
    remaining: int
    crash: bool


def _check_rate(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1], got {value}")
    return float(value)


def _check_op(op: str) -> str:
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    return op


class FaultyStore:
    """Wraps ``inner`` and injects faults and latency into its calls.

    Args:
        inner: the store that calls reach when no fault stops them.
        seed: seed of the fault generator (required, so runs can be replayed).
        error_rate: probability of a "before" fault per call of ``ops``.
        after_rate: probability of an "after" fault per call of ``ops``
            (checked when no "before" fault was drawn).
        latency: ``(min, max)`` seconds slept before each call, uniformly drawn.
        ops: the primitives random faults apply to; default all of :data:`OPS`.
            Scripted faults and latency apply to every call.

    Thread-safe: decisions are made under one lock; ``inner`` is called and
    latency slept outside it.
    """

    def __init__(
        self,
        inner: ObjectStore,
        *,
        seed: int,
        error_rate: float = 0.0,
        after_rate: float = 0.0,
        latency: tuple[float, float] = (0.0, 0.0),
        ops: Iterable[str] | None = None,
    ) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be int, not {type(seed).__name__}")
        if not isinstance(latency, tuple) or len(latency) != 2:
            raise TypeError(f"latency must be a (min, max) tuple, got {latency!r}")
        lo, hi = (float(v) for v in latency)
        if lo < 0 or hi < lo:
            raise ValueError(f"latency must satisfy 0 <= min <= max, got {latency!r}")
        if isinstance(ops, str):
            raise TypeError("ops must be an iterable of op names, not a single str")
        self.inner = inner
        self.url = inner.url
        self.seed = seed
        self.error_rate = _check_rate("error_rate", error_rate)
        self.after_rate = _check_rate("after_rate", after_rate)
        self.latency = (lo, hi)
        self.ops = frozenset(_check_op(op) for op in (OPS if ops is None else ops))
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._calls = 0
        self._log: list[FaultRecord] = []
        self._rules: list[_Rule] = []
        self._crash_in: int | None = None  # calls left before crashing
        self._crashed = False

    # -- scripting -----------------------------------------------------------

    def fail_next(
        self, op: str, *, when: str = "before", path_prefix: str | None = None, count: int = 1, crash: bool = False
    ) -> None:
        """Fail the next ``count`` calls of ``op`` (on paths under ``path_prefix``).

        Args:
            op: primitive name, one of :data:`OPS`.
            when: "before" (inner not called) or "after" (inner called, then fail).
            path_prefix: only calls whose path starts with it match; None = all.
            count: how many matching calls fail.
            crash: the fault is a crash at that point: it raises CrashedError and
                every later call does too.
        """
        _check_op(op)
        if when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', got {when!r}")
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        if path_prefix is not None and not isinstance(path_prefix, str):
            raise TypeError(f"path_prefix must be str or None, not {type(path_prefix).__name__}")
        with self._lock:
            self._rules.append(_Rule(op, when, path_prefix, count, crash))

    def crash_after(self, n_calls: int) -> None:
        """Let the next ``n_calls`` calls through, then crash (``0`` = crash now)."""
        if not isinstance(n_calls, int) or isinstance(n_calls, bool) or n_calls < 0:
            raise ValueError(f"n_calls must be a non-negative int, got {n_calls!r}")
        with self._lock:
            self._crash_in = n_calls

    def crash_now(self) -> None:
        """Crash: every further call raises CrashedError."""
        with self._lock:
            self._crashed = True

    @property
    def crashed(self) -> bool:
        with self._lock:
            return self._crashed

    @property
    def log(self) -> list[FaultRecord]:
        """A copy of every call so far, in call order."""
        with self._lock:
            return list(self._log)

    # -- the decision --------------------------------------------------------

    def _decide(self, op: str, path: str) -> tuple[str | None, bool, float]:
        """Return (fault, crash, delay) for this call and log it."""
        with self._lock:
            index = self._calls
            self._calls += 1
            if not self._crashed and self._crash_in is not None:
                if self._crash_in == 0:
                    self._crashed = True
                else:
                    self._crash_in -= 1
            if self._crashed:
                self._log.append(FaultRecord(index, op, path, "crashed"))
                return "crashed", True, 0.0
            # Always three draws, so the stream stays aligned with the calls
            # whatever the rates and scripts are.
            roll_before, roll_after, roll_latency = self._rng.random(), self._rng.random(), self._rng.random()
            fault: str | None = None
            crash = False
            for rule in self._rules:
                if rule.op == op and (rule.path_prefix is None or path.startswith(rule.path_prefix)):
                    fault, crash = rule.when, rule.crash
                    rule.remaining -= 1
                    if rule.remaining == 0:
                        self._rules.remove(rule)
                    break
            else:
                if op in self.ops and roll_before < self.error_rate:
                    fault = "before"
                elif op in self.ops and roll_after < self.after_rate:
                    fault = "after"
            if crash:
                # The process dies at this call: later calls fail even while
                # this one's "after" write is still in flight.
                self._crashed = True
            lo, hi = self.latency
            self._log.append(FaultRecord(index, op, path, fault))
            return fault, crash, lo + (hi - lo) * roll_latency

    def _call(self, op: str, path: str, fn: Callable[[], _T]) -> _T:
        fault, crash, delay = self._decide(op, path)
        if fault == "crashed":
            raise CrashedError(f"{op} {path!r}: store crashed earlier")
        if delay > 0:
            time.sleep(delay)
        if fault == "before":
            _raise_fault(op, path, "before", crash)
        result = fn()
        if fault == "after":
            _raise_fault(op, path, "after", crash)
        return result

    # -- the protocol --------------------------------------------------------

    def get(self, path: str) -> bytes:
        return self._call("get", path, lambda: self.inner.get(path))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._call("get_range", path, lambda: self.inner.get_range(path, start, end))

    def head(self, path: str) -> ObjectMeta:
        return self._call("head", path, lambda: self.inner.head(path))

    def put(self, path: str, data: bytes) -> None:
        self._call("put", path, lambda: self.inner.put(path, data))

    def put_if_absent(self, path: str, data: bytes) -> bool:
        return self._call("put_if_absent", path, lambda: self.inner.put_if_absent(path, data))

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        # Materialized so that an "after" fault happens after the listing ran.
        return iter(self._call("list", prefix, lambda: list(self.inner.list(prefix))))

    def delete(self, path: str) -> None:
        self._call("delete", path, lambda: self.inner.delete(path))

    def close(self) -> None:
        """Close ``inner``; never faulted, so tests can always clean up."""
        self.inner.close()


def _raise_fault(op: str, path: str, when: str, crash: bool) -> None:
    message = f"injected {'crash' if crash else 'fault'} {when} {op} {path!r}"
    if crash:
        raise CrashedError(message)
    raise InjectedFaultError(message) from TimeoutError(message)
