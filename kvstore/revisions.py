"""The store-wide revision and its compaction floor (etcd's ``Compact``).

A revision is the seq of a commit: it grows by one with each committed
write, store-wide, in every process (``Store.seq`` is the newest this handle
has seen, ``get_with_revision`` and watch events give a key's, and
``Store.at(revision=...)`` reads the store as it was right after one). A
lakekv *version* (one root file) groups the commits of one group commit; it
is an internal unit that :meth:`kvstore.history.RootIndex.oldest_reaching_seq`
maps revisions onto.

``compact_revisions(r)`` says that nobody will read history below revision
``r`` again: reads and watches at an older revision then fail with
:class:`~kvstore.errors.SnapshotTooOldError` (etcd's "required revision has
been compacted"), as they do once retention has dropped the history. The
floor is recorded as an object ``compacted/<revision>`` written with
put-if-absent, not as a commit, so compacting consumes no revision (as in
etcd) and servers sharing the store agree on it: the floor is the highest
such object. Only the newest few are kept.

The floor is a promise to readers, not a trigger: the engine's own retention
(``retention_window_s``, checkpoints, open snapshots) still decides when old
versions' files go.
"""

from __future__ import annotations

from typing import Final

from kvstore.errors import SnapshotTooOldError
from kvstore.format.names import COMPACTED_PREFIX, compacted_path
from kvstore.objstore.base import ObjectStore

# Older floor records are deleted once this many newer ones exist (a racing
# reader may still be listing them: never delete the newest).
KEEP_RECORDS: Final = 4


def compacted_revision(objects: ObjectStore) -> int:
    """The store's compaction floor: 0 if ``compact_revisions`` was never called."""
    names = [meta.path for meta in objects.list(COMPACTED_PREFIX)]
    return max((int(name[len(COMPACTED_PREFIX):]) for name in names), default=0)


def compact_revisions(objects: ObjectStore, revision: int, latest: int) -> int:
    """Raise the floor to ``revision`` (at most ``latest``, the newest revision); return the floor.

    Raises:
        TypeError / ValueError: not an int, or above ``latest``.
        SnapshotTooOldError: the floor is already at or above ``revision``.
    """
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise TypeError(f"revision must be an int, not {type(revision).__name__}")
    if revision > latest:
        raise ValueError(f"revision {revision} does not exist yet (latest is {latest})")
    current = compacted_revision(objects)
    if revision <= current:
        raise SnapshotTooOldError(f"revision {revision} is already compacted (the floor is {current})")
    objects.put_if_absent(compacted_path(revision), str(revision).encode())
    names = sorted(meta.path for meta in objects.list(COMPACTED_PREFIX))
    for name in names[:-KEEP_RECORDS]:
        objects.delete(name)
    return revision


def check_not_compacted(objects: ObjectStore, revision: int) -> None:
    """Refuse a read or watch at ``revision`` below the compaction floor.

    Raises:
        SnapshotTooOldError: ``revision`` is below the floor.
    """
    floor = compacted_revision(objects)
    if revision < floor:
        raise SnapshotTooOldError(f"revision {revision} has been compacted (the floor is {floor})")
