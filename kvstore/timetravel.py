"""Past versions of a store: read one (``at``), list them (``history``), pin
them (checkpoints), copy one out (``export``).

:class:`TimeTravel` is one part of a :class:`kvstore.store.Store` (which
forwards these methods to it and copies their documentation). It checks
arguments, pins what it reads in the handle's watermark, and uses the root
index the housekeeper keeps (:mod:`kvstore.history`), the checkpoint records
of :mod:`kvstore.retention` and the copier of :mod:`kvstore.export`.

>>> import kvstore
>>> with kvstore.open("memory://timetravel-doctest", poll_interval_s=0) as db:
...     _ = db.put(b"k", b"old")
...     old = db.version
...     _ = db.put(b"k", b"new")
...     _ = db.flush()
...     with db.at(version=old) as view:
...         view.get(b"k")
b'old'
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, Callable

from kvstore.committer import Committer, PendingCommit
from kvstore.errors import SnapshotTooOldError
from kvstore.export import ExportReport, TextProgress, export_version
from kvstore.history import RootIndex, VersionInfo, layers_at, version_at_timestamp
from kvstore.objstore.base import ObjectStore
from kvstore.options import StoreOptions
from kvstore.revisions import check_not_compacted
from kvstore.snapshot import Snapshot
from kvstore.state import EngineState
from kvstore.watermark import Watermark
from kvstore.retention import (
    Checkpoint,
    CheckpointChange,
    check_checkpoint_name,
    check_ttl,
    live_checkpoints,
)
from kvstore.format.names import IDENTITY_PATH


def _now_ms() -> int:
    return int(time.time() * 1000)


class TimeTravel:
    """Past versions for one store handle; see the module docstring. Thread-safe."""

    def __init__(
        self,
        objects: ObjectStore,
        state: EngineState,
        committer: Committer,
        watermark: Watermark,
        options: StoreOptions,
        index: RootIndex,
        check_open: Callable[[], None],
    ) -> None:
        self._objects = objects
        self._state = state
        self._committer = committer
        self._watermark = watermark
        self._options = options
        self._index = index
        self._check_open = check_open

    # -- history -------------------------------------------------------------------

    def at(
        self,
        version: int | None = None,
        *,
        timestamp: float | datetime | None = None,
        checkpoint: str | None = None,
        revision: int | None = None,
    ) -> Snapshot:
        """A read-only view of an older version; give exactly one argument.

        Args:
            version: the version number.
            timestamp: the version current at this time (seconds since the
                epoch, or a datetime), by the storage timestamps of root files.
            checkpoint: the version a checkpoint pins.
            revision: the store as it was right after the commit with this
                seq (a revision, as ``get_with_revision`` and watch events
                report it): commits after it are not seen, even those that
                share its version (a group commit). The snapshot's ``seq``
                is ``revision``; its ``version`` is the one holding it.

        Returns:
            A pinned :class:`~kvstore.store.Snapshot`: close it when done.

        Raises:
            TypeError / ValueError: not exactly one argument, or a bad one
                (a future version, an unknown checkpoint, a time before the store).
            SnapshotTooOldError: retention has dropped that version, or
                the revision is below the compaction floor (:mod:`kvstore.revisions`).
        """
        self._check_open()
        arguments = (("version", version), ("timestamp", timestamp), ("checkpoint", checkpoint), ("revision", revision))
        given = [name for name, value in arguments if value is not None]
        if len(given) != 1:
            raise TypeError(
                f"give exactly one of version=, timestamp=, checkpoint=, revision= (got {given or 'none'})"
            )
        if revision is not None:
            return self._view_at_revision(_check_revision(revision))
        if timestamp is not None:
            when = _seconds(timestamp)
            self._state.catch_up()
            version = version_at_timestamp(self._index, when, self._state.version)
        elif checkpoint is not None:
            version = self._checkpoint_version(checkpoint)
        return self._view_at(_check_version(version))

    def history(self, limit: int | None = 20, start: int | None = None) -> list[VersionInfo]:
        """The versions of the store, newest first.

        Args:
            limit: at most this many versions (None: all that remain).
            start: the newest version to report (default: the latest this
                handle has seen); the list goes down from it.

        Returns:
            :class:`~kvstore.history.VersionInfo` per version, stopping at the
            first version whose root file GC has removed. Each costs one GET
            and one HEAD the first time, then comes from a cache.

        Raises:
            TypeError / ValueError: a bad ``limit`` or ``start`` (negative,
                or a version that does not exist yet).
            StoreClosedError: the store is closed.
        """
        self._check_open()
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        if start is None:
            start = self._state.version
        else:
            start = _check_version(start)
            if start > self._state.version:
                self._state.catch_up()
                if start > self._state.version:
                    raise ValueError(f"version {start} does not exist yet (latest is {self._state.version})")
        infos: list[VersionInfo] = []
        version = start
        while version >= 0 and (limit is None or len(infos) < limit):
            info = self._index.info(version)
            if info is None:  # GC removes the oldest roots first: nothing older remains
                break
            infos.append(info)
            version -= 1
        return infos

    def _view_at(self, version: int) -> Snapshot:
        if version > self._state.version:
            self._state.catch_up()
            if version > self._state.version:
                raise ValueError(f"version {version} does not exist yet (latest is {self._state.version})")
        summary = self._index.summary(version)
        if summary is None:
            raise SnapshotTooOldError(f"version {version} was removed by retention (its root file is gone)")
        # Pin before building, so this handle's GC keeps what the view needs.
        self._watermark.pin(summary.last_seq)
        try:
            seq, layers = layers_at(self._state, self._index, version)
            return Snapshot(version, seq, layers, check_open=self._check_open, watermark=self._watermark)
        finally:
            self._watermark.unpin(summary.last_seq)

    def version_of_revision(self, revision: int) -> int:
        """The version holding revision ``revision`` (the next version, if it is not committed yet).

        Raises:
            TypeError / ValueError: not a revision (an int >= 0).
            SnapshotTooOldError: ``revision`` is below the compaction floor, or
                its version is no longer retained.
        """
        check_not_compacted(self._objects, _check_revision(revision))
        version, seq = self._state.head
        if revision > seq:
            return version + 1
        found = self._index.oldest_reaching_seq(revision, version)
        if found > 0 and self._index.summary(found - 1) is None and revision > 0:
            raise SnapshotTooOldError(f"revision {revision} was removed by retention")
        return found

    def first_revision_of(self, version: int) -> int:
        """The first revision a watch from ``version`` can report: the one after version ``version - 1``'s
        last (0 when that version is unknown: retention dropped it, or ``version`` is 0)."""
        summary = self._index.summary(version - 1) if version > 0 else None
        return 0 if summary is None else summary.last_seq + 1

    def _view_at_revision(self, revision: int) -> Snapshot:
        check_not_compacted(self._objects, revision)
        if revision > self._state.last_seq:
            self._state.catch_up()
            if revision > self._state.last_seq:
                raise ValueError(f"revision {revision} does not exist yet (latest is {self._state.last_seq})")
        self._watermark.pin(revision)
        try:
            current = self._state.view()
            version = self._index.oldest_reaching_seq(revision, current.version)
            if revision >= current.tree.floor_seq:
                # Reads at any seq at or above the floor are exact in the current layers.
                layers = current.layers
            else:
                # Exact only when the version before is still there (so the
                # revision is known to lie inside ``version``).
                if version > 0 and self._index.summary(version - 1) is None:
                    raise SnapshotTooOldError(f"revision {revision} was removed by retention")
                _, layers = layers_at(self._state, self._index, version)
            return Snapshot(version, revision, layers, check_open=self._check_open, watermark=self._watermark)
        finally:
            self._watermark.unpin(revision)

    def _checkpoint_version(self, name: str) -> int:
        check_checkpoint_name(name)
        entry = self._state.checkpoints.get(name)
        if entry is None:
            raise ValueError(f"checkpoint {name!r} does not exist")
        found = Checkpoint.from_entry(name, entry)
        if found.expired(_now_ms()):
            raise SnapshotTooOldError(f"checkpoint {name!r} expired; its version may be gone")
        return found.version

    # -- checkpoints ---------------------------------------------------------------

    def checkpoint(self, name: str, ttl: float | None = None) -> Checkpoint:
        """Durably pin the version this handle sees now under ``name``.

        Retention keeps a pinned version readable (``at(checkpoint=name)``)
        until the checkpoint is removed or its ``ttl`` (seconds) lapses.
        Setting an existing name moves it.
        """
        check_checkpoint_name(name)
        ttl_s = check_ttl(ttl)
        self._check_open()
        version, seq = self._state.head
        now_ms = _now_ms()
        pinned = Checkpoint(name, version, seq, now_ms, None if ttl_s is None else now_ms + int(ttl_s * 1000))
        change = CheckpointChange(name, pinned.to_entry(), now_ms)
        # Held while committing: this handle's compactions must not raise the
        # floor past the version before the pin is durable.
        self._watermark.pin(seq)
        try:
            self._committer.submit(PendingCommit({}, {"op": "checkpoint"}, checkpoint_change=change))
        finally:
            self._watermark.unpin(seq)
        return pinned

    def checkpoints(self) -> list[Checkpoint]:
        """The live (unexpired) checkpoints, by name."""
        self._check_open()
        return live_checkpoints(self._state.checkpoints, _now_ms())

    def remove_checkpoint(self, name: str) -> None:
        """Remove checkpoint ``name``; its version then ages out like any other.

        Raises:
            ValueError: there is no such checkpoint.
        """
        check_checkpoint_name(name)
        self._check_open()
        if name not in self._state.checkpoints:
            self._state.catch_up()
            if name not in self._state.checkpoints:
                raise ValueError(f"checkpoint {name!r} does not exist")
        change = CheckpointChange(name, None, _now_ms())
        self._committer.submit(PendingCommit({}, {"op": "checkpoint"}, checkpoint_change=change))

    # -- export ------------------------------------------------------------------------

    def export(
        self, dest_url: str | ObjectStore, version: int | None = None, *, progress: bool = False, **dest_options: Any
    ) -> ExportReport:
        """Copy ``version`` (default: the latest) and all it needs to an empty store.

        The destination opens at that version on its own. Every byte copied
        is verified first (checksums and structure): a corrupt source file
        stops the export before the destination gets its identity.

        Args:
            dest_url: a store URL or ObjectStore, with no store in it yet.
            version: the version to export.
            progress: draw a progress line on stderr.
            **dest_options: backend options for a ``dest_url`` string
                (``endpoint_url``, ``key``, ``secret``, ``region``, ...; see
                :func:`~kvstore.objstore.open_store`).

        Raises:
            ValueError: the destination is not empty, no such version, or
                ``dest_options`` with an ObjectStore destination.
            SnapshotTooOldError: retention removed files the version needs.
            CorruptionError: a file of the version failed verification.
        """
        self._check_open()
        version = self._state.version if version is None else _check_version(version)
        if version > self._state.version:
            raise ValueError(f"version {version} does not exist yet (latest is {self._state.version})")
        if isinstance(dest_url, str):
            from kvstore.objstore import open_store

            dest, owned = open_store(dest_url, **dest_options), True
        elif dest_options:
            raise ValueError(f"dest_options {sorted(dest_options)} need a dest_url string, not an ObjectStore")
        elif isinstance(dest_url, ObjectStore):
            dest, owned = dest_url, False
        else:
            raise TypeError(f"dest_url must be a URL string or an ObjectStore, not {type(dest_url).__name__}")
        summary = self._index.summary(version)
        if summary is None:
            raise SnapshotTooOldError(f"version {version} was removed by retention")
        self._watermark.pin(summary.last_seq)  # keep this handle's GC off the files being copied
        try:
            identity = json.loads(self._objects.get(IDENTITY_PATH))
            return export_version(
                self._state,
                dest,
                version,
                source_identity=identity,
                parallelism=self._options.open_parallelism,
                progress=TextProgress() if progress else None,
            )
        finally:
            self._watermark.unpin(summary.last_seq)
            if owned:
                dest.close()


def _check_version(version: object) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int, not {type(version).__name__}")
    if version < 0:
        raise ValueError(f"version must be >= 0, got {version}")
    return version


def _check_revision(revision: object) -> int:
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise TypeError(f"revision must be an int, not {type(revision).__name__}")
    if revision < 0:
        raise ValueError(f"revision must be >= 0, got {revision}")
    return revision


def _seconds(timestamp: object) -> float:
    if isinstance(timestamp, datetime):
        return timestamp.timestamp()
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        raise TypeError(f"timestamp must be seconds since the epoch or a datetime, not {type(timestamp).__name__}")
    return float(timestamp)
