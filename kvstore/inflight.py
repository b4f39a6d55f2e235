"""Early lock release: a key lock handed over while its holder's commit is in flight.

A transaction holding key locks (``get_for_update``) releases them as soon
as its commit has its place in the committer's order, not when the commit
is durable. With the lock it hands over an :class:`InFlight`: its own
pending commit and the in-flight commits it read itself. The next holder,
if it has read and written nothing yet, reads the head overlaid with the
writes of those commits that the head does not include yet (its
*ancestors*), as if they had already committed.

That is what lets transactions queued on a hot key share a root file: the
second one reads, writes and queues its commit while the first one's root
file is being made durable, the third one while the second waits in the
queue, and so on; the committer then publishes all of the queued ones as
one group. Without it each transaction waits for the previous one's fsync.

Nothing is weakened by reading uncommitted writes, because the reader
cannot commit before them and does not commit without them:

* its commit is submitted after the ancestors' (the hand-over happens once
  they are queued), so the committer validates it after them;
* the oracle rejects it (retryable ``ConflictError``) if any ancestor did
  not commit, and does not count the ancestors' writes as conflicts, while
  every other commit after its snapshot still is one; reads are validated
  as under SERIALIZABLE even in a SNAPSHOT transaction, because the view
  it read is only a snapshot if nothing else changed what it read;
* a transaction without writes that read in-flight commits waits for them
  to settle and is validated the same way before ``commit`` returns.

Thread-safety: an InFlight is immutable; the commits in it change state
under the committer, in the order ``PendingCommit.committed`` documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class InFlight:
    """What a committing lock holder hands to the next holder of its keys.

    ``chain``: the pending commits (``kvstore.committer.PendingCommit``)
    whose writes the next holder must see, oldest first; the last one is the
    releasing transaction's own.
    """

    chain: tuple[Any, ...]

    def ancestors_after(self, head_seq: int) -> tuple[Any, ...]:
        """The commits of the chain whose writes a snapshot at ``head_seq`` lacks.

        Requires: ``head_seq`` was read from the store's head *before* this
        call. A commit that is published (``committed``) with a seq at or
        below the head is in the snapshot already; one that failed ends the
        useful part of the chain, because every later member read its writes
        and will be rejected too.
        """
        live = []
        for pending in self.chain:
            if pending.error is not None:
                break
            if pending.committed and pending.seq <= head_seq:
                continue
            live.append(pending)
        return tuple(live)


def overlay_of(ancestors: tuple[Any, ...]) -> dict[bytes, Any]:
    """key -> mutation after applying the ancestors' writes in commit order."""
    overlay: dict[bytes, Any] = {}
    for pending in ancestors:
        overlay.update(pending.mutations)
    return overlay


__all__ = ["InFlight", "overlay_of"]
