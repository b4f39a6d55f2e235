"""Integrity check of a whole store: every live file read, every checksum and
reference checked.

Live files are the surviving root files and everything they reference: tree
manifests, the SSTs of those trees and delta SSTs. Checks:

* identity: ``_lakekv_store`` exists and has a supported format;
* the chain: root files decode (checksums), versions are dense from the
  oldest survivor to the latest, each root's ``parent`` and ``first_seq``
  continue its predecessor, ``flushed_upto`` never goes back, and the latest
  version's unflushed roots (what opening the store reads) all exist;
* trees: decode, agree with the roots pointing at them on ``flushed_upto``
  and ``flushed_seq``, and each run's SSTs are in key order without overlap;
* SSTs: exist, pass :meth:`~kvstore.format.sst.SSTReader.check_invariants`
  (every block CRC, index, order, bloom) and match the statistics recorded
  where they are referenced.

Files nothing references are listed as ``unreferenced`` (GC removes them once
they are older than its grace period); they are not problems. Verify only
reads, and needs no open store handle.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from kvstore.chain import VersionChain
from kvstore.errors import CorruptionError, StoreError
from kvstore.format.names import IDENTITY_PATH, SUPPORTED_STORE_FORMATS
from kvstore.format.root import RootFile
from kvstore.format.sst import SSTInfo, SSTReader
from kvstore.format.tree import TreeManifest, decode_tree
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.memory import MemoryStore

# Errors that mean "this file is bad or gone", recorded as problems; anything
# else (a bug) propagates.
_ROOTS_PER_TASK: Final = 64
_FILE_ERRORS: Final = (FileNotFoundError, StoreError, ValueError, KeyError, TypeError)


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`verify_store`.

    Attributes:
        problems: one human-readable line per problem; empty when healthy.
        oldest_version, latest_version: the surviving chain (-1 if none).
        roots_checked, trees_checked, ssts_checked: files read and checked.
        bytes_checked: bytes of SSTs read.
        unreferenced: tree/SST objects no surviving root references.
    """

    problems: tuple[str, ...]
    oldest_version: int
    latest_version: int
    roots_checked: int
    trees_checked: int
    ssts_checked: int
    bytes_checked: int
    unreferenced: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_store(store: ObjectStore, *, parallelism: int = 16) -> VerifyReport:
    """Check every live file of the store in ``store`` (see the module docstring).

    Raises:
        StoreError: listing the store failed (a file that cannot be read is a
            problem in the report, not an exception).
    """
    problems: list[str] = []
    _check_identity(store, problems)
    chain = VersionChain(store)
    versions = chain.list_versions()
    if not versions:
        problems.append("no root files: not a lakekv store, or every version was deleted")
        return VerifyReport(tuple(problems), -1, -1, 0, 0, 0, 0, ())
    # Roots are small: read them in chunks, so a task is worth a thread hand-off.
    chunks = [versions[i : i + _ROOTS_PER_TASK] for i in range(0, len(versions), _ROOTS_PER_TASK)]
    with ThreadPoolExecutor(max(1, parallelism)) as pool:
        read = pool.map(lambda chunk: [_read_root(chain, v, problems) for v in chunk], chunks)
        roots = dict(zip(versions, (root for chunk in read for root in chunk)))
        good = [root for root in roots.values() if root is not None]
        _check_chain(versions, roots, problems)
        tree_paths = sorted({root.tree for root in good if root.tree is not None})
        trees = dict(zip(tree_paths, pool.map(lambda p: _read_tree(store, p, problems), tree_paths)))
        _check_trees(good, trees, problems)
        ssts: dict[str, dict[str, Any]] = {}
        for root in good:
            if root.delta_sst is not None:
                ssts[root.delta_sst["path"]] = root.delta_sst
        for tree in trees.values():
            if tree is not None:
                for info in (*tree.l0, *(i for run in tree.runs for i in run)):
                    ssts[info["path"]] = info
        sizes = list(pool.map(lambda item: _check_sst(store, item[0], item[1], problems), sorted(ssts.items())))
    referenced = set(ssts) | set(tree_paths)
    unreferenced = tuple(
        meta.path for prefix in ("tree/", "sst/") for meta in store.list(prefix) if meta.path not in referenced
    )
    return VerifyReport(
        problems=tuple(sorted(problems)),  # threads append in any order
        oldest_version=versions[0],
        latest_version=versions[-1],
        roots_checked=len(versions),
        trees_checked=len(tree_paths),
        ssts_checked=len(ssts),
        bytes_checked=sum(sizes),
        unreferenced=unreferenced,
    )


def _check_identity(store: ObjectStore, problems: list[str]) -> None:
    try:
        identity = json.loads(store.get(IDENTITY_PATH))
    except FileNotFoundError:
        problems.append(f"{IDENTITY_PATH} is missing")
        return
    except (ValueError, StoreError) as exc:
        problems.append(f"{IDENTITY_PATH} is unreadable: {exc}")
        return
    if not isinstance(identity, dict) or identity.get("format") not in SUPPORTED_STORE_FORMATS:
        problems.append(f"{IDENTITY_PATH}: unsupported store format {identity!r}")


def _read_root(chain: VersionChain, version: int, problems: list[str]) -> RootFile | None:
    try:
        return chain.read_root(version)
    except _FILE_ERRORS as exc:
        problems.append(_problem(f"root {version}", exc))
        return None


def _read_tree(store: ObjectStore, path: str, problems: list[str]) -> TreeManifest | None:
    try:
        return decode_tree(store.get(path), path)
    except _FILE_ERRORS as exc:
        problems.append(_problem(path, exc))
        return None


def _problem(what: str, exc: BaseException) -> str:
    """``what: error``, without repeating ``what`` when the error already names it."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return f"{what}: missing"
    return message if message.startswith(what) else f"{what}: {message}"


def _check_chain(versions: list[int], roots: dict[int, RootFile | None], problems: list[str]) -> None:
    missing = sorted(set(range(versions[0], versions[-1] + 1)) - set(versions))
    if missing:
        problems.append(f"version chain has {len(missing)} gap(s), first missing version {missing[0]}")
    previous: RootFile | None = None
    for version in versions:
        root = roots[version]
        if root is None:
            previous = None
            continue
        if previous is not None and previous.version == version - 1:
            if root.parent != previous.version:
                problems.append(f"root {version}: parent is {root.parent}, expected {previous.version}")
            if root.first_seq != previous.last_seq + 1:
                problems.append(f"root {version}: first seq {root.first_seq}, expected {previous.last_seq + 1}")
            if root.flushed_upto < previous.flushed_upto:
                problems.append(f"root {version}: flushed_upto went back to {root.flushed_upto}")
        if root.tree is not None and root.flushed_upto >= version:
            problems.append(f"root {version}: flushed_upto {root.flushed_upto} is not below its own version")
        previous = root
    latest = roots[versions[-1]]
    if latest is not None:
        needed = latest.oldest_needed
        if needed < versions[0]:
            problems.append(
                f"latest version {latest.version} needs roots from {needed}, but the oldest is {versions[0]}"
            )


def _check_trees(roots: list[RootFile], trees: dict[str, TreeManifest | None], problems: list[str]) -> None:
    last_seqs = {root.version: root.last_seq for root in roots}
    checked: set[str] = set()
    for root in roots:
        tree = trees.get(root.tree) if root.tree is not None else None
        if tree is None or root.tree is None:
            continue
        if tree.flushed_upto != root.flushed_upto:
            problems.append(f"root {root.version}: flushed_upto {root.flushed_upto} but its tree says {tree.flushed_upto}")
        if root.tree in checked:
            continue
        checked.add(root.tree)
        flushed_last = last_seqs.get(tree.flushed_upto)
        if flushed_last is not None and tree.flushed_seq != flushed_last:
            problems.append(f"tree {root.tree}: flushed_seq {tree.flushed_seq}, but version {tree.flushed_upto} ends at seq {flushed_last}")
        for number, run in enumerate(tree.runs):
            infos = [SSTInfo.from_dict(info) for info in run]
            for left, right in zip(infos, infos[1:]):
                if not left.max_key < right.min_key:
                    problems.append(f"tree {root.tree}: run {number}: {left.path} and {right.path} overlap or are out of order")


def check_sst_bytes(data: bytes, path: str, recorded: dict[str, Any]) -> None:
    """Verify a whole SST held in memory against the info recorded where it is referenced.

    Every block CRC, the index, order and bloom filter
    (:meth:`~kvstore.format.sst.SSTReader.check_invariants`), plus size and
    statistics equal to ``recorded``.

    Raises:
        CorruptionError: any check fails (the message names the file).
    """
    try:
        expected = SSTInfo.from_dict(recorded)
        if len(data) != expected.size:
            raise CorruptionError(f"sst {path}: {len(data)} bytes, expected {expected.size}")
        holder = MemoryStore()  # serves the bytes to the reader: no backend I/O
        holder.put(path, data)
        reader = SSTReader.open(holder, path, size=expected.size, tail_size=expected.tail_size)
        reader.check_invariants()
    except CorruptionError:
        raise
    except (StoreError, ValueError, KeyError, TypeError) as exc:
        raise CorruptionError(f"sst {path}: {exc}") from exc
    if reader.info != expected:
        raise CorruptionError(f"sst {path}: statistics differ from those recorded where it is referenced")


def _check_sst(store: ObjectStore, path: str, recorded: dict[str, Any], problems: list[str]) -> int:
    try:
        expected = SSTInfo.from_dict(recorded)
        reader = SSTReader.open(store, path, size=expected.size, tail_size=expected.tail_size)
        reader.check_invariants()
    except _FILE_ERRORS as exc:
        problems.append(_problem(path, exc))
        return 0
    if reader.info != expected:
        problems.append(f"sst {path}: statistics differ from those recorded where it is referenced")
    return expected.size
