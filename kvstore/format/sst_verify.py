"""Validation of rows and whole SST files, shared by the writer and the reader.

The writer rejects bad input with :func:`row_problem` and
:func:`first_disorder`; ``SSTReader.check_invariants`` runs
:func:`verify_file`, which re-checks everything a full read can see and also
has Arrow's own file reader decode the file, so "any Arrow tool can open it"
is verified rather than assumed.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from kvstore.errors import CorruptionError
from kvstore.format.checksum import crc32c
from kvstore.format.rows import DELETE, MAX_SEQ, PUT, ROW_SCHEMA, Row, batch_to_rows
from kvstore.format.sst_format import HEAD_MAGIC, PARSE_ERRORS, SSTMeta, decode_block


def first_disorder(batch: pa.RecordBatch) -> int | None:
    """Index of the first row not strictly after its predecessor in (key asc, seq desc), or None."""
    n = batch.num_rows
    if n < 2:
        return None
    keys, seqs = batch.column(0), batch.column(1)
    k_prev, k_next = keys.slice(0, n - 1), keys.slice(1)
    ok = pc.or_(
        pc.greater(k_next, k_prev),
        pc.and_(pc.equal(k_next, k_prev), pc.less(seqs.slice(1), seqs.slice(0, n - 1))),
    )
    if pc.all(ok).as_py():
        return None
    return int(pc.index(ok, False).as_py()) + 1


def row_problem(batch: pa.RecordBatch) -> str | None:
    """Why ``batch`` (with ROW_SCHEMA) holds an invalid row, or None if every row is valid."""
    keys, seqs, kinds, values = batch.column(0), batch.column(1), batch.column(2), batch.column(3)
    if keys.null_count or seqs.null_count or kinds.null_count:
        return "key, seq and kind must not be null"
    if batch.num_rows == 0:
        return None
    bounds = pc.min_max(kinds).as_py()
    if bounds["min"] < PUT or bounds["max"] > DELETE:
        return f"kind must be PUT ({PUT}) or DELETE ({DELETE})"
    is_put = pc.equal(kinds, PUT)
    if pc.any(pc.and_(is_put, pc.is_null(values))).as_py():
        return "a PUT row has a null value (use b'' for an empty value)"
    if pc.any(pc.and_(pc.invert(is_put), pc.is_valid(values))).as_py():
        return "a DELETE row has a non-null value"
    return None


def verify_file(data: bytes, meta: SSTMeta, path: str) -> None:
    """Check the head, every block and the statistics of ``data`` against ``meta``.

    ``meta`` must already be verified to be this file's tail (the reader
    re-decodes it from ``data`` first).

    Raises:
        CorruptionError: at the first failed check, naming file and block.
    """
    head = data[: meta.head_length]
    if not head.startswith(HEAD_MAGIC) or crc32c(head) != meta.head_crc32c:
        raise CorruptionError(f"{path}: file head (magic + schema, bytes 0..{meta.head_length}) failed CRC32C")
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(head[len(HEAD_MAGIC) :]))
        arrow_file = pa.ipc.open_file(pa.py_buffer(data))
        arrow_batches = arrow_file.num_record_batches
    except PARSE_ERRORS as exc:
        raise CorruptionError(f"{path}: Arrow cannot open the file: {exc}") from exc
    if not schema.equals(ROW_SCHEMA) or arrow_batches != meta.info.block_count + 1:
        raise CorruptionError(f"{path}: Arrow sees schema {schema} and {arrow_batches} batches")
    prev: Row | None = None  # last row of the previous block
    keys = deletes = 0
    min_seq, max_seq = MAX_SEQ, 0
    for b in range(meta.info.block_count):
        where = f"{path}: block {b}"
        body = memoryview(data)[meta.offsets[b] : meta.offsets[b] + meta.lengths[b]]
        if crc32c(body) != meta.crcs[b]:
            raise CorruptionError(f"{where} failed its CRC32C check")
        batch = decode_block(body, path, b, meta.rows[b])
        try:
            same_as_arrow = arrow_file.get_batch(b).equals(batch)
        except PARSE_ERRORS as exc:
            raise CorruptionError(f"{where}: Arrow cannot read it: {exc}") from exc
        rows = batch_to_rows(batch)
        problem = row_problem(batch)
        if problem is None and first_disorder(batch) is not None:
            problem = "rows out of order"
        elif problem is None and not same_as_arrow:
            problem = "Arrow's own reader decodes it differently"
        elif problem is None and (rows[0][0] != meta.first_keys[b] or rows[-1][0] != meta.last_keys[b]):
            problem = "first/last key differ from the block index"
        elif problem is None and prev is not None and (rows[0][0], -rows[0][1]) <= (prev[0], -prev[1]):
            problem = "first row does not sort after the previous block's last row"
        if problem is not None:
            raise CorruptionError(f"{where}: {problem}")
        for row in rows:
            if prev is None or row[0] != prev[0]:
                keys += 1
                if not meta.bloom.may_contain(row[0]):
                    raise CorruptionError(f"{where}: key {row[0]!r} is missing from the bloom filter")
            deletes += row[2] == DELETE
            min_seq, max_seq = min(min_seq, row[1]), max(max_seq, row[1])
            prev = row
    info = meta.info
    if (keys, deletes, min_seq, max_seq) != (info.key_count, info.delete_count, info.min_seq, info.max_seq):
        raise CorruptionError(f"{path}: key/delete/seq statistics disagree with the rows")
