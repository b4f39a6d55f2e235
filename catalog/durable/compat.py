"""Lock compatibility, redundancy and queue-blocking rules (YTsaurus Cypress, seed 003).

Pure functions over :class:`~.records.LockRecord`-shaped values; the lock
table (:mod:`.locks`) applies them to what it reads from the store, and the
stress-test checker applies the same ones to every stored version.

The rules, for a request by transaction T against a lock held by U:

* locks of T itself and of T's ancestors never block T ("ancestors never conflict
  with descendants"; a *descendant's* lock does block T, as in YTsaurus, so a parent
  cannot take exclusive on a node its open child holds);
* snapshot never conflicts and is never blocked;
* shared/exclusive are refused outright while T or an ancestor holds snapshot on the node;
* otherwise two unrelated locks conflict when either is exclusive, or both are
  shared with the same child_key, or both shared with the same attribute_key.

==========================  ========  =============  ===============  ==========
requested \\ held (unrelated) snapshot  shared(no key)  shared(key k)    exclusive
==========================  ========  =============  ===============  ==========
snapshot                    ok        ok             ok               ok
shared (no key)             ok        ok             ok               conflict
shared (key k)              ok        ok             conflict         conflict
shared (key j != k)         ok        ok             ok               conflict
exclusive                   ok        conflict       conflict         conflict
==========================  ========  =============  ===============  ==========

(child_key and attribute_key are separate key spaces: shared(child_key="a") and
shared(attribute_key="a") do not conflict.)

>>> conflicts("shared", "a", None, "shared", "a", None)
True
>>> conflicts("shared", "a", None, "shared", None, "a")
False
>>> conflicts("snapshot", None, None, "exclusive", None, None)
False
"""

from __future__ import annotations

from typing import Protocol, Sequence, TypeVar

from catalog.durable.records import EXCLUSIVE_LOCK, PENDING, SHARED_LOCK, SNAPSHOT_LOCK


class LockLike(Protocol):
    @property
    def txn(self) -> str:
        """The id of the transaction the lock belongs to."""
        ...

    @property
    def mode(self) -> str:
        """The lock's mode: ``"snapshot"``, ``"shared"`` or ``"exclusive"``."""
        ...

    @property
    def state(self) -> str:
        """The lock's state (acquired or pending)."""
        ...

    @property
    def child_key(self) -> str | None:
        """The child key the lock is limited to, if any."""
        ...

    @property
    def attribute_key(self) -> str | None:
        """The attribute key the lock is limited to, if any."""
        ...


L = TypeVar("L", bound=LockLike)


def conflicts(
    mode_a: str, child_a: str | None, attr_a: str | None, mode_b: str, child_b: str | None, attr_b: str | None
) -> bool:
    """Whether two locks of *unrelated* transactions conflict (symmetric)."""
    if mode_a == SNAPSHOT_LOCK or mode_b == SNAPSHOT_LOCK:
        return False
    if mode_a == EXCLUSIVE_LOCK or mode_b == EXCLUSIVE_LOCK:
        return True
    if child_a is not None and child_a == child_b:
        return True
    return attr_a is not None and attr_a == attr_b


def locks_conflict(a: LockLike, b: LockLike) -> bool:
    """Whether locks ``a`` and ``b`` of unrelated transactions conflict (see :func:`conflicts`)."""
    return conflicts(a.mode, a.child_key, a.attribute_key, b.mode, b.child_key, b.attribute_key)


def is_redundant(held: LockLike, mode: str, child_key: str | None, attribute_key: str | None) -> bool:
    """Whether the same transaction already holding ``held`` gains nothing by also requesting this lock.

    >>> from types import SimpleNamespace as L
    >>> is_redundant(L(mode="exclusive", child_key=None, attribute_key=None), "shared", "k", None)
    True
    >>> is_redundant(L(mode="shared", child_key=None, attribute_key=None), "shared", "k", None)
    False
    """
    if mode == SNAPSHOT_LOCK or held.mode == SNAPSHOT_LOCK:
        return mode == held.mode
    if held.mode == EXCLUSIVE_LOCK:
        return True
    return mode == SHARED_LOCK and (held.child_key, held.attribute_key) == (child_key, attribute_key)


def same_queue(a: LockLike, b: LockLike) -> bool:
    """Pending locks queue FIFO per (node, child key, attribute key); snapshot locks never queue."""
    return (a.child_key, a.attribute_key) == (b.child_key, b.attribute_key)


def blocker(request: LockLike, related: frozenset[str], ahead: Sequence[L]) -> L | None:
    """The first lock that keeps ``request`` from being acquired now, or None.

    Args:
        request: the lock asked for (new, or a pending one being re-examined).
        related: ``request.txn`` and its ancestors; their locks never block it.
        ahead: the node's locks in queue order that precede ``request``: every
            acquired lock, and the pending ones queued before it. A pending lock
            blocks only within its own queue (and snapshot requests bypass queues).
    """
    if request.mode == SNAPSHOT_LOCK:
        return None
    for lock in ahead:
        if lock.txn in related:
            continue
        if lock.state == PENDING and not same_queue(lock, request):
            continue
        if locks_conflict(request, lock):
            return lock
    return None
