"""Shared by the pack tests (file_columns, file_index): a pack as written before packs were compressed."""

from __future__ import annotations

import pyarrow as pa


def plain_pack(raw: bytes) -> bytes:
    """A pack as stored before compression: the same table in a plain IPC stream."""
    table = pa.ipc.open_stream(raw).read_all()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]
