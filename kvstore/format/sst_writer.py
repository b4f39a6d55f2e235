"""SST writer: sorted rows or Arrow batches in, one immutable SST object out.

The whole file is built in memory and stored with a single ``store.put``
(SST names are unique, so no conditional create is needed). The byte layout
is described in :mod:`kvstore.format.sst_format` and FORMAT.md; in short:
pyarrow's IPC file writer lays out ``magic | schema | data blocks | meta
block | footer``, and this module computes the CRC32C of each region as it
goes, then patches the tail CRC into its fixed-width slot.
"""

from __future__ import annotations

import warnings
from bisect import bisect_left
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from kvstore.format.bloom import MAX_BITS_PER_KEY, BloomFilter
from kvstore.format.checksum import crc32c
from kvstore.format.rows import DELETE, ROW_OVERHEAD_BYTES, ROW_SCHEMA, Row, columns_to_batch, rows_to_batch
from kvstore.format.sst_format import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_BLOOM_BITS_PER_KEY,
    DEFAULT_SST_COMPRESSION,
    FILE_SCHEMA,
    HEAD_MAGIC,
    TAIL_CRC_PREFIX,
    SST_COMPRESSIONS,
    TAIL_CRC_ZERO,
    TRAILER_SIZE,
    SSTInfo,
    SSTMeta,
    encode_meta,
    footer_length,
    parse_footer_blocks,
    tail_crc,
)
from kvstore.format.sst_verify import first_disorder, row_problem
from kvstore.objstore.base import ObjectStore, validate_path

RowsOrBatches = Iterable[Row | pa.RecordBatch]

# Input is consumed this many items at a time, and row tuples are converted to
# Arrow per chunk: enough to amortise pyarrow's per-call cost, small enough to
# keep the Python lists short-lived.
_ROWS_PER_CHUNK: Final = 4096
_STREAM_BUFFER_BYTES: Final = 2 * DEFAULT_BLOCK_SIZE  # holds a default-size block, compressed or not
_META_BATCH: Final = rows_to_batch([])  # the meta block carries no rows, only custom metadata

_rows_to_arrays: Callable[[list[Row]], tuple[pa.Array, ...] | None] | None
try:
    from cython_ext._rowbatch import rows_to_arrays as _rows_to_arrays  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled row converter unavailable ({exc}); using the pure-Python twin", stacklevel=2)
    _rows_to_arrays = None


def write_sst(
    store: ObjectStore,
    path: str,
    rows_or_batches: RowsOrBatches,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    bloom_bits_per_key: int = DEFAULT_BLOOM_BITS_PER_KEY,
    compression: str = DEFAULT_SST_COMPRESSION,
) -> SSTInfo:
    """Write sorted rows to a new SST at ``path`` with one ``store.put``.

    Args:
        store: destination object store.
        path: object path, unique to this file (e.g. ``sst/<uuid>.sst``).
        rows_or_batches: Row tuples and/or ``pa.RecordBatch``es with
            ``ROW_SCHEMA``, ordered by key ascending then seq descending, with
            no repeated ``(key, seq)``; at least one row in total.
        block_size: target encoded size of a data block, in bytes; a block is
            cut once it reaches it, so a single large row makes its own block.
        bloom_bits_per_key: bloom filter bits per distinct key (1..64).
        compression: codec of the data blocks' Arrow buffers, a key of
            ``SST_COMPRESSIONS`` ("lz4", "zstd" or "none"); the store passes its
            ``sst_compression`` option.

    Returns:
        The new file's :class:`SSTInfo`.

    Raises:
        TypeError: an argument, row or batch has the wrong type.
        ValueError: rows are unsorted, repeat a ``(key, seq)``, are invalid
            (bad kind, null PUT value, ...) or there are none; bad sizes or
            an unknown compression.
    """
    validate_path(path)
    data, info = encode_sst(
        path, rows_or_batches, block_size=block_size, bloom_bits_per_key=bloom_bits_per_key, compression=compression
    )
    store.put(path, data)
    return info


def encode_sst(
    path: str,
    rows_or_batches: RowsOrBatches,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    bloom_bits_per_key: int = DEFAULT_BLOOM_BITS_PER_KEY,
    compression: str = DEFAULT_SST_COMPRESSION,
) -> tuple[bytes, SSTInfo]:
    """Like :func:`write_sst` but return the file bytes instead of storing them."""
    for name, value, low, high in (
        ("block_size", block_size, 1, 2**31 - 1),
        ("bloom_bits_per_key", bloom_bits_per_key, 1, MAX_BITS_PER_KEY),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be int, not {type(value).__name__}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be in {low}..{high}, got {value}")
    if not isinstance(compression, str):
        raise TypeError(f"compression must be str, not {type(compression).__name__}")
    if compression not in SST_COMPRESSIONS:
        raise ValueError(f"compression must be one of {tuple(SST_COMPRESSIONS)}, got {compression!r}")
    builder = _SSTBuilder(block_size, bloom_bits_per_key, SST_COMPRESSIONS[compression])
    items = iter(rows_or_batches)
    while chunk := list(islice(items, _ROWS_PER_CHUNK)):
        if set(map(type, chunk)) == {tuple}:  # the common case, checked at C speed
            builder.add_batch(_rows_to_batch(chunk, builder.rows_seen))
            continue
        rows: list[Row] = []
        for item in chunk:
            if isinstance(item, tuple):
                rows.append(item)
            elif isinstance(item, pa.RecordBatch):
                if rows:
                    builder.add_batch(_rows_to_batch(rows, builder.rows_seen))
                    rows = []
                builder.add_batch(item)
            else:
                raise TypeError(
                    f"rows_or_batches must yield Row tuples or pyarrow.RecordBatch, not {type(item).__name__}"
                )
        if rows:
            builder.add_batch(_rows_to_batch(rows, builder.rows_seen))
    return builder.finish(path)


def _rows_to_batch(rows: list[Row], first_row: int) -> pa.RecordBatch:
    """Convert row tuples to a ROW_SCHEMA batch, rejecting malformed rows by number.

    The compiled converter takes plain rows; anything else (and every error)
    goes to the Python twin, which builds the same batch or names the bad row.
    """
    if _rows_to_arrays is not None:
        arrays = _rows_to_arrays(rows)
        if arrays is not None:
            return pa.RecordBatch.from_arrays(list(arrays), schema=ROW_SCHEMA)
    return _rows_to_batch_py(rows, first_row)


def _rows_to_batch_py(rows: list[Row], first_row: int) -> pa.RecordBatch:
    """The pure-Python twin of ``cython_ext._rowbatch.rows_to_arrays`` (the spec)."""
    if set(map(len, rows)) != {5}:
        bad = next(i for i, row in enumerate(rows) if len(row) != 5)
        raise TypeError(f"rows_or_batches: row {first_row + bad} has {len(rows[bad])} fields, expected 5")
    keys, seqs, kinds, values, expires = zip(*rows, strict=True)
    # Type checks run at C speed (set(map(type, ...))); the slow scan only
    # happens to name the offending row.
    checks: tuple[tuple[tuple[object, ...], str, set[type]], ...] = (
        (keys, "key", {bytes}),
        (seqs, "seq", {int}),
        (kinds, "kind", {int}),
        (values, "value", {bytes, type(None)}),
        (expires, "expire_at_ms", {int, type(None)}),
    )
    for column, name, allowed in checks:
        if not set(map(type, column)) <= allowed:
            bad = next(i for i, v in enumerate(column) if type(v) not in allowed)
            expected = " or ".join(sorted("None" if t is type(None) else t.__name__ for t in allowed))
            raise TypeError(
                f"rows_or_batches: row {first_row + bad} {name} must be {expected}, not {type(column[bad]).__name__}"
            )
    try:
        return columns_to_batch(keys, seqs, kinds, values, expires)
    except (pa.ArrowInvalid, OverflowError) as exc:
        raise ValueError(f"rows_or_batches: rows {first_row}..: seq, kind or expire_at_ms out of range: {exc}") from exc


def _conform(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Return ``batch`` with exactly ROW_SCHEMA (names and types must already match)."""
    if batch.schema.equals(ROW_SCHEMA):
        return batch
    if batch.schema.names != ROW_SCHEMA.names or batch.schema.types != ROW_SCHEMA.types:
        raise TypeError(f"rows_or_batches: batch schema must be ROW_SCHEMA ({ROW_SCHEMA}), got {batch.schema}")
    return pa.RecordBatch.from_arrays(batch.columns, schema=ROW_SCHEMA)


class _SSTBuilder:
    """Accumulates validated batches, cuts them into blocks and encodes the file.

    Not thread-safe; one builder per file.
    """

    def __init__(self, block_size: int, bloom_bits_per_key: int, codec: str | None) -> None:
        self._block_size = block_size
        self._bits_per_key = bloom_bits_per_key
        self._sink = _ChecksummingSink()
        # pyarrow writes a compressed block as ~30 small writes (each buffer's
        # length, bytes and padding): a C++ buffer in front of the sink hands
        # it the block in one call when _emit_block flushes, so the GIL is
        # taken once per block. Uncompressed blocks come in fewer, larger
        # writes, and there the buffer's extra copy costs more than the calls
        # it saves (measured: 0.30 against 0.22 us a row).
        self._stream: Any = self._sink
        if codec is not None:
            self._stream = pa.output_stream(self._sink, buffer_size=_STREAM_BUFFER_BYTES)
        # Compression runs inside write_batch, in C++ with the GIL released.
        # One thread: a block's few buffers are too small to gain from the
        # thread pool, and the flush thread must leave the other core to the
        # committer.
        options = pa.ipc.IpcWriteOptions(compression=codec, use_threads=False)
        self._writer = pa.ipc.new_file(self._stream, FILE_SCHEMA, options=options)
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._last: tuple[bytes, int] | None = None  # (key, seq) of the last row accepted
        self.rows_seen = 0
        self._key_count = 0
        self._delete_count = 0
        self._min_seq = 2**64
        self._max_seq = -1
        self._head_length = 0
        self._head_crc = 0
        self._offsets: list[int] = []
        self._lengths: list[int] = []
        self._rows: list[int] = []
        self._crcs: list[int] = []
        self._first_keys: list[bytes] = []
        self._last_keys: list[bytes] = []
        self._key_arrays: list[pa.Array] = []  # for the bloom filter, built once the key count is known

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Validate ``batch`` against the rows before it and queue its rows for blocks."""
        batch = _conform(batch)
        n = batch.num_rows
        if n == 0:
            return
        where = f"rows_or_batches: rows {self.rows_seen}..{self.rows_seen + n - 1}"
        problem = row_problem(batch)
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
        bad = first_disorder(batch)
        keys, seqs = batch.column(0), batch.column(1)
        first = (keys[0].as_py(), seqs[0].as_py())
        if bad is None and self._last is not None and not _strictly_after(first, self._last):
            self._raise_disorder(self.rows_seen, self._last, first)
        if bad is not None:
            prev = (keys[bad - 1].as_py(), seqs[bad - 1].as_py())
            self._raise_disorder(self.rows_seen + bad, prev, (keys[bad].as_py(), seqs[bad].as_py()))
        repeats = pc.sum(pc.equal(keys.slice(1), keys.slice(0, n - 1))).as_py() or 0
        self._key_count += n - repeats - (1 if self._last is not None and self._last[0] == first[0] else 0)
        self._delete_count += pc.sum(pc.equal(batch.column(2), DELETE)).as_py() or 0
        seq_bounds = pc.min_max(seqs).as_py()
        self._min_seq = min(self._min_seq, seq_bounds["min"])
        self._max_seq = max(self._max_seq, seq_bounds["max"])
        self._last = (keys[n - 1].as_py(), seqs[n - 1].as_py())
        self.rows_seen += n
        self._cut_blocks(batch)

    @staticmethod
    def _raise_disorder(row: int, prev: tuple[bytes, int], cur: tuple[bytes, int]) -> None:
        if prev == cur:
            raise ValueError(f"rows_or_batches: row {row} repeats (key={cur[0]!r}, seq={cur[1]})")
        raise ValueError(
            f"rows_or_batches is not sorted: row {row} (key={cur[0]!r}, seq={cur[1]}) must come after "
            f"(key={prev[0]!r}, seq={prev[1]}); order is key ascending, then seq descending"
        )

    def _cut_blocks(self, batch: pa.RecordBatch) -> None:
        """Append ``batch``'s rows to the pending block, emitting each block once it is full."""
        sizes = pc.add(
            pc.add(
                pc.binary_length(batch.column(0)).cast(pa.int64()),
                pc.fill_null(pc.binary_length(batch.column(3)), 0).cast(pa.int64()),
            ),
            ROW_OVERHEAD_BYTES,
        )
        cumulative = pc.cumulative_sum(sizes).to_pylist()  # cumulative[i] = bytes of rows 0..i
        n = len(cumulative)
        pos, consumed = 0, 0  # rows of `batch` emitted so far, and their bytes
        while pos < n:
            # The block is full after the first row that brings it to block_size.
            end = bisect_left(cumulative, consumed + self._block_size - self._pending_bytes, pos) + 1
            if end > n:
                self._pending.append(batch.slice(pos))
                self._pending_bytes += cumulative[-1] - consumed
                return
            self._pending.append(batch.slice(pos, end - pos))
            self._emit_block()
            pos, consumed = end, cumulative[end - 1]

    def _emit_block(self) -> None:
        pieces, self._pending, self._pending_bytes = self._pending, [], 0
        block = pieces[0] if len(pieces) == 1 else pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]
        sink = self._sink
        start, first_chunk = sink.position, len(sink.chunks)
        sink.region_crc = 0
        self._writer.write_batch(block)
        self._stream.flush()
        end, crc = sink.position, sink.region_crc
        if not self._offsets:
            # pyarrow writes the magic and schema lazily, together with the
            # first batch: split that write into head and block 0.
            written = b"".join(sink.chunks[first_chunk:])
            start = self._head_length = _head_length(written)
            self._head_crc = crc32c(written[:start])
            crc = crc32c(written[start:])
        keys = block.column(0)
        self._offsets.append(start)
        self._lengths.append(end - start)
        self._rows.append(block.num_rows)
        self._crcs.append(crc)
        self._first_keys.append(keys[0].as_py())
        self._last_keys.append(keys[len(keys) - 1].as_py())
        self._key_arrays.append(keys)

    def finish(self, path: str) -> tuple[bytes, SSTInfo]:
        """Flush the last block, write the meta block and footer; return the bytes and info."""
        if self._pending:
            self._emit_block()
        if not self._offsets:
            raise ValueError("rows_or_batches is empty: an SST holds at least one row")
        bloom = BloomFilter.build(self._key_arrays, self._key_count, self._bits_per_key)
        data_end, meta_chunk = self._sink.position, len(self._sink.chunks)
        # size and tail_size are unknown until the tail is written; the meta
        # stores data_end instead and the reader derives both from the file size.
        meta = SSTMeta(
            info=self._info(path, size=0, tail_size=0),
            block_size=self._block_size,
            head_length=self._head_length,
            head_crc32c=self._head_crc,
            offsets=tuple(self._offsets),
            lengths=tuple(self._lengths),
            rows=tuple(self._rows),
            crcs=tuple(self._crcs),
            first_keys=tuple(self._first_keys),
            last_keys=tuple(self._last_keys),
            bloom=bloom,
            bits_per_key=self._bits_per_key,
        )
        self._writer.write_batch(_META_BATCH, custom_metadata=encode_meta(meta, data_end))
        self._writer.close()
        self._stream.close()
        chunks = self._sink.chunks
        tail = bytearray(b"".join(chunks[meta_chunk:]))
        crc, _zero = tail_crc(bytes(tail), path)
        slot = tail.index(TAIL_CRC_PREFIX) + len(TAIL_CRC_PREFIX)
        tail[slot : slot + len(TAIL_CRC_ZERO)] = b"%08x" % crc
        del chunks[meta_chunk:]
        chunks.append(bytes(tail))
        data = b"".join(chunks)
        size = len(data)
        self._check_arrow_blocks(data, data_end, path)
        return data, self._info(path, size=size, tail_size=size - data_end)

    def _info(self, path: str, *, size: int, tail_size: int) -> SSTInfo:
        return SSTInfo(
            path=path,
            size=size,
            row_count=self.rows_seen,
            key_count=self._key_count,
            delete_count=self._delete_count,
            min_key=self._first_keys[0],
            max_key=self._last_keys[-1],
            min_seq=self._min_seq,
            max_seq=self._max_seq,
            block_count=len(self._offsets),
            tail_size=tail_size,
        )

    def _check_arrow_blocks(self, data: bytes, data_end: int, path: str) -> None:
        """Guard against a pyarrow whose file layout differs from what the index claims."""
        length = footer_length(data[-TRAILER_SIZE:], len(data), path)
        arrow_blocks = parse_footer_blocks(data[len(data) - TRAILER_SIZE - length : -TRAILER_SIZE], path)
        ours = list(zip(self._offsets, self._lengths, strict=True))
        if arrow_blocks[:-1] != ours or arrow_blocks[-1][0] != data_end or not data.startswith(HEAD_MAGIC):
            raise RuntimeError(f"{path}: pyarrow wrote an unexpected IPC file layout; the SST index would be wrong")


class _ChecksummingSink:
    """Write target for pyarrow's IPC writer: keeps what was written, in chunks,
    and the CRC32C of everything written since ``region_crc`` was last reset.

    Checksumming while writing reads each chunk while it is still in the CPU
    cache; the chunks are joined once, at the end.
    """

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.position = 0
        self.region_crc = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        chunk = bytes(data)  # pyarrow may reuse its buffer after the call
        self.chunks.append(chunk)
        self.region_crc = crc32c(chunk, self.region_crc)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        """Nothing is buffered."""

    def close(self) -> None:
        self.closed = True


def _strictly_after(row: tuple[bytes, int], prev: tuple[bytes, int]) -> bool:
    """Whether ``row`` sorts after ``prev`` in (key ascending, seq descending)."""
    return row[0] > prev[0] or (row[0] == prev[0] and row[1] < prev[1])


def _head_length(written: bytes) -> int:
    """Bytes of magic + schema message at the start of an Arrow IPC file."""
    # Message framing: 0xFFFFFFFF continuation, int32 flatbuffer length, the
    # (8-aligned) flatbuffer; a schema message has no body.
    if written[: len(HEAD_MAGIC)] != HEAD_MAGIC or written[8:12] != b"\xff\xff\xff\xff":
        raise RuntimeError("pyarrow did not start the IPC file with magic + schema message")
    return len(HEAD_MAGIC) + 8 + int.from_bytes(written[12:16], "little")
