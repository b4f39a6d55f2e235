"""What the parts of one lakehouse share: its store, its data files' store, and the hooks between them.

A :class:`~catalog.lakehouse.Lakehouse` builds one :class:`LakeContext` and
hands it to its parts (commits, maintenance, verification, durable
transactions), so no part needs the facade or reaches into its private
state. The hooks are how a higher layer (the durable transactions of
:mod:`catalog.durable`) takes part in commits and GC without the lower
modules importing it: the lakehouse registers them when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from catalog.access import CatalogWriter
from catalog.ops import Context, Op
from kvstore.store import Store

# Called inside every plain commit's lakekv transaction, before it is sent:
# raises to refuse the commit (e.g. a durable lock forbids one of the ops).
CommitCheck = Callable[[CatalogWriter, Sequence[Op]], None]

# Returns object paths GC must keep although no catalog key names them
# (e.g. the files staged by durable transactions not yet committed).
GCReferences = Callable[[], set[str]]


@dataclass
class LakeContext(Context):
    """One lakehouse's store and hooks; being a :class:`~catalog.ops.Context`, operations apply with it too."""

    store: Store
    commit_checks: list[CommitCheck] = field(default_factory=list)
    gc_references: list[GCReferences] = field(default_factory=list)

    @classmethod
    def of(cls, store: Store, target_file_bytes: int) -> LakeContext:
        """The context of the lakehouse kept in ``store``; its data files live in the store's object store."""
        return cls(objects=store.objects, target_file_bytes=target_file_bytes, store=store)

    def check_commit(self, writer: CatalogWriter, ops: Sequence[Op]) -> None:
        """Run every commit check on a commit of ``ops`` about to be sent through ``writer``.

        Raises what a check raises (``LockConflictError`` for a durable lock).
        """
        for check in self.commit_checks:
            check(writer, ops)

    def gc_referenced(self) -> set[str]:
        """The object paths the registered GC references keep."""
        paths: set[str] = set()
        for references in self.gc_references:
            paths |= references()
        return paths
