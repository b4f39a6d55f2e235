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
path): that is a third of a pack's bytes.
"""

from __future__ import annotations

import json
from typing import Any, Final, Iterable

import numpy as np
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
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=len(files) or None)
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
    try:
        stored = pa.ipc.open_stream(raw).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"not a file group pack: {exc}") from None
    prefix = (stored.schema.metadata or {}).get(_PREFIX, b"").decode()
    columns = []
    for f in SCHEMA:
        if f.name not in stored.schema.names:
            columns.append(pa.nulls(stored.num_rows, f.type))
            continue
        column = stored.column(f.name)
        if f.name == "path" and column.null_count:
            ids = stored.column("id").combine_chunks()
            made = _joined(prefix, ids)
            column = made if column.null_count == len(column) else pc.coalesce(column, made)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _joined(prefix: str, ids: pa.StringArray) -> pa.StringArray:
    """``<prefix><id>.parquet`` for every id.

    Built with numpy when every id has one length (as file ids have):
    a full plan makes a million of these, and Arrow's string join takes
    three times as long.
    """
    n = len(ids)
    offsets = np.frombuffer(ids.buffers()[1], np.int32)[ids.offset : ids.offset + n + 1]
    width = int(offsets[-1] - offsets[0]) // n if n else 0
    if n == 0 or ids.null_count or not bool(np.all(np.diff(offsets) == width)):
        return pc.binary_join_element_wise(prefix, ids, _SUFFIX, "")
    head, tail = prefix.encode(), _SUFFIX.encode()
    size = len(head) + width + len(tail)
    data = np.empty((n, size), np.uint8)
    data[:, : len(head)] = np.frombuffer(head, np.uint8)
    first = int(offsets[0])
    data[:, len(head) : len(head) + width] = np.frombuffer(ids.buffers()[2], np.uint8)[first : first + n * width].reshape(n, width)
    data[:, len(head) + width :] = np.frombuffer(tail, np.uint8)
    made_offsets = np.arange(n + 1, dtype=np.int64) * size
    if made_offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(n, pa.py_buffer(made_offsets.astype(np.int32)), pa.py_buffer(data))
    return pc.binary_join_element_wise(prefix, ids, _SUFFIX, "")


def without(raw: bytes, removed: set[str]) -> tuple[bytes | None, int]:
    """The pack ``raw`` less the files ``removed`` (None when none is left), and how many files it lost."""
    reader = pa.ipc.open_stream(raw)
    table = reader.read_all()
    keep = pc.invert(pc.is_in(table.column("id"), value_set=pa.array(sorted(removed), pa.string())))
    kept = table.filter(keep)
    lost = table.num_rows - kept.num_rows
    if kept.num_rows == 0:
        return None, lost
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(kept.combine_chunks(), max_chunksize=kept.num_rows)
    return sink.getvalue().to_pybytes(), lost
