"""External commit store: conditional create for object stores that lack it.

Lance's external-manifest-store protocol, with an LMDB database as the
arbiter. ``put_if_absent(path, data)`` runs in three steps:

1. **stage**: ``inner.put("_staging/<uuid>", data)``; a unique name, so a plain
   PUT is safe;
2. **claim**: in one LMDB write transaction, ``put(path, b"P" + staged_name,
   overwrite=False)``. This is the commit point: the first claim wins, every
   later one sees the key and returns False;
3. **copy**: ``inner.put(path, data)``, then mark the claim done (value
   ``b"D"``) and delete the stage.

A writer that dies between 2 and 3 leaves a pending claim. Any reader that
touches the path (``get``/``get_range``/``head``/``list``) finishes the copy
first, from the stage; copying the same bytes twice is harmless, so finishing
is idempotent and may run in several processes at once.

LMDB gives the claim its atomicity across threads and processes on one
machine (its lock file coordinates processes); the store is therefore a
commit arbiter for writers that share a filesystem, not across machines.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Iterator
from urllib.parse import quote

import lmdb

from kvstore.errors import ObjectStoreError, StoreClosedError
from kvstore.objstore.base import ObjectMeta, ObjectStore, validate_path, validate_prefix

STAGING_PREFIX = "_staging/"
"""Where staged objects live in the inner store; reserved and never listed."""

# 1 GiB of address space, not of disk: LMDB files grow as used. Each claim is a
# path plus ~40 bytes, so this holds tens of millions of commits.
MAP_SIZE = 1 << 30
_DB_NAME = b"commits"
_PENDING = b"P"  # value prefix: claimed, staged under the name that follows
_DONE = b"D"  # value: copied to the final name

_log = logging.getLogger(__name__)

# LMDB forbids opening one environment twice in a process, so environments are
# shared per (process, path) with a reference count. The pid is part of the key
# because a forked child must not reuse its parent's environment.
_envs: dict[tuple[int, str], tuple[lmdb.Environment, int]] = {}
_envs_lock = threading.Lock()


def _acquire_env(path: str) -> lmdb.Environment:
    key = (os.getpid(), path)
    with _envs_lock:
        entry = _envs.get(key)
        if entry is None:
            try:
                env = lmdb.open(path, map_size=MAP_SIZE, max_dbs=4, lock=True, subdir=True)
            except lmdb.Error as exc:
                raise ObjectStoreError(f"cannot open LMDB commit store at {path}: {exc}") from exc
            entry = (env, 0)
        _envs[key] = (entry[0], entry[1] + 1)
        return entry[0]


def _release_env(path: str) -> None:
    key = (os.getpid(), path)
    with _envs_lock:
        env, refs = _envs[key]
        if refs > 1:
            _envs[key] = (env, refs - 1)
            return
        del _envs[key]
        env.close()


class LmdbCommitStore:
    """Adds a correct ``put_if_absent`` to ``inner`` using an LMDB database.

    Args:
        inner: the object store holding the data; its own ``put_if_absent``
            is never called.
        lmdb_path: directory of the LMDB environment (created if missing).

    ``close()`` closes ``inner`` too: the commit store owns it. Thread- and
    process-safe.
    """

    def __init__(self, inner: ObjectStore, lmdb_path: str | os.PathLike[str]) -> None:
        if not isinstance(lmdb_path, (str, os.PathLike)):
            raise TypeError(f"lmdb_path must be a str or path, not {type(lmdb_path).__name__}")
        self.inner = inner
        self.lmdb_path = os.path.realpath(os.fspath(lmdb_path))
        # Reopening by URL must recreate the commit store, so it is part of it.
        self.url = f"{inner.url}?commit_store={quote('lmdb:' + self.lmdb_path, safe='/:')}"
        self._env = _acquire_env(self.lmdb_path)
        self._max_key = self._env.max_key_size()
        self._closed = False
        try:
            self._db = self._env.open_db(_DB_NAME)
        except lmdb.Error as exc:
            _release_env(self.lmdb_path)
            raise ObjectStoreError(f"cannot open LMDB database in {self.lmdb_path}: {exc}") from exc

    # -- LMDB access ---------------------------------------------------------

    def _key(self, path: str) -> bytes:
        validate_path(path)
        if path.startswith(STAGING_PREFIX):
            raise ValueError(f"object path {path!r} is inside the reserved {STAGING_PREFIX} prefix")
        key = path.encode()
        if len(key) > self._max_key:
            raise ValueError(f"object path {path!r} is longer than LMDB's {self._max_key}-byte key limit")
        if self._closed:
            raise StoreClosedError(f"{self.url} is closed")
        return key

    def _claim_state(self, key: bytes) -> bytes | None:
        try:
            with self._env.begin(db=self._db) as txn:
                return txn.get(key)
        except lmdb.Error as exc:
            raise ObjectStoreError(f"LMDB read in {self.lmdb_path} failed: {exc}") from exc

    def _lmdb_write(self, key: bytes, value: bytes, *, expect: bytes | None = None, overwrite: bool = True) -> bool:
        """Put ``key -> value``; with ``expect``, only if the current value is it."""
        try:
            with self._env.begin(write=True, db=self._db) as txn:
                if expect is not None and txn.get(key) != expect:
                    return False
                return bool(txn.put(key, value, overwrite=overwrite))
        except lmdb.Error as exc:
            raise ObjectStoreError(f"LMDB write in {self.lmdb_path} failed: {exc}") from exc

    def _finish(self, path: str, key: bytes, state: bytes | None) -> None:
        """Complete the copy of a pending claim; no-op for done or unclaimed paths."""
        if state is None or not state.startswith(_PENDING):
            return
        staged = state[len(_PENDING) :].decode()
        try:
            data = self.inner.get(staged)
        except FileNotFoundError as exc:
            # Another finisher copied the object and removed the stage after we
            # read the claim: the claim must say done by now.
            if self._claim_state(key) != state:
                return
            raise ObjectStoreError(
                f"{path!r} is claimed in {self.lmdb_path} but its staged copy {staged!r} is missing"
            ) from exc
        self.inner.put(path, data)
        self._lmdb_write(key, _DONE, expect=state)
        self.inner.delete(staged)

    def _inner_has(self, path: str) -> bool:
        try:
            self.inner.head(path)
        except FileNotFoundError:
            return False
        return True

    # -- the protocol --------------------------------------------------------

    def get(self, path: str) -> bytes:
        key = self._key(path)
        self._finish(path, key, self._claim_state(key))
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        key = self._key(path)
        self._finish(path, key, self._claim_state(key))
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectMeta:
        key = self._key(path)
        self._finish(path, key, self._claim_state(key))
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> None:
        self._key(path)
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        key = self._key(path)
        # Cheap early exits: already claimed, or present in the inner store
        # without a claim (written before this LMDB existed, or the LMDB was
        # lost). The second check keeps a reset LMDB from overwriting objects.
        if self._claim_state(key) is not None or self._inner_has(path):
            return False
        staged = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        self.inner.put(staged, data)
        pending = _PENDING + staged.encode()
        if not self._lmdb_write(key, pending, overwrite=False):
            self.inner.delete(staged)
            return False
        # Claimed: the commit is decided and durable (LMDB syncs on commit).
        # A failed copy is finished by the next reader, so it is not our
        # caller's failure; log it and report the win.
        try:
            self._finish(path, key, pending)
        except ObjectStoreError:
            _log.warning("copy of committed %r to %s failed; readers will finish it", path, self.inner.url, exc_info=True)
        return True

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        validate_prefix(prefix)
        if self._closed:
            raise StoreClosedError(f"{self.url} is closed")
        pending: list[tuple[str, bytes, bytes]] = []
        try:
            with self._env.begin(db=self._db) as txn:
                cursor = txn.cursor()
                if cursor.set_range(prefix.encode()):
                    for key, value in cursor:
                        if not key.startswith(prefix.encode()):
                            break
                        if value.startswith(_PENDING):
                            pending.append((key.decode(), key, value))
        except lmdb.Error as exc:
            raise ObjectStoreError(f"LMDB scan in {self.lmdb_path} failed: {exc}") from exc
        for path, key, state in pending:
            self._finish(path, key, state)
        return iter([m for m in self.inner.list(prefix) if not m.path.startswith(STAGING_PREFIX)])

    def delete(self, path: str) -> None:
        key = self._key(path)
        self.inner.delete(path)
        try:
            with self._env.begin(write=True, db=self._db) as txn:
                state = txn.pop(key)
        except lmdb.Error as exc:
            raise ObjectStoreError(f"LMDB delete in {self.lmdb_path} failed: {exc}") from exc
        if state is not None and state.startswith(_PENDING):
            self.inner.delete(state[len(_PENDING) :].decode())

    def close(self) -> None:
        """Release this handle's share of the LMDB environment and close ``inner``."""
        if self._closed:
            return
        self._closed = True
        _release_env(self.lmdb_path)
        self.inner.close()
