"""What the parts of one lakehouse share: its store and its data files' store.

A :class:`~catalog.lakehouse.Lakehouse` builds one :class:`LakeContext` and
hands it to its parts (commits, maintenance, time travel, verification,
durable transactions), so no part needs the facade or reaches into its
private state. It imports no other catalog module and holds no hooks: a part
that needs another calls it (a plain commit checks durable locks through
:mod:`catalog.durable.guard`, GC asks :mod:`catalog.durable.lake` which
files are staged).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvstore.objstore.base import ObjectStore
from kvstore.store import Store


@dataclass
class Context:
    """What a catalog operation (:meth:`catalog.ops.Op.apply`) needs besides its transaction:
    where data files live and the size they are cut to."""

    objects: ObjectStore
    target_file_bytes: int


@dataclass
class LakeContext(Context):
    """One lakehouse: its store (with its options), and, as a :class:`Context`, its data files."""

    store: Store

    @classmethod
    def of(cls, store: Store, target_file_bytes: int) -> LakeContext:
        """The context of the lakehouse kept in ``store``; its data files live in the store's object store."""
        return cls(objects=store.objects, target_file_bytes=target_file_bytes, store=store)
