"""SST byte layout, shared by the writer and the reader (full spec: FORMAT.md).

An SST is an Apache Arrow IPC *file* (any Arrow library opens it; its record
batches are the data blocks, in key order, plus one empty "meta" batch at the
end). Integers are little-endian. Layout, with the checksum covering each
region::

    offset        bytes                                          checksum
    0             "ARROW1\\0\\0"                                   head_crc32c
    8             schema message (ROW_SCHEMA + tiny metadata)    head_crc32c
    head_length   data block 0: one record-batch message         crc32c[0]
    offset[i]     data block i (contiguous, no gaps)              crc32c[i]
    data_end      meta block: 0-row record batch whose           tail CRC
                  Message.custom_metadata holds the index,
                  bloom filter and statistics (below)
                  EOS marker FF FF FF FF 00 00 00 00             tail CRC
                  Arrow footer flatbuffer                        tail CRC
    size - 10     int32 length of the Arrow footer               tail CRC
    size - 6      "ARROW1"                                       tail CRC

Every byte belongs to exactly one region: head ``[0, head_length)``, block i
``[offset[i], offset[i] + length[i])`` with ``offset[0] = head_length`` and
``offset[i+1] = offset[i] + length[i]``, tail ``[data_end, size)``. CRC32C
detects every change of up to 32 consecutive bits, so any single corrupted
byte is always caught.

Meta-block custom metadata (UTF-8 keys and values):

* ``lakekv.sst.meta``: JSON object: ``format_version``, ``row_count``,
  ``key_count`` (distinct keys), ``delete_count``, ``min_key``/``max_key``
  (base64), ``min_seq``/``max_seq`` (exact integers, may exceed 2**53),
  ``block_size`` (the writer's target), ``head_length``, ``head_crc32c``,
  ``data_end``, ``bloom`` = {``hash``, ``num_bits``, ``num_hashes``,
  ``bits_per_key``}.
* ``lakekv.sst.index``: JSON object of equal-length arrays, one entry per
  data block: ``offset``, ``length``, ``rows``, ``crc32c`` and ``first_key``/
  ``last_key`` (base64).
* ``lakekv.sst.bloom``: base64 of the filter bits (see :mod:`.bloom`).
* ``lakekv.sst.tail_crc32c``: ``"lakekv-crc:"`` + 8 lowercase hex digits, the
  CRC32C of ``[data_end, size)`` computed with those 8 digits set to ``"0"``.
  The writer patches them in place; the prefix makes the slot findable.

A reader finds the meta block as the last entry of the Arrow footer's
``recordBatches`` vector (:func:`parse_footer_blocks`).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass, fields
from typing import Any, Final

import pyarrow as pa

from kvstore.errors import CorruptionError
from kvstore.format.bloom import HASH_NAME, BloomFilter
from kvstore.format.checksum import crc32c
from kvstore.format.rows import ROW_SCHEMA

FORMAT_VERSION: Final = 1
# 128 KiB blocks (before compression): one range GET per point read costs
# about the same as 4 KiB on object storage (latency-bound), fewer blocks keep
# the index small, and a compressed block's fixed cost (its Arrow message and
# one compression frame per buffer, ~600 bytes) stays under 0.5 %: at 64 KiB
# a W1 L0 SST took 1.034 bytes per logical byte, at 128 KiB 1.025.
DEFAULT_BLOCK_SIZE: Final = 128 * 1024
DEFAULT_BLOOM_BITS_PER_KEY: Final = 10  # ~0.8 % false positives
# Codec of a data block's Arrow buffers (the store option ``sst_compression``)
# -> pyarrow's IPC codec name: Arrow's BodyCompression with LZ4_FRAME or ZSTD,
# or no compression. Any Arrow reader with the codec built in reads the file.
SST_COMPRESSIONS: Final[dict[str, str | None]] = {"lz4": "lz4", "zstd": "zstd", "none": None}
DEFAULT_SST_COMPRESSION: Final = "lz4"

ARROW_MAGIC: Final = b"ARROW1"
# Magic, then 2 bytes of padding so the first message starts 8-aligned.
HEAD_MAGIC: Final = b"ARROW1\x00\x00"
# int32 footer length + magic after the Arrow footer.
TRAILER_SIZE: Final = 10
FILE_SCHEMA: Final = ROW_SCHEMA.with_metadata({"lakekv.file": "sst", "lakekv.format_version": str(FORMAT_VERSION)})
# The row schema as an IPC schema message: prefixed to the meta block's bytes,
# it lets pyarrow's stream reader decode the block's custom metadata.
SCHEMA_MESSAGE: Final = ROW_SCHEMA.serialize().to_pybytes()

# What pyarrow raises on bytes it cannot parse; always reported as
# CorruptionError. Behind a passed CRC only a writer bug could trigger them.
PARSE_ERRORS: Final = (pa.ArrowException, ValueError, TypeError, IndexError, KeyError, OSError, EOFError)

KEY_META: Final = b"lakekv.sst.meta"
KEY_INDEX: Final = b"lakekv.sst.index"
KEY_BLOOM: Final = b"lakekv.sst.bloom"
KEY_TAIL_CRC: Final = b"lakekv.sst.tail_crc32c"
TAIL_CRC_PREFIX: Final = b"lakekv-crc:"
TAIL_CRC_ZERO: Final = b"00000000"
_HEX_DIGITS: Final = b"0123456789abcdef"

# Arrow's `struct Block {offset: long; metaDataLength: int; bodyLength: long}`.
_FOOTER_BLOCK: Final = struct.Struct("<qi4xq")
_RECORD_BATCHES_FIELD: Final = 3  # field id of Footer.recordBatches in Arrow's File.fbs
_MESSAGE_HEADER_FIELD: Final = 2  # Message.header in Arrow's Message.fbs
_RECORD_BATCH_COMPRESSION_FIELD: Final = 3  # RecordBatch.compression in Message.fbs
_READ_OPTIONS: Final = pa.ipc.IpcReadOptions(use_threads=False)


@dataclass(frozen=True)
class SSTInfo:
    """What the engine keeps about an SST in its tree manifest (JSON via ``to_dict``).

    Attributes:
        path: object path inside the store.
        size: file size in bytes.
        row_count: rows (versions), tombstones included.
        key_count: distinct user keys.
        delete_count: DELETE rows (tombstones).
        min_key, max_key: smallest and largest user key.
        min_seq, max_seq: smallest and largest seq of any row.
        block_count: data blocks.
        tail_size: bytes from the meta block to the end of the file; passing it
            to ``SSTReader.open`` makes opening exactly one range read.
        format_version: SST format version the file was written with.
    """

    path: str
    size: int
    row_count: int
    key_count: int
    delete_count: int
    min_key: bytes
    max_key: bytes
    min_seq: int
    max_seq: int
    block_count: int
    tail_size: int
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; keys are base64 strings."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["min_key"] = base64.b64encode(self.min_key).decode("ascii")
        out["max_key"] = base64.b64encode(self.max_key).decode("ascii")
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SSTInfo:
        """Inverse of :meth:`to_dict`.

        Raises:
            TypeError: ``data`` is not a dict.
            ValueError: a field is missing, unknown or of the wrong type.
        """
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict, not {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        if set(data) - names or names - set(data) - {"format_version"}:
            raise ValueError(f"data must have exactly the SSTInfo fields {sorted(names)}, got {sorted(data)}")
        values = dict(data)
        try:
            values["min_key"] = base64.b64decode(data["min_key"], validate=True)
            values["max_key"] = base64.b64decode(data["max_key"], validate=True)
        except (binascii.Error, TypeError) as exc:
            raise ValueError(f"data['min_key'/'max_key'] must be base64 strings: {exc}") from exc
        if not isinstance(values["path"], str):
            raise ValueError(f"data['path'] must be a str, got {values['path']!r}")
        for name in names - {"path", "min_key", "max_key"}:
            if name in values and (not isinstance(values[name], int) or isinstance(values[name], bool)):
                raise ValueError(f"data[{name!r}] must be an int, got {values[name]!r}")
        return cls(**values)


@dataclass(frozen=True)
class SSTMeta:
    """The decoded meta block of one SST: immutable, shared through the block cache.

    Attributes:
        info: the statistics the manifest keeps.
        block_size: the writer's target block size.
        head_length, head_crc32c: size and CRC32C of magic + schema message.
        offsets, lengths, rows, crcs, first_keys, last_keys: the block index,
            one entry per data block, in key order.
        bloom: the filter over the file's distinct keys.
        bits_per_key: the writer's bloom setting.
    """

    info: SSTInfo
    block_size: int
    head_length: int
    head_crc32c: int
    offsets: tuple[int, ...]
    lengths: tuple[int, ...]
    rows: tuple[int, ...]
    crcs: tuple[int, ...]
    first_keys: tuple[bytes, ...]
    last_keys: tuple[bytes, ...]
    bloom: BloomFilter
    bits_per_key: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode_meta(meta: SSTMeta, data_end: int) -> dict[bytes, bytes]:
    """The meta block's custom metadata; the tail-CRC slot is left zeroed.

    ``meta.info.size`` and ``tail_size`` are ignored (the writer cannot know
    them yet); ``data_end`` is stored instead.
    """
    info, bloom = meta.info, meta.bloom
    stats = {
        "format_version": info.format_version,
        "row_count": info.row_count,
        "key_count": info.key_count,
        "delete_count": info.delete_count,
        "min_key": _b64(info.min_key),
        "max_key": _b64(info.max_key),
        "min_seq": info.min_seq,
        "max_seq": info.max_seq,
        "block_size": meta.block_size,
        "head_length": meta.head_length,
        "head_crc32c": meta.head_crc32c,
        "data_end": data_end,
        "bloom": {
            "hash": HASH_NAME,
            "num_bits": bloom.num_bits,
            "num_hashes": bloom.num_hashes,
            "bits_per_key": meta.bits_per_key,
        },
    }
    index = {
        "offset": list(meta.offsets),
        "length": list(meta.lengths),
        "rows": list(meta.rows),
        "crc32c": list(meta.crcs),
        "first_key": [_b64(k) for k in meta.first_keys],
        "last_key": [_b64(k) for k in meta.last_keys],
    }
    return {
        KEY_META: json.dumps(stats, separators=(",", ":")).encode(),
        KEY_INDEX: json.dumps(index, separators=(",", ":")).encode(),
        KEY_BLOOM: base64.b64encode(bloom.bits),
        KEY_TAIL_CRC: TAIL_CRC_PREFIX + TAIL_CRC_ZERO,
    }


def decode_meta(custom: dict[bytes, bytes], path: str, size: int) -> SSTMeta:
    """Rebuild :class:`SSTMeta` from the meta block's custom metadata.

    Raises:
        CorruptionError: a field is missing, malformed or inconsistent.
    """
    try:
        stats = json.loads(custom[KEY_META])
        index = json.loads(custom[KEY_INDEX])
        bloom_cfg = stats["bloom"]
        if bloom_cfg["hash"] != HASH_NAME:
            raise ValueError(f"unknown bloom hash {bloom_cfg['hash']!r}")
        bloom = BloomFilter(
            base64.b64decode(custom[KEY_BLOOM], validate=True), bloom_cfg["num_bits"], bloom_cfg["num_hashes"]
        )
        data_end = stats["data_end"]
        info = SSTInfo(
            path=path,
            size=size,
            row_count=stats["row_count"],
            key_count=stats["key_count"],
            delete_count=stats["delete_count"],
            min_key=base64.b64decode(stats["min_key"], validate=True),
            max_key=base64.b64decode(stats["max_key"], validate=True),
            min_seq=stats["min_seq"],
            max_seq=stats["max_seq"],
            block_count=len(index["offset"]),
            tail_size=size - data_end,
            format_version=stats["format_version"],
        )
        meta = SSTMeta(
            info=info,
            block_size=stats["block_size"],
            head_length=stats["head_length"],
            head_crc32c=stats["head_crc32c"],
            offsets=tuple(index["offset"]),
            lengths=tuple(index["length"]),
            rows=tuple(index["rows"]),
            crcs=tuple(index["crc32c"]),
            first_keys=tuple(base64.b64decode(k, validate=True) for k in index["first_key"]),
            last_keys=tuple(base64.b64decode(k, validate=True) for k in index["last_key"]),
            bloom=bloom,
            bits_per_key=bloom_cfg["bits_per_key"],
        )
        _check_meta_shape(meta, path)
    except (KeyError, TypeError, ValueError) as exc:  # json, base64 and BloomFilter errors are ValueErrors
        raise CorruptionError(f"{path}: malformed SST metadata: {exc!r}") from exc
    return meta


def _check_meta_shape(meta: SSTMeta, path: str) -> None:
    """Structural checks that need no data block: contiguity, counts, key ranges."""
    info = meta.info
    n = info.block_count
    problem = None
    if info.format_version != FORMAT_VERSION:
        problem = f"unsupported format version {info.format_version}"
    elif n == 0 or not len(meta.lengths) == len(meta.rows) == len(meta.crcs) == len(meta.first_keys) == n:
        problem = "block index arrays are empty or of different lengths"
    elif len(meta.last_keys) != n or sum(meta.rows) != info.row_count or min(meta.rows) < 1:
        problem = "block row counts do not add up to row_count"
    elif meta.offsets[0] != meta.head_length or meta.head_length < len(HEAD_MAGIC) + 8:
        problem = "first block does not start right after the head"
    elif any(meta.offsets[i] + meta.lengths[i] != meta.offsets[i + 1] for i in range(n - 1)):
        problem = "data blocks are not contiguous"
    elif meta.offsets[-1] + meta.lengths[-1] != info.size - info.tail_size or info.tail_size <= TRAILER_SIZE:
        problem = "data blocks do not end where the meta block starts"
    elif meta.first_keys[0] != info.min_key or meta.last_keys[-1] != info.max_key or info.min_seq > info.max_seq:
        problem = "min/max statistics disagree with the block index"
    elif any(first > last for first, last in zip(meta.first_keys, meta.last_keys, strict=True)) or any(
        meta.last_keys[i] > meta.first_keys[i + 1] for i in range(n - 1)
    ):
        problem = "block key ranges are out of order"
    if problem is not None:
        raise CorruptionError(f"{path}: SST metadata: {problem}")


def footer_length(trailer: bytes, size: int, path: str) -> int:
    """Length of the Arrow footer, from the file's last 10 bytes.

    Raises:
        CorruptionError: no Arrow magic, or a length that does not fit the file.
    """
    if len(trailer) != TRAILER_SIZE or trailer[4:] != ARROW_MAGIC:
        raise CorruptionError(f"{path}: no Arrow file magic at the end (truncated or not an SST)")
    length: int = struct.unpack("<i", trailer[:4])[0]
    if length <= 0 or length > size - TRAILER_SIZE - len(HEAD_MAGIC):
        raise CorruptionError(f"{path}: Arrow footer length {length} does not fit a {size}-byte file")
    return length


def parse_footer_blocks(footer: bytes, path: str) -> list[tuple[int, int]]:
    """``(offset, length)`` of every record batch listed in an Arrow footer flatbuffer.

    Reads only ``Footer.recordBatches`` (a vector of 24-byte ``Block`` structs),
    with every offset bounds-checked, so garbage raises instead of crashing.

    Raises:
        CorruptionError: the flatbuffer is malformed.
    """
    size = len(footer)

    def read(fmt: str, pos: int) -> int:
        if pos < 0 or pos + struct.calcsize(fmt) > size:
            raise CorruptionError(f"{path}: Arrow footer: offset {pos} out of bounds")
        return int(struct.unpack_from(fmt, footer, pos)[0])

    table = read("<I", 0)
    vtable = table - read("<i", table)
    vtable_size = read("<H", vtable)
    slot = 4 + 2 * _RECORD_BATCHES_FIELD
    field = read("<H", vtable + slot) if vtable_size >= slot + 2 else 0
    if field == 0:
        return []
    vector = table + field + read("<I", table + field)
    count = read("<I", vector)
    if vector + 4 + count * _FOOTER_BLOCK.size > size:
        raise CorruptionError(f"{path}: Arrow footer: {count} record batches do not fit the footer")
    entries = list(_FOOTER_BLOCK.iter_unpack(footer[vector + 4 : vector + 4 + count * _FOOTER_BLOCK.size]))
    if any(min(entry) < 0 for entry in entries):
        raise CorruptionError(f"{path}: Arrow footer: negative block offset or length")
    return [(offset, meta_len + body_len) for offset, meta_len, body_len in entries]


def is_compressed(message: bytes) -> bool:
    """Whether a record-batch ``Message`` flatbuffer declares ``BodyCompression``.

    Follows ``Message.header`` (field 2) to the ``RecordBatch`` table and looks
    for its ``compression`` field (3), bounds-checked like the footer parser.

    Raises:
        ValueError: the flatbuffer is malformed.
    """
    size = len(message)

    def read(fmt: str, pos: int) -> int:
        if pos < 0 or pos + struct.calcsize(fmt) > size:
            raise ValueError(f"Arrow message: offset {pos} out of bounds")
        return int(struct.unpack_from(fmt, message, pos)[0])

    def field(table: int, field_id: int) -> int:
        """Offset of ``field_id``'s value in ``table``, or 0 when absent."""
        vtable = table - read("<i", table)
        slot = 4 + 2 * field_id
        return read("<H", vtable + slot) if read("<H", vtable) >= slot + 2 else 0

    root = read("<I", 0)
    header = field(root, _MESSAGE_HEADER_FIELD)
    if header == 0:
        return False
    batch = root + header + read("<I", root + header)
    return field(batch, _RECORD_BATCH_COMPRESSION_FIELD) != 0


def tail_crc(tail: bytes, path: str) -> tuple[int, int]:
    """``(computed, stored)`` tail CRC32C of ``tail`` = bytes ``[data_end, size)``.

    Raises:
        CorruptionError: the CRC slot is missing, duplicated or not hex.
    """
    pos = tail.find(TAIL_CRC_PREFIX)
    if pos < 0 or tail.find(TAIL_CRC_PREFIX, pos + 1) >= 0:
        raise CorruptionError(f"{path}: tail checksum slot missing or duplicated")
    digits_at = pos + len(TAIL_CRC_PREFIX)
    digits = tail[digits_at : digits_at + len(TAIL_CRC_ZERO)]
    # Exactly 8 lowercase hex digits: int() alone would also accept " 1f",
    # "+1f" or "0x1f", letting a corrupted leading "0" parse to the same value
    # (the slot itself is outside the checksum).
    if len(digits) != len(TAIL_CRC_ZERO) or digits.strip(_HEX_DIGITS):
        raise CorruptionError(f"{path}: tail checksum slot holds {digits!r}, not 8 hex digits")
    stored = int(digits, 16)
    view = memoryview(tail)
    crc = crc32c(view[:digits_at])
    crc = crc32c(TAIL_CRC_ZERO, crc)
    crc = crc32c(view[digits_at + len(TAIL_CRC_ZERO) :], crc)
    return crc, stored


def decode_block(data: memoryview | bytes, path: str, b: int, rows: int) -> pa.RecordBatch:
    """Parse one record-batch message (already CRC-checked) into a ROW_SCHEMA batch.

    An uncompressed block decodes zero-copy over ``data``; a compressed one
    into new buffers, decompressed in the calling thread (GIL released).

    Raises:
        CorruptionError: it does not parse or has the wrong row count.
    """
    try:
        message = pa.ipc.read_message(pa.py_buffer(data))
        if message.type != "record batch":
            raise ValueError(f"expected a record batch message, found a {message.type!r} message")
        if is_compressed(message.metadata.to_pybytes()):
            # read_record_batch would spread the block's buffers over Arrow's
            # thread pool, which costs more than decompressing 64 KiB here
            # (2-4x on a cache miss, measured); only a stream reader takes options.
            stream = pa.ipc.open_stream(pa.py_buffer(b"".join((SCHEMA_MESSAGE, data))), options=_READ_OPTIONS)
            batch = stream.read_next_batch()
        else:
            batch = pa.ipc.read_record_batch(message, ROW_SCHEMA)
        batch.validate(full=True)
    except PARSE_ERRORS as exc:
        raise CorruptionError(f"{path}: block {b} does not decode as an Arrow record batch: {exc}") from exc
    if batch.num_rows != rows:
        raise CorruptionError(f"{path}: block {b} has {batch.num_rows} rows, the index says {rows}")
    return batch
