"""Object-store backends behind one small protocol (see ``base.py``).

>>> from kvstore.objstore import open_store
>>> store = open_store("memory://objstore-doctest")
>>> store.put_if_absent("_lakekv_store", b"v1"), store.put_if_absent("_lakekv_store", b"v2")
(True, False)
>>> store.get("_lakekv_store")
b'v1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvstore.errors import CrashedError, InjectedFaultError, deprecated_name
from kvstore.objstore.base import ObjectMeta, ObjectStore, TempFileStore
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.factory import open_store
from kvstore.objstore.faulty import FaultRecord, FaultyStore
from kvstore.objstore.forwarding import ForwardingStore
from kvstore.objstore.fsspec_store import FsspecStore
from kvstore.objstore.lmdb_commit import LmdbCommitStore
from kvstore.objstore.local import LocalStore
from kvstore.objstore.memory import MemoryStore

__all__ = [
    "CountingStore",
    "CrashedError",
    "FaultRecord",
    "FaultyStore",
    "ForwardingStore",
    "FsspecStore",
    "InjectedFaultError",
    "LmdbCommitStore",
    "LocalStore",
    "MemoryStore",
    "ObjectMeta",
    "ObjectStore",
    "TempFileStore",
    "open_store",
]

# The old names this package exported before the renames (issue 24), kept one
# release; see kvstore.errors.deprecated_name.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[BaseException]:
        return deprecated_name(__name__, name, frozenset({"InjectedFault"}))
