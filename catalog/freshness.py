"""When a data file may become referenced: the rule that keeps GC from taking it.

``lake.gc()`` deletes a data file that no key references once its storage
timestamp is certainly older than the grace period (``gc_grace_s``). A file is
written first and referenced later (by a commit, or by a durable
transaction's staged operation), maybe by another process, maybe an hour
later. Between the two it is an orphan, so a commit must never reference a
file GC may already have taken, or may take before the commit lands.

The rule is the engine's for its SSTs (``kvstore.flush``): a file may be
referenced only while it is younger than **half** the grace period, and the
commit that references it must be published before it gets that old; the
committer checks that deadline right before the root file's PUT
(:meth:`kvstore.txn.Transaction.publish_by`). GC takes its clock reading
before it reads what is referenced, so a commit it does not see was checked
after that reading, against a file younger than half the grace: the two
halves never meet.

A file's age is its storage timestamp (a HEAD, which also proves the file
still exists) against the storage's own clock (``Store.storage_now``), the
two clocks GC compares. Whole-second stamps (S3) are truncated, which makes
an age up to a second too old, never too young: a fresh file is refused a
second early at worst, a nuisance only with a grace of a few seconds. The
writer's local clock is not used: it can stop (a suspended machine's
monotonic clock does) while the storage's runs on.

This module is the one place the rule lives: :func:`catalog.transactions.commit_ops`
and durable staging (:mod:`catalog.durable.session`) both call
:func:`publish_deadline`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from catalog.datafiles import DataFile
from catalog.errors import StaleDataFileError
from kvstore.objstore.base import ObjectStore
from kvstore.store import Store

# A commit of many files (a Spark job's) HEADs them from a few threads: on S3
# each HEAD is a round trip of milliseconds.
_PARALLEL_HEADS_FROM: Final = 4
_HEAD_THREADS: Final = 16
# Where GC looks for orphans (catalog.tree.DATA_PREFIX, which this module cannot import: a cycle).
GC_COLLECTED_PREFIX: Final = "data/"


def publish_deadline(store: Store, objects: ObjectStore, files: Iterable[DataFile]) -> float | None:
    """The ``time.monotonic()`` by which a commit referencing ``files`` must be published.

    None when ``files`` is empty (nothing to protect).

    Raises:
        StaleDataFileError: a file is missing, or already older than half of
            the store's ``gc_grace_s``: it must be written again.
        ObjectStoreError: a HEAD or the storage clock's probe failed.
    """
    half_grace = float(store.options.gc_grace_s) / 2
    # GC takes unreferenced files only under data/ (catalog.maintenance): a file elsewhere
    # (one catalog.import_files imported in place) is no orphan it could take, whatever its age.
    files = [f for f in files if f.path.startswith(GC_COLLECTED_PREFIX)]
    if not files:
        return None
    if len(files) > _PARALLEL_HEADS_FROM:
        with ThreadPoolExecutor(max_workers=_HEAD_THREADS) as pool:
            stamps = list(pool.map(lambda f: _mtime(objects, f, store), files))
    else:
        stamps = [_mtime(objects, f, store) for f in files]
    now = store.storage_now()
    age, f = max(((max(0.0, now - mtime), f) for mtime, f in zip(stamps, files)), key=lambda pair: pair[0])
    if age >= half_grace:
        raise StaleDataFileError(
            f"data file {f.path} is {age:.1f} s old, past half the GC grace period "
            f"(gc_grace_s={store.options.gc_grace_s:g} s): lake.gc() may delete it before or after this commit. "
            "Write the data again (table.write_files) and commit the new files",
            path=f.path,
        )
    return time.monotonic() + (half_grace - age)


def _mtime(objects: ObjectStore, f: DataFile, store: Store) -> float:
    try:
        return objects.head(f.path).mtime
    except FileNotFoundError:
        raise StaleDataFileError(
            f"data file {f.path} does not exist (GC deletes unreferenced files older than "
            f"gc_grace_s={store.options.gc_grace_s:g} s): write the data again and commit the new files",
            path=f.path,
        ) from None
