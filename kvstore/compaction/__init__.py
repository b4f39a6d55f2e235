"""Compaction: planning (pure), execution (I/O) and installing tree edits.

* :mod:`~kvstore.compaction.planner` — tree manifest -> :class:`CompactionTask`;
* :mod:`~kvstore.compaction.runner` — merge a task's inputs into a new run;
* :mod:`~kvstore.compaction.edit` — results as re-appliable :class:`TreeEdit`\\ s;
* :mod:`~kvstore.compaction.install` — commit an edit, rebasing over rivals.
"""

from typing import TYPE_CHECKING

from kvstore.compaction.edit import TreeEdit, apply_edit
from kvstore.compaction.install import install_edit
from kvstore.compaction.planner import CompactionPolicy, CompactionTask, plan, plan_full
from kvstore.compaction.runner import CompactionOutput, run_compaction
from kvstore.errors import CompactionAbortedError, EditConflictError, deprecated_name

__all__ = [
    "CompactionAbortedError",
    "CompactionOutput",
    "CompactionPolicy",
    "CompactionTask",
    "EditConflictError",
    "TreeEdit",
    "apply_edit",
    "install_edit",
    "plan",
    "plan_full",
    "run_compaction",
]

# The old names this package exported before the renames (issue 24), kept one
# release; see kvstore.errors.deprecated_name.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[BaseException]:
        return deprecated_name(__name__, name, frozenset({"EditConflict", "CompactionAborted"}))
