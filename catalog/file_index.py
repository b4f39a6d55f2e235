"""The planning index of a native table: partition keys and grouped min/max summaries.

A table's live files are its ``file/`` keys (:mod:`catalog.keys`); a plan
that reads all of them costs time linear in the table. Beside them, every
commit that adds files keeps, in keys of the same lakekv version (so a past
version's plan reads the index as of that version):

* the **partition index**: one key per live file under its partition's
  token (``pidx/<token>/<file id>``, valued with the file's group id). A
  filter that fixes every partition column to a few values reads only those
  partitions' keys.
* **file groups**, as Iceberg's manifests: the files one commit added form
  a group with a summary (``grp/<group id>``: per-column min, max and null
  count, by field id, and the row count) and one membership key per live
  file (``gfile/<group id>/<file id>``). A selective filter tests the
  summaries and reads the members of the groups that may match only.
* **packs**: each group's live files' entries in columns, one value
  (``gpack/<group id>``, :mod:`catalog.file_columns`). A plan of every
  file reads the summaries and one pack per group (:func:`live_table`)
  instead of one entry per file; a removal rewrites the packs of the
  groups it takes files from. A commit of more than :data:`GROUP_FILES`
  files makes several groups, so a pack stays a few MB. Each summary names
  its pack's content with a fresh token (``pack``), written with it: a
  process keeps unpacked packs by token (:data:`PACK_CACHE_BYTES`), so
  planning every file again reads only the summaries.

Why these keys never make appends conflict: an append writes only keys
under its files' fresh ids and a fresh group id, and reads none of these
ranges. A removal (delete, overwrite, compaction, drop) deletes its files'
index and membership keys and, when a group empties, its summary; two
removals touching one group conflict on its keys, as they already conflict
on its files (delete × delete REBASE, :mod:`catalog.conflicts`). A summary
is never narrowed when files leave it: wider bounds keep more groups, never
fewer, so a stale summary costs time, never a file.

A table created before this index existed has no ``layout`` key: its plans
read every entry (:func:`layout` is 0), as before. A table created before
packs existed has layout 1: its filtered plans use the index, its full
plans read every entry. Either's new appends still write every index key,
and its removals keep them, which are then unused.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Iterable, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog import file_columns, keys
from catalog.datafiles import DataFile, decode_values, encode_value, has_stats
from catalog.schema import field_id

# The layout marker's value: the index's format version. 1: partition keys
# and groups; 2: and every group has its pack.
LAYOUT: Final = b'{"index":2}'
PACKED: Final = 2
# Files per group at most (a larger commit makes several): a pack of this
# many entries is a few MB, and a group small enough to prune usefully.
GROUP_FILES: Final = 10_000
# Unpacked packs a process keeps (by Arrow bytes): a table of a million
# files takes about 300 MB of them.
PACK_CACHE_BYTES: Final = 512 << 20


class _Writer(Protocol):
    kv: Any

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...


def _canonical(value: Any) -> Any:
    """A partition value as the token hashes it: an integral float as the int it equals.

    A column widened from int to float keeps its old files' values as JSON
    ints; a filter's value cast to the new type is a float. Both must give
    one token.
    """
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def partition_token(partition: dict[str, Any]) -> str:
    """The token of a file's partition (its encoded values by field id), 32 hex digits.

    >>> partition_token({"2": "a"}) == partition_token({"2": "a"}) != partition_token({"2": "b"})
    True
    >>> partition_token({"1": 5}) == partition_token({"1": 5.0})
    True
    """
    canonical = json.dumps({k: _canonical(v) for k, v in partition.items()}, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def mark_indexed(w: _Writer, table_id: str) -> None:
    """Record that every live file of the (new, empty) table is in its index."""
    w.put(keys.table_layout(table_id), LAYOUT)


def layout(kv: Any, table_id: str) -> int:
    """The table's index format at ``kv``'s view: 0 no index (plans read every entry), 1, or :data:`PACKED`.

    Raises:
        ValueError: the marker is not one this code wrote.
    """
    raw = kv.get(keys.table_layout(table_id))
    if raw is None:
        return 0
    try:
        version = json.loads(raw)["index"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"table {table_id}: malformed planning index marker {raw[:100]!r}") from None
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"table {table_id}: malformed planning index marker {raw[:100]!r}")
    return min(version, PACKED)


def indexed(kv: Any, table_id: str) -> bool:
    """Whether the table's planning index covers every live file at ``kv``'s view."""
    return layout(kv, table_id) > 0


def summarize(files: list[DataFile], schema: pa.Schema) -> dict[str, Any]:
    """The summary of a group of ``files`` written under ``schema``: rows and per-column bounds.

    A column's bounds are kept only when every file's are known (a file of
    unknown or all-null bounds makes the group's unknown: the group then
    keeps every file the file-level test would keep). The null count is the
    sum, or None when any file's is unknown.
    """
    stats: dict[str, list[Any]] = {}
    for f in schema:
        if not has_stats(f.type):
            continue
        fid = str(field_id(f))
        found = [e.stats.get(fid) for e in files]
        entries = [s for s in found if s is not None]
        if len(entries) < len(found):
            continue
        nulls = [s[2] for s in entries]
        total = None if any(n is None for n in nulls) else sum(nulls)
        lows = [s[0] for s in entries]
        highs = [s[1] for s in entries]
        if any(v is None for v in lows) or any(v is None for v in highs):
            stats[fid] = [None, None, total]
            continue
        try:
            low = pc.min(decode_values(lows, f.type))
            high = pc.max(decode_values(highs, f.type))
            stats[fid] = [encode_value(low), encode_value(high), total]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError, TypeError):
            stats[fid] = [None, None, total]
    return {"rows": sum(e.rows for e in files), "stats": stats}


def add_files(w: _Writer, table_id: str, files: list[DataFile], schema: pa.Schema) -> None:
    """Index ``files``, which this commit adds, as new groups (:data:`GROUP_FILES` each at most).

    O(len(files)) keys, none shared with another commit.
    """
    for start in range(0, len(files), GROUP_FILES):
        _add_group(w, table_id, files[start : start + GROUP_FILES], schema)


def _add_group(w: _Writer, table_id: str, files: list[DataFile], schema: pa.Schema) -> None:
    group = uuid.uuid4().hex
    gid = group.encode()
    summary = {**summarize(files, schema), "pack": uuid.uuid4().hex}
    w.put(keys.file_group(table_id, group), json.dumps(summary, separators=(",", ":")).encode())
    w.put(keys.group_pack(table_id, group), file_columns.pack(files))
    members = keys.group_files(table_id, group)
    for f in files:
        w.put(keys.partition_index(table_id, partition_token(f.partition)) + f.id.encode(), gid)
        w.put(members + f.id.encode(), b"")


def remove_files(w: _Writer, table_id: str, files: Iterable[DataFile]) -> None:
    """Take ``files``, which this commit removes, out of the index.

    Rewrites the packs of the groups they leave; drops the summary and pack
    of a group left empty.
    """
    by_group: dict[str, set[str]] = {}
    for f in files:
        part_key = keys.partition_index(table_id, partition_token(f.partition)) + f.id.encode()
        raw = w.kv.get(part_key)
        if raw is None:
            continue  # a file committed before the index existed
        w.delete(part_key)
        group = raw.decode()
        w.delete(keys.group_files(table_id, group) + f.id.encode())
        by_group.setdefault(group, set()).add(f.id)
    for group, removed in by_group.items():
        pack_key = keys.group_pack(table_id, group)
        packed = w.kv.get(pack_key)
        if packed is not None:
            rest, _ = file_columns.without(packed, removed)
            if rest is not None:
                w.put(pack_key, rest)
                _renew_token(w, table_id, group)
                continue
            w.delete(pack_key)
        elif next(iter(w.kv.scan(prefix=keys.group_files(table_id, group), limit=1)), None) is not None:
            continue  # a group from before packs, with members left
        w.delete(keys.file_group(table_id, group))


def _renew_token(w: _Writer, table_id: str, group: str) -> None:
    """Give the group's summary a new pack token: its pack was rewritten (cached unpackings of the old one no longer hold)."""
    key = keys.file_group(table_id, group)
    raw = w.kv.get(key)
    if raw is not None:
        summary = json.loads(raw)
        summary["pack"] = uuid.uuid4().hex
        w.put(key, json.dumps(summary, separators=(",", ":")).encode())


def drop_all(w: _Writer, table_id: str) -> None:
    """Delete every index key of a dropped table (its marker, partition keys, groups, packs)."""
    w.delete(keys.table_layout(table_id))
    prefixes = (
        keys.partition_index_prefix(table_id),
        keys.file_groups(table_id),
        keys.group_files_prefix(table_id),
        keys.group_packs(table_id),
    )
    for prefix in prefixes:
        for key, _ in list(w.kv.scan(prefix=prefix)):
            w.delete(key)


class _SummaryCache:
    """Decoded group summaries by their stored bytes (a summary key's value may change; equal bytes decode equal)."""

    def __init__(self, entries: int = 200_000) -> None:
        self._lock = threading.Lock()
        self._items: dict[bytes, dict[str, Any]] = {}
        self._entries = entries

    def get(self, raw: bytes) -> dict[str, Any]:
        found = self._items.get(raw)
        if found is None:
            found = json.loads(raw)
            with self._lock:
                if len(self._items) >= self._entries:
                    self._items.clear()
                self._items[raw] = found
        return found


_SUMMARIES = _SummaryCache()


def decode_summary(raw: bytes) -> dict[str, Any]:
    """A stored group summary (``rows``, ``stats``, ``pack``), decoded once per process. Do not modify it."""
    return _SUMMARIES.get(raw)


class _PackCache:
    """Unpacked packs by (table id, group id, pack token), least recently used first out, within a byte budget.

    A token names one content of one group's pack (a rewrite gets a new
    one), so an entry never goes stale; a version that no longer has the
    group or token simply never asks for it.
    """

    def __init__(self, budget: int) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str, str], tuple[pa.Table, int]] = OrderedDict()
        self._budget = budget
        self._used = 0

    def get(self, key: tuple[str, str, str]) -> pa.Table | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str, str], table: pa.Table, size: int) -> None:
        """Keep ``table``, which takes ``size`` bytes."""
        if size > self._budget:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._used -= 0 if old is None else old[1]
            self._items[key] = (table, size)
            self._used += size
            while self._used > self._budget:
                _, (_, evicted) = self._items.popitem(last=False)
                self._used -= evicted


_PACKS = _PackCache(PACK_CACHE_BYTES)


def live_table(kv: Any, table_id: str) -> pa.Table:
    """Every live file of a table of layout :data:`PACKED` at ``kv``'s view, as a plan table, group by group.

    Reads the group summaries, and the packs of the groups whose unpacking
    this process does not hold (many at once: scans of a few key ranges of
    the packs, on as many threads, :func:`_unpacked`):
    O(groups) reads, no per-file Python object. The rows are in group-key
    order, not file-key order.

    Raises:
        ValueError: a group has no pack (a damaged index).
    """
    prefix = keys.file_groups(table_id)
    groups: list[tuple[str, str | None]] = []
    parts: dict[str, pa.Table] = {}
    for key, raw in kv.scan(prefix=prefix):
        group = key[len(prefix) :].decode()
        token = decode_summary(raw).get("pack")
        groups.append((group, token))
        cached = None if token is None else _PACKS.get((table_id, group, token))
        if cached is not None:
            parts[group] = cached
    missing = [(group, token) for group, token in groups if group not in parts]
    if missing:
        unpacked = _unpacked(kv, table_id, [group for group, _ in missing])
        # Slices of a few tables (they keep them alive while any is cached):
        # sized by rows, as Table.nbytes of each slice costs a walk.
        row_bytes = unpacked[0].nbytes / max(unpacked[0].num_rows, 1)
        for (group, token), table in zip(missing, unpacked):
            parts[group] = table
            if token is not None:
                _PACKS.put((table_id, group, token), table, int(row_bytes * table.num_rows) + 1)
    return pa.concat_tables([parts[group] for group, _ in groups]) if groups else file_columns.SCHEMA.empty_table()


# Reading more packs than this takes scans of them rather than a get each.
_SCAN_FROM: Final = 16
# A first full plan reads a thousand packs or so: in up to this many key
# ranges at once, each on its own thread, which also unpacks what it read.
# The store's reads (file reads, CRC checks) and Arrow's decoding and path
# joins run without the GIL, so the ranges overlap on idle cores. On a busy
# 2-core machine (load average 7-8) four ranges against one narrowed the
# spread of first plans at 1M files (0.6-1.3 s against 0.5-2.3 s) more than
# they moved the median.
_THREADS: Final = 4
# Packs per range at least: fewer, and a thread costs more than it saves.
_RANGE_PACKS: Final = 64


def _unpacked(kv: Any, table_id: str, groups: list[str]) -> list[pa.Table]:
    """The unpacked packs of ``groups``, in their order.

    Only a store or snapshot has ``scan_batches``, and either may be read
    from many threads at once; a transaction (one thread at a time) or a
    remote handle has none, and takes a get per pack on this thread.

    Raises:
        ValueError: a group has no pack.
    """
    if getattr(kv, "scan_batches", None) is None or len(groups) < _SCAN_FROM:
        found = {g: kv.get(keys.group_pack(table_id, g)) for g in groups}
        return file_columns.unpack_each([_present(table_id, g, found.get(g)) for g in groups])
    ordered = sorted(groups)
    ranges = max(1, min(_THREADS, len(ordered) // _RANGE_PACKS))
    step = -(-len(ordered) // ranges)
    runs = [ordered[start : start + step] for start in range(0, len(ordered), step)]
    if len(runs) == 1:
        done = [_scan_unpacked(kv, table_id, runs[0], whole=True)]
    else:
        with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="lakekv-packs") as pool:
            done = list(pool.map(lambda run: _scan_unpacked(kv, table_id, run), runs))
    by_group = {group: table for run, tables in zip(runs, done) for group, table in zip(run, tables)}
    return [by_group[group] for group in groups]


def _scan_unpacked(kv: Any, table_id: str, run: list[str], whole: bool = False) -> list[pa.Table]:
    """The unpacked packs of the sorted groups ``run``: one scan of the key range they span (``whole``: of every pack).

    Raises:
        ValueError: a group has no pack.
    """
    prefix = keys.group_packs(table_id)
    wanted = set(run)
    found: dict[str, bytes | pa.Buffer] = {}
    span = {"prefix": prefix} if whole else {
        "start": keys.group_pack(table_id, run[0]), "end": keys.group_pack(table_id, run[-1]) + b"\x00",
    }
    for batch in kv.scan_batches(**span):
        for key, value in zip(batch.column(0).to_pylist(), _buffers(batch.column(1))):
            name = key[len(prefix) :].decode()
            if name in wanted:
                found[name] = value
    return file_columns.unpack_each([_present(table_id, group, found.get(group)) for group in run])


def _present(table_id: str, group: str, pack: bytes | pa.Buffer | None) -> bytes | pa.Buffer:
    """``pack``, the group's; a ValueError naming the group when it has none."""
    if pack is None:
        raise ValueError(f"table {table_id}: file group {group} has a summary but no pack")
    return pack


def _buffers(values: pa.Array) -> list[bytes | pa.Buffer]:
    """The values of a binary array as slices of its data buffer (no copy)."""
    if not pa.types.is_binary(values.type) or values.null_count:
        return [value.as_py() for value in values]
    _, offset_buffer, data = values.buffers()
    # This (maybe sliced) array's offsets, into its whole data buffer.
    offsets = np.frombuffer(offset_buffer, np.int32)[values.offset : values.offset + len(values) + 1]
    return [data.slice(int(offsets[i]), int(offsets[i + 1] - offsets[i])) for i in range(len(values))]
