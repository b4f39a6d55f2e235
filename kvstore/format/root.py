"""Root files: one immutable file per version of the store — the version chain.

Layout: ``<root>/_<32-bit version, binary, bit-reversed>.ipc`` (TrinityLake's
naming: version 100 -> ``_00100110000000000000000000000000.ipc``), created with
put-if-absent. The chain of root files *is* the write-ahead log.

A root file is an Arrow IPC file holding one record batch of
:data:`~kvstore.format.rows.ROW_SCHEMA` (the commit's inline delta rows, key
ascending then seq descending; empty when the delta lives in an SST or the
commit changed only the tree). The schema metadata key ``lakekv.root`` holds
UTF-8 JSON with these fields:

=================  =========================================================
``format``         file format version (:data:`ROOT_FORMAT`)
``version``        this version N; ``parent`` is N-1 (null for version 0)
``first_seq``      first seq of this commit; ``last_seq`` its last. A commit
                   that only changes the tree has ``first_seq = last_seq + 1``
``writer_id``      id of the writing store handle; ``writer_clock_ms`` its clock
``commit_id``      unique id of this attempt: resolves an ambiguous PUT
``tree``           path of the tree manifest (``tree/<uuid>.ipc``) or null
``flushed_upto``   versions <= this are in the tree; later ones are *unflushed*
                   and their deltas are read from their root files
``delta_sst``      SST info (dict) when the delta was too large to inline
``commits``        one descriptor per transaction: txn id, seq, isolation, ...
``checkpoints``    name -> pinned version (maintained by later commits)
``crc``            whole-file seal token (:mod:`kvstore.format.sealed`)
=================  =========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa

from kvstore.errors import CorruptionError
from kvstore.format import sealed
from kvstore.format.rows import ROW_SCHEMA

ROOT_FORMAT: Final = 1
MAX_VERSION: Final = 2**32 - 1  # the file name has 32 bits
_META_KEY: Final = b"lakekv.root"


def root_path(version: int) -> str:
    """Object path of the root file of ``version``.

    >>> root_path(100)
    '_00100110000000000000000000000000.ipc'
    """
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"version {version} is outside 0..{MAX_VERSION}")
    return "_" + format(version, "032b")[::-1] + ".ipc"


def parse_root_path(path: str) -> int | None:
    """Inverse of :func:`root_path`; None if ``path`` is not a root file name.

    >>> parse_root_path('_00100110000000000000000000000000.ipc')
    100
    """
    if len(path) != 37 or not path.startswith("_") or not path.endswith(".ipc"):
        return None
    bits = path[1:33]
    if set(bits) - {"0", "1"}:
        return None
    return int(bits[::-1], 2)


@dataclass(frozen=True)
class RootFile:
    """The decoded contents of one root file (see module docstring)."""

    version: int
    parent: int | None
    first_seq: int
    last_seq: int
    writer_id: str
    writer_clock_ms: int
    commit_id: str
    tree: str | None
    flushed_upto: int
    delta: pa.RecordBatch
    delta_sst: dict[str, Any] | None = None
    commits: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return root_path(self.version)

    def metadata(self) -> dict[str, Any]:
        """The JSON metadata without the seal token."""
        return {
            "format": ROOT_FORMAT,
            "version": self.version,
            "parent": self.parent,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "writer_id": self.writer_id,
            "writer_clock_ms": self.writer_clock_ms,
            "commit_id": self.commit_id,
            "tree": self.tree,
            "flushed_upto": self.flushed_upto,
            "delta_sst": self.delta_sst,
            "commits": self.commits,
            "checkpoints": self.checkpoints,
        }


def encode_root(root: RootFile) -> bytes:
    """Serialize ``root`` to sealed Arrow IPC bytes."""
    if not root.delta.schema.equals(ROW_SCHEMA, check_metadata=False):
        raise ValueError("root delta must have ROW_SCHEMA")
    return sealed.write_sealed_ipc(_META_KEY, root.metadata(), root.delta)


def decode_root(data: bytes, expected_version: int | None = None) -> RootFile:
    """Parse and verify a root file.

    Raises:
        CorruptionError: checksum mismatch, unparseable bytes, or a version
            that differs from the one its name promises.
    """
    what = f"root file {root_path(expected_version)}" if expected_version is not None else "root file"
    meta, batch = sealed.read_sealed_ipc(data, _META_KEY, what)
    if meta.get("format") != ROOT_FORMAT:
        raise CorruptionError(f"{what}: unsupported format {meta.get('format')!r}")
    if expected_version is not None and meta.get("version") != expected_version:
        raise CorruptionError(f"{what}: claims version {meta.get('version')!r}")
    if not batch.schema.equals(ROW_SCHEMA, check_metadata=False):
        raise CorruptionError(f"{what}: delta has schema {batch.schema}")
    try:
        return RootFile(
            version=meta["version"],
            parent=meta["parent"],
            first_seq=meta["first_seq"],
            last_seq=meta["last_seq"],
            writer_id=meta["writer_id"],
            writer_clock_ms=meta["writer_clock_ms"],
            commit_id=meta["commit_id"],
            tree=meta["tree"],
            flushed_upto=meta["flushed_upto"],
            delta=batch,
            delta_sst=meta.get("delta_sst"),
            commits=meta.get("commits", []),
            checkpoints=meta.get("checkpoints", {}),
        )
    except KeyError as exc:
        raise CorruptionError(f"{what}: metadata lacks {exc}") from exc
