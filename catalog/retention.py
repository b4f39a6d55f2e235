"""The lakehouse's retention: recorded in the lakehouse, not chosen by whichever process opened it.

DESIGN.md §7: the retention that decides which data files GC may delete is
a property of the lakehouse. Two catalog keys (:mod:`catalog.keys`) hold it,
committed like any catalog change:

* ``lake/retention/window`` — the lakehouse's time-travel window in seconds
  of the storage's clock (JSON ``{"window_s": ...}``). Absent: the engine's
  default (``StoreOptions.retention_window_s``, 24 h). ``lake.set_retention()``
  changes it; so does opening with an explicit ``retention_window_s`` that
  differs from it (see :func:`requested_window`).
* ``lake/retention/floor`` — the *data floor* (JSON ``{"version": ...}``):
  versions below it may have lost data files. GC computes the floor it
  deletes under from the recorded window (:func:`gc_floor`) and commits it
  here (:func:`raise_floor`) **before** it deletes the file of any removal
  at or below it. It is never lowered. Absent: 0.

Readers answer from the data floor: ``lake.at(version=N)`` /
``lake.at(timestamp=T)`` raise ``SnapshotTooOldError`` for a version below
it, ``lake.history()`` omits those versions, ``lake.verify()`` reports it as
its floor, and a data file found missing while reading a past version is
``SnapshotTooOldError`` when the floor (read again after catching up) has
passed that version (:func:`too_old_if_collected`). The check reads the
floor at the handle's view (one in-memory key lookup, no storage request);
the live lakehouse's reads of the head never consult it.

What a reader that started before a GC is guaranteed (the grace rule): GC
deletes a removed file only once its removal is at or below the floor, i.e.
the version that removed it was committed more than the recorded window ago
on the storage's clock. So whoever read version N while N was the head
(a query, a Spark scan planned there, a ``PastLakehouse``) keeps every file
of N for at least the window after it started; a reader of an older version
N keeps them until the window has passed since N was replaced. Past that a
Python reader gets ``SnapshotTooOldError``, never a missing file. (A file no
version references is protected by ``gc_grace_s`` instead: an uncommitted
writer's.)
"""

from __future__ import annotations

import json
import math
from typing import Callable, Final

from kvstore.errors import SnapshotTooOldError
from kvstore.options import StoreOptions
from kvstore.store import Store
from kvstore.txn import Transaction

from catalog import keys

# What a lakehouse keeps when no window was ever recorded: the engine's default.
DEFAULT_WINDOW_S: Final[float] = float(StoreOptions().retention_window_s)


def check_window(window_s: object) -> float:
    """Return ``window_s`` as a float if it is a valid retention window.

    Raises:
        TypeError: ``window_s`` is not a number.
        ValueError: it is negative or not finite.
    """
    if isinstance(window_s, bool) or not isinstance(window_s, (int, float)):
        raise TypeError(f"window_s must be a number of seconds, not {type(window_s).__name__}")
    if not (math.isfinite(window_s) and window_s >= 0):
        raise ValueError(f"window_s must be a finite number of seconds >= 0, got {window_s!r}")
    return float(window_s)


def recorded_window(store: Store) -> float | None:
    """The window recorded in the lakehouse at this handle's view, or None if none is."""
    raw = store.get(keys.RETENTION_WINDOW, consistency="serializable")
    return None if raw is None else float(json.loads(raw)["window_s"])


def window_s(store: Store) -> float:
    """The lakehouse's retention window (the recorded one, else the engine's default)."""
    recorded = recorded_window(store)
    return DEFAULT_WINDOW_S if recorded is None else recorded


def floor(store: Store) -> int:
    """The data floor at this handle's view: versions below it may have lost data files."""
    recorded = recorded_floor(store)
    return 0 if recorded is None else recorded


def recorded_floor(store: Store) -> int | None:
    """The data floor recorded at this handle's view, or None if no GC has recorded one yet."""
    raw = store.get(keys.RETENTION_FLOOR, consistency="serializable")
    return None if raw is None else int(json.loads(raw)["version"])


def requested_window(store: Store, explicit: float | None) -> float | None:
    """The window a new handle asks the lakehouse to record, or None.

    ``explicit`` is the ``retention_window_s`` given to ``catalog.open``.
    A :class:`~catalog.lakehouse.Lakehouse` built on a store without it asks
    for the store's own window when that is not the engine's default.
    """
    if explicit is not None:
        return check_window(explicit)
    own = float(store.options.retention_window_s)
    return None if own == DEFAULT_WINDOW_S else own


def set_window(store: Store, window: float) -> int | None:
    """Record ``window`` as the lakehouse's retention window; returns the version that did, or None if it was already.

    The commit shows in ``lake.history()`` as a ``set_retention`` operation.

    Raises:
        TypeError / ValueError: as :func:`check_window`.
    """
    window = check_window(window)

    def change(txn: Transaction) -> int | None:
        raw = txn.get(keys.RETENTION_WINDOW)
        old = DEFAULT_WINDOW_S if raw is None else float(json.loads(raw)["window_s"])
        if raw is not None and old == window:
            return None
        txn.put(keys.RETENTION_WINDOW, json.dumps({"window_s": window}).encode())
        txn.set_summary({"ops": [{"kind": "set_retention", "object": None, "window_s": window, "was_s": old}]})
        txn.commit()
        return txn.commit_version

    store.refresh()
    return store.run(change)


def raise_floor(store: Store, version: int, window: float) -> int:
    """Durably record ``version`` as the data floor (never lowering it); returns the floor GC may delete under.

    That is ``version``, recorded or already covered by a higher recorded
    floor. The commit reads the recorded window too: if it is no longer
    ``window`` (the one ``version`` was computed with; a concurrent
    ``set_retention`` lengthened it, say), nothing is raised and the lower of
    ``version`` and the floor already recorded is returned, so GC never
    deletes under a stale window.
    """

    def change(txn: Transaction) -> int:
        raw_window = txn.get(keys.RETENTION_WINDOW)
        now_window = DEFAULT_WINDOW_S if raw_window is None else float(json.loads(raw_window)["window_s"])
        raw = txn.get(keys.RETENTION_FLOOR)
        old = 0 if raw is None else int(json.loads(raw)["version"])
        if now_window != window:
            return min(old, version)
        if version <= old:
            return version
        txn.put(keys.RETENTION_FLOOR, json.dumps({"version": version}).encode())
        txn.set_summary({"ops": [{"kind": "retention_floor", "object": None, "version": version}]})
        return version

    store.refresh()
    return store.run(change)


def window_floor(store: Store, window: float) -> int:
    """The oldest version the window ``window`` keeps: the newest committed at or before ``now - window``.

    Measured as the engine measures its own window: on the storage's clock,
    conservatively for its resolution. Missing roots (removed by the engine's
    GC) count as old; if the answer's root is gone, the oldest surviving
    version is returned. ``O(log n)`` root reads (cached by the store).
    """
    head = store.version
    cutoff = store.storage_now() - window - 2 * store.storage_clock_resolution

    def gone(version: int) -> bool:
        return not store.history(limit=1, start=version)

    def old(version: int) -> bool:
        infos = store.history(limit=1, start=version)
        return not infos or infos[0].timestamp <= cutoff

    found = _last_true(0, head, old)
    if found < 0:
        return 0
    if gone(found):  # every version up to it is gone: the first survivor is the oldest retained
        return min(head, _last_true(found, head, gone) + 1)
    return found


def _last_true(low: int, high: int, predicate: Callable[[int], bool]) -> int:
    """The largest ``v`` in ``[low, high]`` with ``predicate(v)`` for a predicate True then False; ``low - 1`` if none.

    >>> _last_true(0, 100, lambda v: v <= 6), _last_true(3, 9, lambda v: False)
    (6, 2)
    """
    lo, hi = low - 1, high + 1  # predicate(lo) holds (or lo is below the range); predicate(hi) fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            lo = mid
        else:
            hi = mid
    return lo


def gc_floor(store: Store) -> tuple[int, float]:
    """``(floor version, window)``: GC may delete a removed data file once its removal is visible at the floor version.

    The oldest of the engine's floor for this handle (its checkpoints, open
    snapshots and transactions, and its own window) and the recorded
    window's floor: never later than either.
    """
    window = window_s(store)
    engine = store.retention_floor().version
    if window <= float(store.options.retention_window_s):
        return engine, window  # the handle's window reaches at least as far back
    return min(engine, window_floor(store, window)), window


def check_readable(store: Store, version: int) -> None:
    """Refuse a read of ``version`` below the data floor (as this handle sees it).

    Raises:
        SnapshotTooOldError: ``version`` is below the data floor.
    """
    data_floor = floor(store)
    if version < data_floor:
        raise SnapshotTooOldError(
            f"lakehouse version {version} is past retention: data files of versions below {data_floor} may be "
            f"deleted (the lakehouse keeps {window_s(store):g} s)"
        )


def too_old_if_collected(store: Store, version: int, missing: FileNotFoundError) -> None:
    """Turn a data file found missing while reading ``version`` into ``SnapshotTooOldError`` if GC took it.

    Catches up first: a GC commits the floor before it deletes anything, so
    a file it deleted is seen with its floor.

    Raises:
        SnapshotTooOldError: the data floor has passed ``version`` (from ``missing``).
    """
    store.refresh()
    data_floor = floor(store)
    if version < data_floor:
        raise SnapshotTooOldError(
            f"lakehouse version {version} is past retention: GC deleted its data file {missing} "
            f"(data files of versions below {data_floor} may be deleted)"
        ) from missing
