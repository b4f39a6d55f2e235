"""Installing a flush or compaction: write the new tree manifest, commit it.

The commit is a tree-only :class:`~kvstore.committer.PendingCommit` carrying
a :class:`~kvstore.committer.TreeChange`: it applies only if the tree is
still the one the manifest was derived from. Data commits never change the
tree, so they never get in the way (the committer rebases over them). When
another flush or compaction changed the tree first, the committer answers
:class:`~kvstore.errors.TreeChangedError`; the edit is then re-applied to
the new tree (:func:`~kvstore.compaction.edit.apply_edit`) and committed
again, until it lands or conflicts for real. A real conflict means another
handle consumed the same inputs: the loser deletes its outputs.

Outputs are deleted only when the commit certainly did not land: after a
``TreeChangedError`` (raised before any PUT), an edit conflict, or a
``CommitNotLandedError`` (the storage refused the root file or the manifest,
e.g. a full disk: deleting the outputs frees the space at once). Any other
failure may hide a landed commit (an unsettled PUT), so the files stay and GC
removes them later if nothing references them.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from kvstore.committer import PendingCommit, TreeChange
from kvstore.compaction.edit import TreeEdit, apply_edit
from kvstore.errors import EditConflictError
from kvstore.compaction.runner import delete_quietly
from kvstore.errors import CommitNotLandedError, NotWrittenError, StaleOutputError, TreeChangedError
from kvstore.format.names import new_tree_path
from kvstore.format.tree import encode_tree
from kvstore.state import EngineState

log = logging.getLogger(__name__)

# Re-applications after TreeChangedError before giving up. Each one follows a
# tree change by someone else, so exhausting this means heavy maintenance
# contention; the outputs are then dropped and the work redone later.
MAX_REBASES: Final = 16



def install_edit(
    state: EngineState,
    committer: Any,
    edit: TreeEdit,
    *,
    descriptor: dict[str, Any],
    written_at: float,
    max_age_s: float,
) -> str:
    """Commit ``edit`` on top of the current tree; return the new manifest's path.

    Args:
        state: the engine state (its tree is the base of each attempt).
        committer: the store's :class:`~kvstore.committer.Committer`.
        edit: the flush or compaction result.
        descriptor: commit descriptor recorded in the root (``op`` etc.).
        written_at: ``time.monotonic()`` when the first output was written.
        max_age_s: refuse to commit outputs older than this: GC in any
            process deletes unreferenced files older than its grace period,
            and these are unreferenced until the commit lands. 0 disables
            the check (a zero grace period protects nothing anyway).

    Raises:
        EditConflictError: the inputs are gone (outputs deleted).
        StaleOutputError: the outputs got too old (outputs deleted).
        StoreError: the commit failed otherwise (outputs left to GC).
    """
    outputs = edit.output_paths()
    for _attempt in range(MAX_REBASES):
        view = state.view()
        try:
            tree = apply_edit(view.tree, edit)
            if 0 < max_age_s < time.monotonic() - written_at:
                raise StaleOutputError(f"outputs are older than {max_age_s:.1f} s; GC may have removed them")
        except StaleOutputError:
            log.warning(
                "%s took longer than half the GC grace period (%.1f s): dropping its outputs; "
                "raise gc_grace_s above the longest flush or compaction",
                descriptor.get("op"),
                max_age_s * 2,
            )
            delete_quietly(state.store, outputs)
            raise
        except EditConflictError:
            delete_quietly(state.store, outputs)
            raise
        path = new_tree_path()
        try:
            state.store.put(path, encode_tree(tree))
        except NotWrittenError:
            delete_quietly(state.store, outputs)  # the manifest does not exist: nothing can reference them
            raise
        deadline = written_at + max_age_s if max_age_s > 0 else None
        change = TreeChange(view.tree_path, path, tree.flushed_upto, deadline)
        try:
            committer.submit(PendingCommit({}, dict(descriptor), tree_change=change))
        except StaleOutputError:
            log.warning("%s missed its commit deadline (half the GC grace period): dropping its outputs",
                        descriptor.get("op"))
            delete_quietly(state.store, [*outputs, path])
            raise
        except CommitNotLandedError:
            delete_quietly(state.store, [*outputs, path])  # certainly not committed
            raise
        except TreeChangedError as exc:
            # Certainly not committed (refused before any PUT): rebase.
            log.debug("tree changed under %s (%s); rebasing", descriptor.get("op"), exc)
            delete_quietly(state.store, [path])
            continue
        return path
    delete_quietly(state.store, outputs)
    raise EditConflictError(f"gave up after {MAX_REBASES} rebases over concurrent tree changes")
