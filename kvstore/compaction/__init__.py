"""Compaction: planning (pure), execution (I/O) and installing tree edits.

* :mod:`~kvstore.compaction.planner` — tree manifest -> :class:`CompactionTask`;
* :mod:`~kvstore.compaction.runner` — merge a task's inputs into a new run;
* :mod:`~kvstore.compaction.edit` — results as re-appliable :class:`TreeEdit`\\ s;
* :mod:`~kvstore.compaction.install` — commit an edit, rebasing over rivals.
"""

from kvstore.compaction.edit import EditConflict, TreeEdit, apply_edit
from kvstore.compaction.install import install_edit
from kvstore.compaction.planner import CompactionPolicy, CompactionTask, plan, plan_full
from kvstore.compaction.runner import CompactionAborted, CompactionOutput, run_compaction

__all__ = [
    "CompactionAborted",
    "CompactionOutput",
    "CompactionPolicy",
    "CompactionTask",
    "EditConflict",
    "TreeEdit",
    "apply_edit",
    "install_edit",
    "plan",
    "plan_full",
    "run_compaction",
]
