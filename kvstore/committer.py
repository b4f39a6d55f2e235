"""The commit path: group commit onto the version chain.

One committer thread per store handle. Callers enqueue a
:class:`PendingCommit` and block; the thread drains the queue into a group,
validates it (the transactions seam), assigns one seq per transaction,
builds ONE root file for version N+1 and ``put_if_absent``s it.

A caller that finds the committer idle (nothing queued, no group in flight)
commits its own group of one on its own thread instead: no hand-off to the
committer thread and back. Each hand-off is a thread wake-up that needs the
GIL, and while another thread of the process runs Python a wake-up waits up
to ``sys.getswitchinterval()`` (5 ms) for it, which divided commit throughput
by ~50. Callers that arrive meanwhile queue as before, and the committer
thread commits them as one group once the inline commit is done, so
concurrent commits still share a root file. That PUT is
the only I/O on the critical path of an inline commit: the hint is written
later by :class:`~kvstore.chain.HintWriter`, the delta goes in the root.

Lost race (another writer created N+1): catch up with the winners' versions
(which also feeds their write sets to the validator), re-validate, re-assign
seqs and retry at the new N+1 after a jittered backoff.

Ambiguous PUT (the call failed, but did the object get created?) and every
"already exists": read root N+1 back and compare its ``commit_id`` with ours
(clients that retry internally can report our own landed PUT as a conflict).
If it is absent, retry the *same bytes* at the same version, so a delayed
first attempt and the retry can never both land.

While a large commit's root file is written (an fsync or a network PUT, the
GIL released), a helper thread applies its rows to the memtable: that insert
is most of the commit's CPU, and it then costs no wall time. Readers cannot
see the rows early, since every read filters on a snapshot seq and the head
moves only after the root is durable; if the commit does not land, the rows
are taken out again (:meth:`~kvstore.memtable.Memtable.retract_last`) before
anything else touches the memtable (the chain lock is held throughout).

Refused PUT (:class:`~kvstore.errors.NotWrittenError`: the storage proved the
root file was never created, e.g. the disk is full): if no earlier attempt
was ambiguous, nothing of this commit can land later, so it fails at once
with :class:`~kvstore.errors.CommitNotLandedError` instead of retrying and
then reporting an unsettled commit.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from kvstore.backoff import backoff_delay
from kvstore.batch import Mutation, mutation_rows
from kvstore.chain import HintWriter, VersionChain, encode_for_publish
from kvstore.errors import (
    CommitError,
    CommitNotLandedError,
    NotWrittenError,
    ObjectStoreError,
    StaleOutputError,
    StoreClosedError,
    TreeChangedError,
)
from kvstore.format.names import new_sst_path
from kvstore.format.root import RootFile, encode_rows
from kvstore.format.rows import ROW_OVERHEAD_BYTES, Row
from kvstore.format.sst import write_sst
from kvstore.options import StoreOptions
from kvstore.retention import CheckpointChange
from kvstore.state import EngineState

log = logging.getLogger(__name__)

# Tries to settle one ambiguous PUT (each a PUT and/or a read-back) before
# giving up with CommitError; spaced by the store's backoff.
_AMBIGUOUS_TRIES = 12

# A commit's rows go to the memtable on the helper thread, while its root file
# is written, when it has at least this many rows and recent root writes took
# at least this long (a fast write, e.g. without fsync, would only add the
# thread hand-off).
_OVERLAP_MIN_ROWS = 256
_OVERLAP_MIN_PUBLISH_S = 0.0003


@dataclass(frozen=True)
class TreeChange:
    """A commit that replaces the tree (flush, compaction).

    It applies only on top of ``expected_tree`` (the tree it was computed
    from); data commits never change the tree, so they never conflict with it,
    while two tree changes from the same base do: the second gets
    :class:`~kvstore.errors.TreeChangedError`.
    """

    expected_tree: str | None
    new_tree: str
    flushed_upto: int
    # time.monotonic() after which the change must not be published: its
    # files are unreferenced until it lands and GC (in any process) deletes
    # unreferenced files past its grace period. Checked right before the PUT,
    # after any wait in the queue. None: no limit.
    deadline: float | None = None


def _held_lock() -> Any:
    lock = threading.Lock()
    lock.acquire()
    return lock


# Guards PendingCommit._settled (see wait_settled): one lock for all commits,
# held for two attribute accesses, so no commit pays for a lock of its own.
_settle_lock = threading.Lock()


@dataclass(eq=False)
class PendingCommit:
    """One transaction (or blind write) waiting for the committer."""

    mutations: dict[bytes, Mutation]
    descriptor: dict[str, Any] = field(default_factory=dict)
    # Read/write sets for validation; None for blind writes (never conflict).
    validation: Any = None
    tree_change: TreeChange | None = None
    # Sets or removes one named checkpoint (kvstore.retention); like a tree
    # change it uses no seq, but it never conflicts.
    checkpoint_change: CheckpointChange | None = None
    # time.monotonic() after which this commit must not be published (see
    # Transaction.publish_by): like TreeChange.deadline, for a data commit
    # that makes objects referenced which GC deletes past its grace. None: no limit.
    deadline: float | None = None
    seq: int = 0
    version: int = -1
    error: BaseException | None = None
    finished: bool = False
    # A lock held from birth and released once by the committer: the cheapest
    # one-shot wake-up CPython has (an Event costs a Condition and a lock per wait).
    _gate: Any = field(default_factory=_held_lock, repr=False)
    # Created only when a thread other than the caller waits (wait_settled).
    _settled: threading.Event | None = field(default=None, repr=False)
    # Called (on the committer's thread) once there is an outcome: for callers
    # that do not block a thread on the commit (Committer.submit_nowait).
    on_finished: Callable[[PendingCommit], None] | None = field(default=None, repr=False)

    def finish(self, error: BaseException | None = None) -> None:
        """Record the outcome and wake the caller. Requires: called once."""
        if error is not None:
            self.error = error
        with _settle_lock:
            self.finished = True
            settled = self._settled
        self._gate.release()
        if settled is not None:
            settled.set()
        if self.on_finished is not None:
            self.on_finished(self)

    def wait(self) -> None:
        """The submitting caller's wait (once)."""
        self._gate.acquire()

    def wait_settled(self, timeout: float) -> bool:
        """Wait, from any thread and any number of times, until the commit has
        an outcome; False if ``timeout`` seconds passed first."""
        with _settle_lock:
            if self.finished:
                return True
            if self._settled is None:
                self._settled = threading.Event()
            settled = self._settled
        return settled.wait(timeout)

    @property
    def committed(self) -> bool:
        """Published: its version and seq are final (set before it is applied and finished)."""
        return self.version >= 0 and self.error is None

    def nbytes(self) -> int:
        return sum(len(k) + (len(m[1]) if m[1] is not None else 0) + ROW_OVERHEAD_BYTES for k, m in self.mutations.items())


# Given the group in queue order, return the commits that may proceed and set
# ``error`` on the others. Called under the chain lock, on every attempt.
Validator = Callable[[list[PendingCommit]], list[PendingCommit]]


class _MemtableApplier:
    """A thread that applies one commit's rows to a memtable while the committer publishes.

    One job at a time: :meth:`start`, then :meth:`wait` (by the same thread).
    """

    def __init__(self) -> None:
        self._go = _held_lock()  # released to hand over a job
        self._done = _held_lock()  # released when the job is done
        self._job: tuple[Any, list[Row]] | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def start(self, memtable: Any, rows: list[Row]) -> None:
        if self._thread is None or self._pid != os.getpid():  # none yet, or a forked child (no thread there)
            self._go, self._done = _held_lock(), _held_lock()
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name="lakekv-memtable-apply", daemon=True)
            self._thread.start()
        self._job = (memtable, rows)
        self._go.release()

    def wait(self) -> BaseException | None:
        """Wait for the job; the error it raised, or None."""
        self._done.acquire()
        error, self._error = self._error, None
        return error

    def close(self) -> None:
        if self._thread is not None and self._pid == os.getpid():
            self._job = None
            self._go.release()
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while True:
            self._go.acquire()
            job = self._job
            if job is None:
                return
            try:
                job[0].apply(job[1])
            except BaseException as exc:  # handed to the committer, which decides
                self._error = exc
            self._job = None
            self._done.release()


class Committer:
    """Owns the commit thread of one store handle. Thread-safe ``submit``."""

    def __init__(
        self,
        state: EngineState,
        options: StoreOptions,
        writer_id: str,
        hint_writer: HintWriter,
        validator: Validator | None = None,
        *,
        threaded: bool = True,
    ) -> None:
        """``threaded=False``: no commit thread; each ``submit`` commits in the
        calling thread, one caller at a time (no group commit)."""
        self._state = state
        self._chain: VersionChain = state.chain
        self._options = options
        self._writer_id = writer_id
        self._hint = hint_writer
        self.validator = validator
        self._queue: deque[PendingCommit] = deque()
        self._cond = threading.Condition()
        self._closed = False
        # A group is being committed (by the thread or inline by a caller):
        # new commits queue behind it and the thread waits for it to end.
        self._busy = False
        self.groups_committed = 0
        self.inline_commits = 0  # groups of one committed on the caller's thread
        # Commit ids from a generator seeded once from the OS: uuid4 asks the
        # OS for randomness on every commit, and that call releases the GIL
        # (a wait of up to the switch interval beside a busy thread).
        self._ids = random.Random(os.urandom(32))
        self.races_lost = 0
        self._inline_lock = threading.Lock()  # serialises inline commits (threaded=False)
        self._thread: threading.Thread | None = None
        # Applies a large commit's rows while its root is written (threaded only).
        self._applier = _MemtableApplier() if threaded else None
        self._publish_s = 0.0  # recent root writes' wall time (moving average)
        self.overlapped_commits = 0
        if threaded:
            self._thread = threading.Thread(target=self._run, name="lakekv-committer", daemon=True)
            self._thread.start()

    def submit(self, pending: PendingCommit, on_queued: Callable[[], None] | None = None) -> PendingCommit:
        """Queue ``pending`` and wait until it is durable or has failed.

        ``on_queued()`` runs on the caller's thread once ``pending`` has its
        place in the commit order (queued, or being committed inline), before
        the wait: a commit submitted after that point is validated after
        this one. Transactions use it to hand their key locks over early.

        Raises:
            StoreClosedError: the store is closed.
            ConflictError / CommitError / ObjectStoreError: as set by the committer.
        """
        if self._thread is None:
            with self._inline_lock:
                if self._closed:
                    raise StoreClosedError("store is closed")
                if on_queued is not None:
                    on_queued()
                self._commit_safely([pending])
        else:
            with self._cond:
                if self._closed:
                    raise StoreClosedError("store is closed")
                inline = not self._busy and not self._queue
                if inline:
                    self._busy = True
                else:
                    self._queue.append(pending)
                    self._cond.notify()
            if on_queued is not None:
                on_queued()
            if inline:
                self._commit_inline(pending)
            else:
                pending.wait()
        if pending.error is not None:
            raise pending.error
        return pending

    def submit_nowait(self, pending: PendingCommit) -> bool:
        """Queue ``pending`` for the committer thread and return at once; its
        ``on_finished`` runs there with the outcome. False (nothing queued) for a
        handle without threads: the caller commits with :meth:`submit` instead.

        Raises:
            StoreClosedError: the store is closed.
        """
        if self._thread is None:
            return False
        with self._cond:
            if self._closed:
                raise StoreClosedError("store is closed")
            self._queue.append(pending)
            self._cond.notify()
        return True

    def _commit_inline(self, pending: PendingCommit) -> None:
        """Commit ``pending`` alone on the caller's thread (the committer was idle)."""
        try:
            self._commit_safely([pending])
            if pending.error is None:
                self.inline_commits += 1
        finally:
            with self._cond:
                self._busy = False
                if self._queue or self._closed:
                    self._cond.notify()  # the thread takes what queued meanwhile

    def close(self) -> None:
        """Commit what is queued, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        else:
            with self._inline_lock:  # wait for an inline commit in flight
                pass
        if self._applier is not None:
            self._applier.close()

    # -- the thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                # While a caller commits inline, let the queue grow into a group.
                while self._busy or (not self._queue and not self._closed):
                    self._cond.wait()
                if not self._queue:
                    return
                group = self._take_group()
                self._busy = True
            try:
                self._commit_safely(group)
            finally:
                with self._cond:
                    self._busy = False

    def _commit_safely(self, group: list[PendingCommit]) -> None:
        try:
            self._commit_group(group)
        except BaseException as exc:  # deliver any failure to the waiting callers
            if isinstance(exc, CommitNotLandedError):
                log.warning("commit group failed: %s", exc)  # a known outcome: no traceback
            else:
                log.exception("commit group failed")
            for pending in group:
                if not pending.finished:
                    pending.finish(exc)

    def _take_group(self) -> list[PendingCommit]:
        group = [self._queue.popleft()]
        size = group[0].nbytes()
        limit_n, limit_bytes = self._options.max_group_commits, self._options.max_group_bytes
        while self._queue and len(group) < limit_n:
            nbytes = self._queue[0].nbytes()
            if size + nbytes > limit_bytes:
                break
            group.append(self._queue.popleft())
            size += nbytes
        return group

    def _commit_group(self, group: list[PendingCommit]) -> None:
        options = self._options
        pending = group
        for attempt in range(options.max_commit_attempts):
            with self._state.chain_lock:
                if time.monotonic() - self._state.last_sync > options.stale_check_s:
                    self._state.catch_up(stale_after_s=options.stale_check_s)
                pending = self._check_tree_changes(pending)
                accepted = self.validator(pending) if self.validator is not None else pending
                for rejected in pending:
                    if rejected.error is not None and not rejected.finished:
                        rejected.finish()
                if not accepted:
                    return
                if self._try_commit(accepted):
                    return
                self.races_lost += 1
                self._state.catch_up()
            pending = accepted
            time.sleep(backoff_delay(attempt, options.backoff_min_s, options.backoff_max_s))
        error = CommitError(f"commit lost the version race {options.max_commit_attempts} times in a row")
        for p in pending:
            p.finish(error)

    def _check_tree_changes(self, pending: list[PendingCommit]) -> list[PendingCommit]:
        """Fail commits past their deadline and tree changes whose base tree is gone
        (at most one tree change per group survives)."""
        tree = self._state.tree_path
        kept = []
        for p in pending:
            if p.deadline is not None and time.monotonic() > p.deadline:
                p.finish(StaleOutputError("commit missed its publish deadline; GC may take the objects it references"))
                continue
            change = p.tree_change
            if change is not None:
                if change.deadline is not None and time.monotonic() > change.deadline:
                    p.finish(StaleOutputError(f"tree change to {change.new_tree} missed its deadline; GC may take its files"))
                    continue
                if change.expected_tree != tree:
                    p.finish(TreeChangedError(f"tree changed from {change.expected_tree} to {tree} meanwhile"))
                    continue
                tree = change.new_tree
            kept.append(p)
        return kept

    def _try_commit(self, accepted: list[PendingCommit]) -> bool:
        """One attempt at version N+1; True if it is ours (callers released)."""
        state = self._state
        version = state.version + 1
        first_seq = state.last_seq + 1
        descriptors = []
        tree, flushed_upto = state.tree_path, state.tree.flushed_upto
        data = [p for p in accepted if p.tree_change is None and p.checkpoint_change is None]
        for change in (p.tree_change for p in accepted if p.tree_change is not None):
            tree, flushed_upto = change.new_tree, change.flushed_upto
            descriptors.append({"op": "tree", "tree": change.new_tree, "flushed_upto": change.flushed_upto})
        # Every root carries the checkpoint map forward; checkpoint commits change it.
        checkpoints = state.checkpoints
        for checkpoint in (p.checkpoint_change for p in accepted if p.checkpoint_change is not None):
            checkpoints = checkpoint.apply(checkpoints)
            descriptors.append({"op": "checkpoint", "name": checkpoint.name, "set": checkpoint.entry is not None})
        for offset, pending in enumerate(data):
            pending.seq = first_seq + offset
            descriptors.append(dict(pending.descriptor, seq=pending.seq))
        try:
            # Newest commit first, then a stable sort on the key: storage order.
            rows = mutation_rows([(pending.seq, pending.mutations) for pending in reversed(data)])
            encoded_rows = encode_rows(rows, first_seq)
        except Exception as exc:  # one member's bad data must not fail the others
            return self._retry_without_unencodable(accepted, data, exc)
        delta_sst = None
        inline_rows: list[Row] = rows
        if len(encoded_rows) > self._options.inline_delta_bytes:
            try:
                info = write_sst(state.store, new_sst_path(), rows, compression=self._options.sst_compression)
            except NotWrittenError as exc:
                raise CommitNotLandedError(
                    f"the commit of version {version} did not land: its delta SST could not be written ({exc})"
                ) from exc
            delta_sst = info.to_dict()
            inline_rows = []
            encoded_rows = encode_rows(inline_rows, first_seq)
        root = RootFile(
            version=version,
            parent=state.version,
            first_seq=first_seq,
            last_seq=first_seq + len(data) - 1,  # a tree-only commit uses no seq
            writer_id=self._writer_id,
            writer_clock_ms=int(time.time() * 1000),
            commit_id=self._new_commit_id(),
            tree=tree,
            flushed_upto=flushed_upto,
            delta=None,
            delta_sst=delta_sst,
            commits=descriptors,
            checkpoints=checkpoints,
            rows=tuple(inline_rows),
        )
        try:
            encoded = encode_for_publish(root, encoded_rows)
        except Exception as exc:
            if delta_sst is not None:
                self._delete_orphan(delta_sst["path"])
            return self._retry_without_unencodable(accepted, data, exc)
        in_memtable = self._publish_overlapped(root, encoded, rows, delta_sst)
        if in_memtable is None:
            return False
        for pending in accepted:
            # Before the state moves its head: a reader of the head that
            # finds ``committed`` set knows whether the head includes it by
            # comparing seqs (kvstore.inflight relies on that order).
            pending.version = version
        state.apply_root(root, rows, in_memtable=in_memtable)
        state.last_sync = time.monotonic()  # we just created the head
        self.groups_committed += 1
        for pending in accepted:
            pending.finish()
        self._hint.offer(version)
        return True

    def _publish_overlapped(self, root: RootFile, encoded: bytes, rows: list[Row], delta_sst: dict[str, Any] | None) -> bool | None:
        """Publish ``root``; meanwhile apply ``rows`` to the memtable if that pays.

        Returns None if the root is not ours (lost race), else whether
        ``rows`` are in the memtable now. Whatever the outcome, a commit that
        did not land leaves nothing behind: no rows, no delta SST.

        Raises:
            CommitNotLandedError / CommitError: as :meth:`_publish`.
        """
        applier = self._applier
        overlap = applier is not None and len(rows) >= _OVERLAP_MIN_ROWS and self._publish_s >= _OVERLAP_MIN_PUBLISH_S
        memtable = self._state.layers.memtable
        if overlap:
            applier.start(memtable, rows)  # type: ignore[union-attr]
        published = False
        never_lands = True  # False while an unsettled commit (CommitError) may still have landed
        started = time.perf_counter()
        try:
            published = self._publish(root, encoded)
        except CommitNotLandedError:
            raise
        except BaseException:
            never_lands = False
            raise
        finally:
            self._publish_s += (time.perf_counter() - started - self._publish_s) / 4
            in_memtable = False
            if overlap:
                in_memtable = applier.wait() is None  # type: ignore[union-attr]  # on an error apply_root tries again
                if in_memtable and not published:
                    # Also if it may have landed: then catching up applies it from its root file.
                    memtable.retract_last(rows)
            if not published and never_lands and delta_sst is not None:
                self._delete_orphan(delta_sst["path"])  # referenced by nothing, ever
        if not published:
            return None
        self.overlapped_commits += in_memtable
        return in_memtable

    def _new_commit_id(self) -> str:
        """32 hex digits, unique across writers (the process id guards a handle used after fork)."""
        return f"{self._ids.getrandbits(96) ^ (os.getpid() << 64):032x}"

    def _retry_without_unencodable(
        self, accepted: list[PendingCommit], data: list[PendingCommit], exc: Exception
    ) -> bool:
        """Fail the members that cannot be encoded on their own and retry the rest.

        Only reached when encoding the group failed, so the happy path pays
        nothing. If no single member is to blame, the error is the group's
        (e.g. the version number overflowed) and propagates.
        """
        culprits = [p for p in data if _encoding_error(p) is not None]
        if not culprits:
            raise exc
        for pending in culprits:
            cause = _encoding_error(pending)
            error = CommitNotLandedError(f"this commit could not be encoded, nothing was written: {cause}")
            error.__cause__ = cause
            pending.finish(error)
        # Validated members that read a culprit's in-flight writes (key lock
        # hand-over) must not land without it: the validator rejects them.
        rest = [p for p in accepted if not p.finished]
        if self.validator is not None:
            rest = self.validator(rest)
            for rejected in accepted:
                if rejected.error is not None and not rejected.finished:
                    rejected.finish()
        return self._try_commit(rest) if rest else True

    def _publish(self, root: RootFile, data: bytes) -> bool:
        """put_if_absent the root; settle ambiguous failures by reading it back.

        Raises:
            CommitNotLandedError: the storage refused the root file and no
                earlier attempt can have landed.
            CommitError: the outcome stayed unknown.
        """
        ambiguous: ObjectStoreError | None = None
        uncertain = False  # an attempt that may have landed (or may still land)
        for attempt in range(_AMBIGUOUS_TRIES):
            if attempt:
                # Up to 4x the race backoff: an ambiguous PUT means the network
                # or the service is struggling; give it time to settle.
                options = self._options
                time.sleep(backoff_delay(attempt, options.backoff_min_s, options.backoff_max_s * 4))
            try:
                if self._chain.publish(data, root.version):
                    return True
                # "Already exists" is not proof of a lost race: a client that
                # retried a timed-out PUT internally (s3fs does) reports our own
                # landed write as a conflict. The commit id settles it.
            except NotWrittenError as exc:
                if not uncertain:
                    # A refused PUT of the same bytes: nothing landed, and no
                    # delayed attempt is in flight.
                    raise CommitNotLandedError(
                        f"the commit of version {root.version} did not land: the storage refused its root file "
                        f"({exc}); nothing of it was committed"
                    ) from exc
                ambiguous = exc
                log.warning("refused PUT of version %d after an ambiguous one: %s; reading it back", root.version, exc)
            except ObjectStoreError as exc:
                ambiguous = exc
                uncertain = True
                log.warning("ambiguous PUT of version %d: %s; reading it back", root.version, exc)
            try:
                existing = self._chain.try_read_root(root.version)
            except ObjectStoreError as exc:
                ambiguous = exc
                continue
            if existing is not None:
                self._chain.note_exists(root.version)
                return existing.commit_id == root.commit_id
            # Absent: our PUT did not land (yet). Retrying the same bytes is safe.
        raise CommitError(
            f"could not settle the commit of version {root.version} after {_AMBIGUOUS_TRIES} tries; "
            "it is visible after reopen if it landed"
        ) from ambiguous

    def _delete_orphan(self, path: str) -> None:
        try:
            self._state.store.delete(path)
        except ObjectStoreError as exc:  # GC removes unreferenced SSTs later
            log.warning("could not delete orphan delta SST %s: %s", path, exc)


def _encoding_error(pending: PendingCommit) -> Exception | None:
    """Why ``pending`` alone cannot be encoded into a root file, or None."""
    try:
        rows = [(key, 1, kind, value, expire) for key, (kind, value, expire) in pending.mutations.items()]
        rows.sort(key=_storage_order)
        encode_rows(rows, 1)
        json.dumps(pending.descriptor, allow_nan=False)
    except Exception as exc:  # anything: this is the diagnosis of a failure
        return exc
    return None


def _storage_order(row: Row) -> tuple[bytes, int]:
    return (row[0], -row[1])


__all__ = ["Committer", "PendingCommit", "TreeChange", "Validator"]
