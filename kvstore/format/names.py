"""Every object name the engine writes, in one place.

A store's objects (paths relative to the store root):

=========================  ==============================================
``_lakekv_store``          identity (JSON: format, store id, created)
``_latest_hint``           best-effort latest version (decimal text)
``_clock_probe``           the storage-clock probe (:mod:`kvstore.clock`)
``_head_beacon``           local directories: newest published version (:mod:`kvstore.freshness`)
``_<32 bits>.ipc``         root file of one version (:mod:`~kvstore.format.root`)
``tree/<32 hex>.ipc``      tree manifest (:mod:`~kvstore.format.tree`)
``sst/<32 hex>.sst``       SST: flush, compaction or large-delta output
``compacted/<20 digits>``  a revision compacted away by ``Store.compact_revisions`` (:mod:`kvstore.revisions`)
=========================  ==============================================

GC deletes only names that :func:`is_collectable` accepts, so a file someone
else put under ``sst/`` or ``tree/`` is never touched, and creating a store
is refused where :func:`is_engine_name` rejects an existing object.

>>> is_collectable(new_sst_path()), is_collectable("sst/thesis-draft.txt")
(True, False)
>>> is_engine_name("_latest_hint"), is_engine_name("passwd")
(True, False)
"""

from __future__ import annotations

import re
import uuid
from typing import Final

IDENTITY_PATH: Final = "_lakekv_store"
HINT_PATH: Final = "_latest_hint"
CLOCK_PROBE_PATH: Final = "_clock_probe"
BEACON_PATH: Final = "_head_beacon"

# The store format in the identity file: the newest root format the store's
# root files may use (kvstore.format.root); 3 since issue 38. Format 1 and 2
# stores are read and upgraded to 3 when a handle opens them, so that older
# lakekv versions refuse them with a clear "unsupported store format" instead
# of failing on the new root files.
STORE_FORMAT: Final = 3
SUPPORTED_STORE_FORMATS: Final = (1, 2, 3)

_SST_RE: Final = re.compile(r"^sst/[0-9a-f]{32}\.sst$")
_TREE_RE: Final = re.compile(r"^tree/[0-9a-f]{32}\.ipc$")
_ROOT_RE: Final = re.compile(r"^_[01]{32}\.ipc$")
_COMPACTED_RE: Final = re.compile(r"^compacted/[0-9]{20}$")
COMPACTED_PREFIX: Final = "compacted/"
_SINGLETONS: Final = frozenset({IDENTITY_PATH, HINT_PATH, CLOCK_PROBE_PATH, BEACON_PATH})


def new_sst_path() -> str:
    """A fresh, unique object path for an SST."""
    return f"sst/{uuid.uuid4().hex}.sst"


def new_tree_path() -> str:
    """A fresh, unique object path for a tree manifest."""
    return f"tree/{uuid.uuid4().hex}.ipc"


def compacted_path(revision: int) -> str:
    """The object recording that history below ``revision`` was compacted (sorts by revision)."""
    return f"{COMPACTED_PREFIX}{revision:020d}"


def is_collectable(path: str) -> bool:
    """True for SST and tree-manifest names the engine generates (GC's only targets besides roots)."""
    return bool(_SST_RE.match(path) or _TREE_RE.match(path))


def is_engine_name(path: str) -> bool:
    """True for any name a lakekv store may hold (see the module docstring)."""
    return (
        path in _SINGLETONS or bool(_ROOT_RE.match(path)) or is_collectable(path) or bool(_COMPACTED_RE.match(path))
    )
