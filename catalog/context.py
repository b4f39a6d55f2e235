"""What the parts of one lakehouse share: its store and its data files' store.

A :class:`~catalog.lakehouse.Lakehouse` builds one :class:`LakeContext` and
hands it to its parts (commits, maintenance, time travel, verification,
durable transactions), so no part needs the facade or reaches into its
private state. It holds no hooks: a part that needs another calls it
(a plain commit checks durable locks through :mod:`catalog.durable.guard`,
GC asks :mod:`catalog.durable.lake` which files are staged).
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.ops import Context
from kvstore.store import Store


@dataclass
class LakeContext(Context):
    """One lakehouse's store; being a :class:`~catalog.ops.Context`, operations apply with it too."""

    store: Store

    @classmethod
    def of(cls, store: Store, target_file_bytes: int) -> LakeContext:
        """The context of the lakehouse kept in ``store``; its data files live in the store's object store."""
        return cls(objects=store.objects, target_file_bytes=target_file_bytes, store=store)
