"""Expiring old versions and removing orphan files on request, under the same safety rules as ``lake.gc()``.

Iceberg's ``expire_snapshots`` and ``remove_orphan_files``, split out of
:func:`catalog.maintenance.gc` (which does both at once):

* :func:`expire_versions` deletes the data files of committed removals that
  only versions committed before ``older_than`` read, keeping the newest
  ``retain_last`` versions whatever their age. It is GC's removal half with
  a lower floor cap: it never expires a version the lakehouse's recorded
  retention window still keeps (``lake.set_retention`` shortens the window
  for that), because a reader that started within the window is promised
  its files. The floor is recorded before any file goes, so an expired
  version reads as ``SnapshotTooOldError``, never as a missing file.
* :func:`remove_orphan_files` deletes files under ``data/`` that no key
  references and that are older than ``older_than`` (default: the grace
  period), plus dead writers' temp files: GC's orphan half. ``older_than``
  may not be later than ``gc_grace_s`` ago: a writer may still commit a file
  until it is half that old (:mod:`catalog.freshness`).

Both answer with the :class:`~catalog.maintenance.GCReport` of what they
deleted (or, with ``dry_run``, would delete).
"""

from __future__ import annotations

from catalog import maintenance, retention
from catalog.context import LakeContext
from catalog.maintenance import GCReport


def _seconds(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a time in seconds since the epoch, not {type(value).__name__}")
    return float(value)


def expire_versions(ctx: LakeContext, older_than: float | None, retain_last: int, dry_run: bool = False) -> GCReport:
    """Delete the files only versions before ``older_than`` (None: the retention window's start) read.

    The newest ``retain_last`` versions are kept in any case, and so is every
    version the recorded retention window keeps. The report's
    ``floor_version`` is the oldest version still readable.

    Raises:
        TypeError: ``older_than`` is not a number or ``retain_last`` not an int.
        ValueError: ``retain_last`` is below 1, or ``older_than`` is in the future.
        StoreError: the floor could not be committed (nothing was deleted).
    """
    cutoff = _seconds(older_than, "older_than")
    if isinstance(retain_last, bool) or not isinstance(retain_last, int):
        raise TypeError(f"retain_last must be an int, not {type(retain_last).__name__}")
    if retain_last < 1:
        raise ValueError(f"retain_last must be at least 1 (the newest version is always kept), got {retain_last}")
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, not {type(dry_run).__name__}")
    store = ctx.store
    head = store.refresh()
    cap = max(0, head - retain_last + 1)
    if cutoff is not None:
        age = store.storage_now() - cutoff
        if age < 0:
            raise ValueError(f"older_than {cutoff} is in the future (the storage's clock says {store.storage_now():.0f})")
        cap = min(cap, retention.window_floor(store, age))
    return maintenance.gc(ctx, dry_run, None, False, orphans=False, max_floor=cap)


def remove_orphan_files(ctx: LakeContext, older_than: float | None, dry_run: bool = False) -> GCReport:
    """Delete unreferenced files under ``data/`` older than ``older_than`` (None: ``gc_grace_s`` ago).

    Raises:
        TypeError: ``older_than`` is not a number, ``dry_run`` not a bool.
        ValueError: ``older_than`` is later than ``gc_grace_s`` ago.
    """
    cutoff = _seconds(older_than, "older_than")
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, not {type(dry_run).__name__}")
    grace = float(ctx.store.options.gc_grace_s)
    if cutoff is None:
        return maintenance.gc(ctx, dry_run, None, False, removals=False)
    age = ctx.store.storage_now() - cutoff
    if age < grace:
        raise ValueError(
            f"older_than must be at least gc_grace_s={grace:g} s ago (it is {age:.0f} s ago): "
            "a writer may still commit a younger file"
        )
    return maintenance.gc(ctx, dry_run, age, False, removals=False)
