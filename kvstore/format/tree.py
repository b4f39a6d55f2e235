"""Tree manifests: which SSTs make up the LSM tree at some version.

``tree/<uuid>.ipc`` is an immutable Arrow IPC file with one empty record batch
(:data:`~kvstore.format.rows.ROW_SCHEMA`) whose schema metadata key
``lakekv.tree`` holds UTF-8 JSON:

================  ==========================================================
``format``        :data:`TREE_FORMAT`
``flushed_upto``  every version <= this has its delta in the tree's SSTs
``flushed_seq``   last seq of version ``flushed_upto``: the memtable keeps only
                  rows above it (absent in old files: 0)
``floor_seq``     highest retention floor any flush or compaction that built
                  this tree used: reads at a seq below it may miss versions
                  retention dropped, so they are refused (absent: 0)
``l0``            list of SST infos (``SSTInfo.to_dict()``), newest first;
                  their key ranges may overlap
``runs``          list of sorted runs, newest first; each run is a list of
                  SST infos with disjoint key ranges in key order
``crc``           whole-file seal token (:mod:`kvstore.format.sealed`)
================  ==========================================================

Root files point at a tree manifest; a flush or compaction writes a new one
and commits a root that points at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa

from kvstore.errors import CorruptionError
from kvstore.format import sealed
from kvstore.format.rows import ROW_SCHEMA

TREE_FORMAT: Final = 1
_META_KEY: Final = b"lakekv.tree"

SSTDict = dict[str, Any]


@dataclass(frozen=True)
class TreeManifest:
    """The SSTs of the tree; immutable (a change makes a new manifest)."""

    flushed_upto: int = 0
    l0: tuple[SSTDict, ...] = ()
    runs: tuple[tuple[SSTDict, ...], ...] = field(default=())
    flushed_seq: int = 0
    floor_seq: int = 0

    def sst_paths(self) -> list[str]:
        """Every SST path the manifest references, newest first."""
        paths = [info["path"] for info in self.l0]
        for run in self.runs:
            paths.extend(info["path"] for info in run)
        return paths


def encode_tree(tree: TreeManifest) -> bytes:
    """Serialize to sealed Arrow IPC bytes."""
    meta = {
        "format": TREE_FORMAT,
        "flushed_upto": tree.flushed_upto,
        "flushed_seq": tree.flushed_seq,
        "floor_seq": tree.floor_seq,
        "l0": list(tree.l0),
        "runs": [list(run) for run in tree.runs],
    }
    empty = pa.RecordBatch.from_pylist([], schema=ROW_SCHEMA)
    return sealed.write_sealed_ipc(_META_KEY, meta, empty)


def decode_tree(data: bytes, path: str) -> TreeManifest:
    """Parse and verify a tree manifest read from ``path``.

    Raises:
        CorruptionError: checksum mismatch or malformed contents.
    """
    what = f"tree manifest {path}"
    meta, _ = sealed.read_sealed_ipc(data, _META_KEY, what)
    if meta.get("format") != TREE_FORMAT:
        raise CorruptionError(f"{what}: unsupported format {meta.get('format')!r}")
    try:
        return TreeManifest(
            flushed_upto=int(meta["flushed_upto"]),
            l0=tuple(meta["l0"]),
            runs=tuple(tuple(run) for run in meta["runs"]),
            # Absent in manifests written before flushes existed: nothing was
            # flushed or dropped then.
            flushed_seq=int(meta.get("flushed_seq", 0)),
            floor_seq=int(meta.get("floor_seq", 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptionError(f"{what}: malformed metadata ({exc})") from exc
