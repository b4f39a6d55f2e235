"""File entries in columns: a plan as one Arrow table, and the packed form a file group stores.

A plan of a million files cannot be a list of a million
:class:`~catalog.datafiles.DataFile` objects: building them alone takes
seconds. Its columnar form, an Arrow table of :data:`SCHEMA` with one row
per file, is what a caller that needs every file takes
(``Table.files_table()``). The flat fields are columns; the maps keyed by
field id (``partition``, ``stats``, ``column_ids``) stay JSON text, exactly
as the entry stores them, decoded only when a row becomes a ``DataFile``
(:func:`to_entries`).

Each file group of the planning index (:mod:`catalog.file_index`) stores
its live files in this form, as one Arrow IPC stream (:func:`pack`), so
a full plan reads one value per group rather than one entry per file. A
pack leaves ``path`` null where it is ``<prefix><id>.parquet`` for the
prefix its schema metadata records (every file a table writes has such a
path): that is a third of a pack's bytes. A pack's buffers are LZ4-compressed
(Arrow IPC's own buffer compression, so any Arrow reader opens it, earlier
versions of this module included): a million files' packs are about 66 MB
instead of 160. What a first full plan reads from the store costs per byte
(CRC checks, copies, on S3 the transfer); decoding costs about as much CPU
as that saves on local disk, but runs without the GIL on the threads that
read (:func:`catalog.file_index.live_table`). Packs written before
compression (plain IPC) read the same way.
"""

from __future__ import annotations

import json
from typing import Any, Final, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from catalog.datafiles import DataFile

# The columns of a plan, one row per file. Append-only: a stored pack is
# read by name, and a column it lacks reads as null.
SCHEMA: Final = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("rows", pa.int64(), nullable=False),
    pa.field("crc32c", pa.int64()),
    pa.field("parquet_field_ids", pa.bool_(), nullable=False),
    pa.field("footer_size", pa.int64()),
    pa.field("footer_crc32c", pa.int64()),
    pa.field("partition", pa.string(), nullable=False),  # JSON object: field id -> encoded value
    pa.field("stats", pa.string(), nullable=False),  # JSON object: field id -> [min, max, nulls]
    pa.field("column_ids", pa.string()),  # JSON object, or null (see DataFile.column_ids)
])
_PACKED: Final = pa.schema([f.with_nullable(True) if f.name == "path" else f for f in SCHEMA])
_PREFIX: Final = b"lakekv.path_prefix"
_SUFFIX: Final = ".parquet"
# How packs are written: every buffer an LZ4 frame (JSON text and ids shrink
# 2-7x; a pack of random bytes would grow by a few bytes a buffer).
_WRITE: Final = pa.ipc.IpcWriteOptions(compression="lz4")
# How they are read: a pack's buffers on the calling thread (Arrow's own
# per-buffer threads cost more than they save at ~100 KB a pack; a caller
# with many packs spreads them over threads instead).
_READ: Final = pa.ipc.IpcReadOptions(use_threads=False)
# Where unpacked packs live: the C allocator's pool, not Arrow's default
# (mimalloc). A million files unpack to about 250 MB of fresh memory;
# mimalloc's comes in transparent huge pages, whose first touch on a host
# with fragmented memory waits on compaction: a fresh process's first full
# plan spent 0.2-0.6 s in the kernel that way, against a steady 0.15-0.2 s
# with 4 KB pages (2 cores, load average 7-8; benchmarks/cold_plan_bench.py).
_POOL: Final = pa.system_memory_pool()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def from_entries(files: Iterable[DataFile]) -> pa.Table:
    """The files as a plan table (:data:`SCHEMA`), in their order. O(files)."""
    files = list(files)
    return pa.table(
        {
            "id": [f.id for f in files],
            "path": [f.path for f in files],
            "size": [f.size for f in files],
            "rows": [f.rows for f in files],
            "crc32c": [f.crc32c for f in files],
            "parquet_field_ids": [f.parquet_field_ids for f in files],
            "footer_size": [f.footer_size for f in files],
            "footer_crc32c": [f.footer_crc32c for f in files],
            "partition": [_json(f.partition) for f in files],
            "stats": [_json(f.stats) for f in files],
            "column_ids": [None if f.column_ids is None else _json(f.column_ids) for f in files],
        },
        schema=SCHEMA,
    )


def to_entries(table: pa.Table | pa.RecordBatch) -> list[DataFile]:
    """The rows of a plan table as ``DataFile`` entries, in row order (each one decoded: O(rows)).

    Raises:
        ValueError: a row is not a valid entry.
    """
    out = []
    for row in table.select(SCHEMA.names).to_pylist():
        for name in ("partition", "stats", "column_ids"):
            if row[name] is not None:
                row[name] = json.loads(row[name])
        out.append(DataFile.from_json(row))
    return out


def pack(files: list[DataFile]) -> bytes:
    """A group's files as stored: an Arrow IPC stream of one batch, paths under the common prefix left null."""
    table = from_entries(files)
    prefix = _common_prefix(files)
    if prefix is not None:
        paths = pa.array([None if f.path == f"{prefix}{f.id}{_SUFFIX}" else f.path for f in files], pa.string())
        table = table.set_column(SCHEMA.get_field_index("path"), _PACKED.field("path"), paths)
    table = table.cast(_PACKED.with_metadata({_PREFIX: (prefix or "").encode()}))
    return _stream(table)


def _stream(table: pa.Table) -> bytes:
    """``table`` as a stored pack: an IPC stream of one batch, its buffers compressed."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_WRITE) as writer:
        writer.write_table(table.combine_chunks(), max_chunksize=table.num_rows or None)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _common_prefix(files: list[DataFile]) -> str | None:
    """The directory most of ``files`` are ``<dir><id>.parquet`` in (the first such file's), or None."""
    for f in files:
        name = f"{f.id}{_SUFFIX}"
        if f.path.endswith(name):
            return f.path[: -len(name)]
    return None


def unpack(raw: bytes | pa.Buffer) -> pa.Table:
    """A stored pack's files as a table of :data:`SCHEMA`, paths filled in.

    Raises:
        ValueError: ``raw`` is not a pack.
    """
    return unpack_all([raw])


def unpack_all(packs: Iterable[bytes | pa.Buffer]) -> pa.Table:
    """The files of every pack in ``packs``, in their order, as one table of :data:`SCHEMA`.

    Raises:
        ValueError: one is not a pack.
    """
    parts = unpack_each(packs)
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


def unpack_each(packs: Iterable[bytes | pa.Buffer]) -> list[pa.Table]:
    """Each pack's files as a table of :data:`SCHEMA`, in the packs' order.

    The packs are completed together (paths filled in once per prefix, not
    once per pack: a full plan unpacks a thousand); each result is a slice
    of that whole (no copy). Arrow decodes and joins paths without the GIL,
    so threads unpacking separate packs run in parallel.

    Raises:
        ValueError: one is not a pack.
    """
    stored: list[tuple[str, pa.Table]] = []
    for raw in packs:
        try:
            table = pa.ipc.open_stream(raw, options=_READ, memory_pool=_POOL).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"not a file group pack: {exc}") from None
        prefix = (table.schema.metadata or {}).get(_PREFIX, b"").decode()
        stored.append((prefix, table.replace_schema_metadata(None)))
    by_prefix: dict[str, list[int]] = {}
    for i, (prefix, _) in enumerate(stored):
        by_prefix.setdefault(prefix, []).append(i)
    out: list[pa.Table] = [SCHEMA.empty_table()] * len(stored)
    for prefix, indexes in by_prefix.items():
        tables = [stored[i][1] for i in indexes]
        # Packs of one writer share a schema; unifying schemas (for older
        # packs that lack a column) walks every table, so only when needed.
        same = all(t.schema.equals(tables[0].schema) for t in tables)
        whole = _complete(prefix, pa.concat_tables(tables, promote_options="none" if same else "default"))
        start = 0
        for i in indexes:
            rows = stored[i][1].num_rows
            out[i] = whole.slice(start, rows)
            start += rows
    return out


def _complete(prefix: str, stored: pa.Table) -> pa.Table:
    """Stored pack rows as :data:`SCHEMA`: columns an older pack lacks as nulls, paths under ``prefix`` filled in."""
    columns = []
    for f in SCHEMA:
        if f.name not in stored.schema.names:
            columns.append(pa.nulls(stored.num_rows, f.type))
            continue
        column = stored.column(f.name)
        if f.name == "path" and column.null_count:
            # One kernel call per prefix over every pack's ids (a chunk each).
            made = pc.binary_join_element_wise(prefix, stored.column("id"), _SUFFIX, "", memory_pool=_POOL)
            column = made if column.null_count == len(column) else pc.coalesce(column, made, memory_pool=_POOL)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def without(raw: bytes, removed: set[str]) -> tuple[bytes | None, int]:
    """The pack ``raw`` less the files ``removed`` (None when none is left), and how many files it lost."""
    table = pa.ipc.open_stream(raw, options=_READ).read_all()
    keep = pc.invert(pc.is_in(table.column("id"), value_set=pa.array(sorted(removed), pa.string())))
    kept = table.filter(keep)
    lost = table.num_rows - kept.num_rows
    if kept.num_rows == 0:
        return None, lost
    return _stream(kept), lost
