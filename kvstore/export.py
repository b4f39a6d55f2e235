"""Snapshot export: copy version N and everything it needs to another store.

What version N needs is what opening a store at N reads: root N, its tree
manifest and that tree's SSTs, and the unflushed versions
``flushed_upto + 1 .. N`` (their root files and delta SSTs). Those root
files are copied verbatim, which keeps the numbering dense from the oldest
copied root, together with every tree (and its SSTs) any of them points at,
so every copied version is complete. The destination opens at version N on
its own: it never refers back to the source.

Order, so that an interrupted export is never mistaken for a store: SSTs,
then the trees, then the roots (oldest first), then ``_latest_hint``, and the
identity file ``_lakekv_store`` last — a destination without it is refused
by ``kvstore.open``. Root files and the identity are created with
put-if-absent, so an export never overwrites another store.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

from kvstore.errors import SnapshotTooOldError, StoreError
from kvstore.format.names import HINT_PATH, IDENTITY_PATH
from kvstore.format.root import decode_root, root_path
from kvstore.format.tree import TreeManifest, decode_tree
from kvstore.objstore.base import ObjectStore
from kvstore.state import EngineState
from kvstore.verify import check_sst_bytes


# progress(files_done, files_total, bytes_done, bytes_total)
Progress = Callable[[int, int, int, int], None]


@dataclass(frozen=True)
class ExportReport:
    """What an export copied.

    Attributes:
        version: the exported version (the destination's latest).
        oldest_version: the oldest root copied (the destination's first).
        files: objects copied, identity and hint included.
        bytes: bytes copied.
    """

    version: int
    oldest_version: int
    files: int
    bytes: int


class TextProgress:
    """A one-line progress display on a text stream (stderr by default).

    Redraws at most every ``interval_s`` seconds and once at the end.
    """

    def __init__(self, label: str = "export", stream: TextIO | None = None, interval_s: float = 0.2) -> None:
        self._label = label
        self._stream = stream if stream is not None else sys.stderr
        self._interval_s = interval_s
        self._last = 0.0

    def __call__(self, files_done: int, files_total: int, bytes_done: int, bytes_total: int) -> None:
        now = time.monotonic()
        finished = files_done == files_total
        if not finished and now - self._last < self._interval_s:
            return
        self._last = now
        mib = 1024 * 1024
        self._stream.write(
            f"\r{self._label}: {files_done}/{files_total} files, "
            f"{bytes_done / mib:.1f}/{bytes_total / mib:.1f} MiB" + ("\n" if finished else "")
        )
        self._stream.flush()


def export_version(
    state: EngineState,
    dest: ObjectStore,
    version: int,
    *,
    source_identity: dict[str, object],
    parallelism: int = 16,
    progress: Progress | None = None,
) -> ExportReport:
    """Copy ``version`` of the store behind ``state`` into the empty store ``dest``.

    Raises:
        ValueError: ``dest`` already holds a store (or root files).
        SnapshotTooOldError: a file ``version`` needs was removed by retention.
        CorruptionError: a file failed its checksums or structural checks
            (every byte copied is verified first; no identity is written).
        StoreError: a copy failed; the destination is left without identity.
    """
    source = state.store
    if any(True for _ in dest.list("_")):
        raise ValueError(f"dest_url {dest.url} is not empty: it already has root files or a store identity")
    try:
        head_bytes = source.get(root_path(version))
        head = decode_root(head_bytes, version)
        first = head.oldest_needed
        roots = {v: source.get(root_path(v)) for v in range(first, version)}
        roots[version] = head_bytes
        unflushed = [decode_root(data, v) for v, data in roots.items()]
        # Every tree a copied root points at (a compaction after the last
        # flush leaves older roots on an older tree), so each copied version
        # is complete and readable with at(version=...).
        trees = {root.tree: source.get(root.tree) for root in unflushed if root.tree is not None}
    except FileNotFoundError as exc:
        raise SnapshotTooOldError(f"version {version} can no longer be exported: {exc} was removed") from exc

    # SST path -> its info as recorded by the tree or root referencing it.
    recorded: dict[str, dict[str, Any]] = {}
    for path, data in trees.items():
        recorded.update(_ssts_of(decode_tree(data, path)))
    for root in unflushed:
        if root.delta_sst is not None:
            recorded[root.delta_sst["path"]] = root.delta_sst
    sizes = {path: int(info["size"]) for path, info in recorded.items()}
    identity = dict(source_identity, store_id=uuid.uuid4().hex, created_ms=int(time.time() * 1000))
    identity["exported_from"] = {"url": source.url, "store_id": source_identity.get("store_id"), "version": version}
    hint = str(version).encode("ascii")

    total_files = len(sizes) + len(trees) + len(roots) + 2
    total_bytes = sum(sizes.values()) + sum(map(len, trees.values())) + sum(map(len, roots.values())) + len(hint)
    done = {"files": 0, "bytes": 0}

    def advance(nbytes: int) -> None:
        done["files"] += 1
        done["bytes"] += nbytes
        if progress is not None:
            progress(done["files"], total_files, done["bytes"], total_bytes)

    def copy_sst(path: str) -> int:
        data = source.get(path)
        # Never spread a corrupt file: an export is often the backup.
        check_sst_bytes(data, path, recorded[path])
        dest.put(path, data)
        return len(data)

    try:
        with ThreadPoolExecutor(max(1, parallelism)) as pool:
            for nbytes in pool.map(copy_sst, sorted(sizes)):
                advance(nbytes)
    except FileNotFoundError as exc:
        raise SnapshotTooOldError(f"version {version} can no longer be exported: {exc} was removed") from exc
    for path, data in sorted(trees.items()):
        dest.put(path, data)
        advance(len(data))
    for v in sorted(roots):
        if not dest.put_if_absent(root_path(v), roots[v]):
            raise StoreError(f"{dest.url}: root {v} appeared during the export; another writer is using it")
        advance(len(roots[v]))
    dest.put(HINT_PATH, hint)
    advance(len(hint))
    identity_bytes = json.dumps(identity).encode()
    if not dest.put_if_absent(IDENTITY_PATH, identity_bytes):
        raise StoreError(f"{dest.url}: a store identity appeared during the export")
    advance(len(identity_bytes))
    return ExportReport(version, first, done["files"], done["bytes"])


def _ssts_of(tree: TreeManifest) -> dict[str, dict[str, Any]]:
    infos = [*tree.l0, *(info for run in tree.runs for info in run)]
    return {info["path"]: info for info in infos}
