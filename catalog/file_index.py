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

Why these keys never make appends conflict: an append writes only keys
under its files' fresh ids and a fresh group id, and reads none of these
ranges. A removal (delete, overwrite, compaction, drop) deletes its files'
index and membership keys and, when a group empties, its summary; two
removals touching one group conflict on its keys, as they already conflict
on its files (delete × delete REBASE, :mod:`catalog.conflicts`). A summary
is never narrowed when files leave it: wider bounds keep more groups, never
fewer, so a stale summary costs time, never a file.

A table created before this index existed has no ``layout`` key: its plans
read every entry (:func:`indexed` is False), as before. Its new appends
still write index keys, which are then unused.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from typing import Any, Final, Iterable, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from catalog import keys
from catalog.datafiles import DataFile, decode_values, encode_value, has_stats
from catalog.schema import field_id

LAYOUT: Final = b'{"index":1}'  # the layout marker's value (the index's format version)


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


def indexed(kv: Any, table_id: str) -> bool:
    """Whether the table's planning index covers every live file at ``kv``'s view."""
    return kv.get(keys.table_layout(table_id)) is not None


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
    """Index ``files``, which this commit adds, as one new group. O(len(files)) keys, none shared."""
    if not files:
        return
    group = uuid.uuid4().hex
    gid = group.encode()
    w.put(keys.file_group(table_id, group), json.dumps(summarize(files, schema), separators=(",", ":")).encode())
    members = keys.group_files(table_id, group)
    for f in files:
        w.put(keys.partition_index(table_id, partition_token(f.partition)) + f.id.encode(), gid)
        w.put(members + f.id.encode(), b"")


def remove_files(w: _Writer, table_id: str, files: Iterable[DataFile]) -> None:
    """Take ``files``, which this commit removes, out of the index; drop the summaries of groups left empty."""
    emptied: set[str] = set()
    for f in files:
        part_key = keys.partition_index(table_id, partition_token(f.partition)) + f.id.encode()
        raw = w.kv.get(part_key)
        if raw is None:
            continue  # a file committed before the index existed
        w.delete(part_key)
        group = raw.decode()
        w.delete(keys.group_files(table_id, group) + f.id.encode())
        emptied.add(group)
    for group in emptied:
        if next(iter(w.kv.scan(prefix=keys.group_files(table_id, group), limit=1)), None) is None:
            w.delete(keys.file_group(table_id, group))


def drop_all(w: _Writer, table_id: str) -> None:
    """Delete every index key of a dropped table (its marker, partition keys, groups)."""
    w.delete(keys.table_layout(table_id))
    for prefix in (keys.partition_index_prefix(table_id), keys.file_groups(table_id), keys.group_files_prefix(table_id)):
        for key, _ in list(w.kv.scan(prefix=prefix)):
            w.delete(key)
