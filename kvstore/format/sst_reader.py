"""SST reader: open with one or two range reads, then one range GET per block.

``open`` reads the file's tail (meta block + Arrow footer), verifies its CRC
and decodes the block index and bloom filter. Point reads then consult the
bloom filter and fetch one block; scans fetch blocks in order. Every block is
CRC-checked before it is parsed, and any inconsistency raises
:class:`CorruptionError` naming the file and block; data that failed a check
is never returned. Layout: :mod:`kvstore.format.sst_format`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any, Final, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from kvstore.cache import BlockCache
from kvstore.errors import CorruptionError
from kvstore.format.checksum import crc32c
from kvstore.format.block_view import (
    BLOCK_OVERHEAD_BYTES,
    IMPLEMENTATION,
    KEY_HEAD_BYTES,
    NOT_HERE,
    BlockView,
    PyBlockView,
    compiled,
    decoded_bytes,
)
from kvstore.format.rows import MAX_SEQ, Row
from kvstore.format.sst_format import (
    HEAD_MAGIC,
    PARSE_ERRORS,
    SCHEMA_MESSAGE,
    TRAILER_SIZE,
    SSTInfo,
    SSTMeta,
    decode_block,
    decode_meta,
    footer_length,
    parse_footer_blocks,
    tail_crc,
)
from kvstore.format.sst_verify import verify_file
from kvstore.objstore.base import ObjectStore, validate_path

# Size of the first tail read. The tail is ~1.7 bytes per key (the base64
# bloom filter) plus ~110 bytes per block, so files up to ~35k keys open in one
# read and larger ones in two (or one, given SSTInfo.tail_size).
TAIL_GUESS: Final = 64 * 1024
# The first read also grows with the file: the Arrow footer (24 bytes per
# block) then always fits when blocks average >= 24 KiB, which keeps open at
# two reads; smaller blocks may need a third read for a huge footer.
TAIL_GUESS_FRACTION: Final = 1024
# Cache charge per byte of the tail: the decoded index and bloom filter.
_META_CHARGE: Final = 2


class SSTReader:
    """Reads one SST; use :meth:`open` (the constructor is internal).

    Thread-safe: after ``open`` the only mutable state is a "head verified"
    flag whose races are benign (the head is at worst verified twice), and the
    cache has its own lock. Rows come out as :data:`Row` tuples; ``kind`` and
    ``expire_at_ms`` are the caller's to interpret.

    Blocks are cached in their compact form (:mod:`kvstore.format.block_view`:
    the Arrow batch as decoded, charged the bytes it holds), and point reads search them in
    place, in compiled code when ``cython_ext._pointget`` is built.
    """

    __slots__ = ("_block_type", "_cache", "_head_verified", "_meta", "_path", "_probe", "_store", "_url")

    def __init__(
        self, store: ObjectStore, path: str, meta: SSTMeta, cache: BlockCache | None, implementation: str
    ) -> None:
        self._store = store
        self._path = path
        self._meta = meta
        self._cache = cache
        self._url = store.url
        self._head_verified = False
        if implementation == "cython" and compiled is not None:
            self._block_type = BlockView
            # Read by cython_ext._pointget.get_row (the store's point get) too.
            self._probe = compiled.SSTProbe(meta, cache, self._url, path)
        elif implementation == "python":
            self._block_type, self._probe = PyBlockView, None
        else:
            raise ValueError(f"implementation must be 'cython' (if built) or 'python', got {implementation!r}")

    @classmethod
    def open(
        cls,
        store: ObjectStore,
        path: str,
        *,
        cache: BlockCache | None = None,
        size: int | None = None,
        tail_size: int | None = None,
        implementation: str = IMPLEMENTATION,
    ) -> SSTReader:
        """Open the SST at ``path``: one or two range reads, none if its footer is cached.

        Args:
            store: the object store holding the file.
            path: the file's object path.
            cache: shared block cache for the footer and blocks; None = no caching.
            size: the file size if known (from the manifest); saves a ``head`` call.
            tail_size: ``SSTInfo.tail_size`` if known; makes the open one range read.
            implementation: ``"cython"`` (the default when built) or ``"python"``,
                the pure-Python reference the tests compare it with. Readers
                of both kinds must not share a cache.

        Raises:
            FileNotFoundError: no such file.
            CorruptionError: the tail fails its checksum or does not decode, or
                ``size`` disagrees with the file.
            TypeError, ValueError: bad arguments.
        """
        validate_path(path)
        if implementation not in ("cython", "python"):
            raise ValueError(f"implementation must be 'cython' (if built) or 'python', got {implementation!r}")
        for name, value in (("size", size), ("tail_size", tail_size)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"{name} must be int or None, not {type(value).__name__}")
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        key = (store.url, path)
        meta = cache.get(key) if cache is not None else None
        if meta is None:
            meta = _read_meta(store, path, store.head(path).size if size is None else size, tail_size)
            if cache is not None:
                cache.put(key, meta, meta.info.tail_size * _META_CHARGE)
        elif size is not None and size != meta.info.size:
            raise CorruptionError(f"{path}: expected {size} bytes, but the file has {meta.info.size}")
        return cls(store, path, meta, cache, implementation)

    @property
    def info(self) -> SSTInfo:
        """Statistics of the file (what the manifest stores)."""
        return self._meta.info

    @property
    def meta(self) -> SSTMeta:
        """The decoded tail: block index, bloom filter, head checksum (for tools and tests)."""
        return self._meta

    def may_contain(self, key: bytes) -> bool:
        """False if ``key`` is certainly not in the file (bloom filter and key range); no I/O.

        Raises:
            TypeError: ``key`` is not bytes.
        """
        _check_key(key, "key")
        info = self._meta.info
        return info.min_key <= key <= info.max_key and self._meta.bloom.may_contain(key)

    def get(self, key: bytes, snapshot_seq: int = MAX_SEQ) -> Row | None:
        """The newest row of ``key`` with ``seq <= snapshot_seq``, or None.

        DELETE rows and expired rows are returned like any other: the caller
        interprets ``kind`` and ``expire_at_ms``. Costs no I/O when the bloom
        filter rules the key out, otherwise one block read (two only when the
        key's versions straddle a block boundary and the newest visible one
        is in the second block).

        Raises:
            TypeError, ValueError: bad ``key`` or ``snapshot_seq``.
            CorruptionError: a block the read touched is corrupt.
        """
        _check_key(key, "key")
        _check_seq(snapshot_seq)
        if self._probe is not None:
            return self._probe.get(self, key, snapshot_seq)  # type: ignore[no-any-return]
        meta = self._meta
        if not self.may_contain(key) or snapshot_seq < meta.info.min_seq:
            return None
        first_keys, n = meta.first_keys, meta.info.block_count
        b = bisect_left(meta.last_keys, key)  # first block that can hold key
        while b < n and first_keys[b] <= key:
            block = self._block(b)
            i = block.find(key, snapshot_seq)
            if i >= 0:
                return block.row(i)  # type: ignore[no-any-return]
            if i == NOT_HERE:  # a larger key follows: no older version remains
                return None
            b += 1  # the key's older versions continue in the next block
        return None

    def _nothing_in(self, start: bytes | None, end: bytes | None, snapshot_seq: int) -> bool:
        """Check a range's arguments; True when this file cannot hold a row of it."""
        _check_key(start, "start", optional=True)
        _check_key(end, "end", optional=True)
        _check_seq(snapshot_seq)
        return snapshot_seq < self._meta.info.min_seq or (start is not None and end is not None and start >= end)

    def iter(
        self, start: bytes | None = None, end: bytes | None = None, snapshot_seq: int = MAX_SEQ, reverse: bool = False
    ) -> Iterator[Row]:
        """Every row with ``start <= key < end`` and ``seq <= snapshot_seq``.

        Forward order is key ascending, seq descending. Reverse order is key
        DESCENDING but, within one key, still seq descending (newest first),
        which is what the merge iterator expects. Blocks are read lazily, one
        range GET each.

        Raises:
            TypeError, ValueError: bad bounds or ``snapshot_seq`` (at call time).
            CorruptionError: while iterating, a block is corrupt.
        """
        if not isinstance(reverse, bool):
            raise TypeError(f"reverse must be bool, not {type(reverse).__name__}")
        if self._nothing_in(start, end, snapshot_seq):
            return iter(())
        if reverse:
            return self._iter_reverse(start, end, snapshot_seq)
        return self._iter_forward(start, end, snapshot_seq)

    def iter_batches(
        self, start: bytes | None = None, end: bytes | None = None, snapshot_seq: int = MAX_SEQ
    ) -> Iterator[pa.RecordBatch]:
        """The rows of :meth:`iter` (forward) as ROW_SCHEMA batches, at most one per block.

        Raises:
            TypeError, ValueError: bad bounds or ``snapshot_seq`` (at call time).
            CorruptionError: while iterating, a block is corrupt.
        """
        if self._nothing_in(start, end, snapshot_seq):
            return iter(())
        return self._iter_batches(start, end, snapshot_seq)

    def iter_segments(
        self, start: bytes | None = None, end: bytes | None = None, snapshot_seq: int = MAX_SEQ
    ) -> Iterator[tuple[Any, int, int]]:
        """``(block, lo, hi)`` for each block holding keys in ``[start, end)``, in order.

        ``block`` is the cached :data:`BlockView`; rows ``lo..hi-1`` are in
        range. Rows are not filtered by ``snapshot_seq`` (only a file with no
        row at or below it is skipped): the scan merge does that as it reads.

        Raises:
            TypeError, ValueError: bad bounds or ``snapshot_seq`` (at call time).
            CorruptionError: while iterating, a block is corrupt.
        """
        if self._nothing_in(start, end, snapshot_seq):
            return iter(())
        return self._iter_segments(start, end)

    def _iter_segments(self, start: bytes | None, end: bytes | None) -> Iterator[tuple[Any, int, int]]:
        for b in self._block_range(start, end):
            block = self._block(b)
            lo, hi = self._bounds(b, block, start, end)
            yield block, lo, hi

    def check_invariants(self) -> None:
        """Read the whole file and verify every checksum, the index, order and bloom filter.

        Raises:
            CorruptionError: any check fails (the message names file and block).
        """
        data = self._store.get(self._path)
        if len(data) != self._meta.info.size:
            raise CorruptionError(f"{self._path}: file has {len(data)} bytes, expected {self._meta.info.size}")
        if _read_meta(_BytesSource(data), self._path, len(data), None) != self._meta:
            raise CorruptionError(f"{self._path}: the file's metadata changed since it was opened")
        verify_file(data, self._meta, self._path)

    # -- internals -----------------------------------------------------------

    def _bounds(self, b: int, block: Any, start: bytes | None, end: bytes | None) -> tuple[int, int]:
        """Row range ``[lo, hi)`` of block ``b`` inside ``[start, end)``."""
        meta = self._meta
        lo = 0 if start is None or meta.first_keys[b] >= start else block.lower_bound(start)
        hi = meta.rows[b] if end is None or meta.last_keys[b] < end else block.lower_bound(end, lo)
        return lo, hi

    def _block_range(self, start: bytes | None, end: bytes | None) -> range:
        """Blocks that may hold keys in ``[start, end)``, in file order."""
        meta = self._meta
        first = 0 if start is None else bisect_left(meta.last_keys, start)
        stop = meta.info.block_count if end is None else bisect_left(meta.first_keys, end)
        return range(first, stop)

    def _iter_forward(self, start: bytes | None, end: bytes | None, snapshot_seq: int) -> Iterator[Row]:
        limit = snapshot_seq if snapshot_seq < self._meta.info.max_seq else None
        for b in self._block_range(start, end):
            block = self._block(b)
            lo, hi = self._bounds(b, block, start, end)
            yield from block.rows(lo, hi, limit)

    def _iter_reverse(self, start: bytes | None, end: bytes | None, snapshot_seq: int) -> Iterator[Row]:
        last_keys = self._meta.last_keys
        # Versions of the key being assembled, from later blocks, in file order:
        # a key's versions may straddle blocks, and must come out newest first.
        carry: list[Row] = []
        for b in reversed(self._block_range(start, end)):
            block = self._block(b)
            lo, hi = self._bounds(b, block, start, end)
            rows = block.rows(lo, hi)
            keys = [row[0] for row in rows]
            j = len(rows)
            while j > 0:
                key = keys[j - 1]
                i = bisect_left(keys, key, 0, j)
                group = rows[i:j]
                if carry and carry[0][0] == key:
                    group.extend(carry)
                elif carry:
                    yield from (row for row in carry if row[1] <= snapshot_seq)
                carry = []
                if i == 0 and lo == 0 and b > 0 and last_keys[b - 1] == key:
                    carry = group  # newer versions of this key end the previous block
                else:
                    yield from (row for row in group if row[1] <= snapshot_seq)
                j = i
        yield from (row for row in carry if row[1] <= snapshot_seq)

    def _iter_batches(self, start: bytes | None, end: bytes | None, snapshot_seq: int) -> Iterator[pa.RecordBatch]:
        filtered = snapshot_seq < self._meta.info.max_seq
        limit = pa.scalar(snapshot_seq, pa.uint64())
        for b in self._block_range(start, end):
            block = self._block(b)
            lo, hi = self._bounds(b, block, start, end)
            batch = block.batch if lo == 0 and hi == block.batch.num_rows else block.batch.slice(lo, hi - lo)
            if filtered:
                batch = batch.filter(pc.less_equal(batch.column(1), limit))
            if batch.num_rows:
                yield batch

    def _block(self, b: int) -> Any:
        """Block ``b`` as a :data:`BlockView`, from the cache or read by :meth:`_load_block`."""
        cache = self._cache
        if cache is not None:
            block = cache.get((self._url, self._path, b))
            if block is not None:
                return block
        return self._load_block(b)

    def _load_block(self, b: int) -> Any:
        """Read block ``b`` with one range GET, CRC-check and decode it, and cache it.

        Also called by ``cython_ext._pointget`` after its own cache miss.
        """
        meta, path = self._meta, self._path
        offset, length = meta.offsets[b], meta.lengths[b]
        # Block 0 is fetched together with the head (magic + schema, a few
        # hundred bytes) so that the first full scan also verifies the head.
        with_head = b == 0 and not self._head_verified
        start = 0 if with_head else offset
        data = self._store.get_range(path, start, offset + length)
        if len(data) != offset + length - start:
            raise CorruptionError(f"{path}: block {b}: file ends early (short read of {len(data)} bytes)")
        view = memoryview(data)
        if with_head:
            if crc32c(view[: meta.head_length]) != meta.head_crc32c:
                raise CorruptionError(f"{path}: file head (magic + schema, bytes 0..{meta.head_length}) failed CRC32C")
            self._head_verified = True
        body = view[offset - start :]
        if crc32c(body) != meta.crcs[b]:
            raise CorruptionError(f"{path}: block {b} (bytes {offset}..{offset + length}) failed its CRC32C check")
        batch = decode_block(body, path, b, meta.rows[b])
        # What the batch holds (``data`` itself when uncompressed, its
        # decompressed buffers otherwise) is what the block costs, plus its
        # objects and the compiled view's key heads.
        nbytes = decoded_bytes(batch, pa.py_buffer(data)) + BLOCK_OVERHEAD_BYTES + KEY_HEAD_BYTES * meta.rows[b]
        try:
            block = self._block_type(batch, nbytes)
        except ValueError as exc:
            raise CorruptionError(f"{path}: block {b}: {exc}") from exc
        if self._cache is not None:
            self._cache.put((self._url, path, b), block, nbytes)
        return block


class _RangeReader(Protocol):
    """The one ObjectStore primitive opening needs (also served from memory by _BytesSource)."""

    def get_range(self, path: str, start: int, end: int) -> bytes: ...


def _read_meta(store: _RangeReader, path: str, size: int, tail_size: int | None) -> SSTMeta:
    """Read, verify and decode the tail ``[data_end, size)``: one or two range reads (three for a huge footer)."""
    if size < len(HEAD_MAGIC) + TRAILER_SIZE:
        raise CorruptionError(f"{path}: {size} bytes is too small for an SST")
    tail_start = max(0, size - max(TAIL_GUESS + size // TAIL_GUESS_FRACTION, tail_size or 0))
    tail = store.get_range(path, tail_start, size)
    if len(tail) != size - tail_start:
        raise CorruptionError(f"{path}: file is shorter than its expected {size} bytes")
    footer_start = size - TRAILER_SIZE - footer_length(tail[-TRAILER_SIZE:], size, path)
    if footer_start < tail_start:  # a huge Arrow footer (many thousands of blocks)
        tail = store.get_range(path, footer_start, tail_start) + tail
        tail_start = footer_start
    blocks = parse_footer_blocks(tail[footer_start - tail_start : -TRAILER_SIZE], path)
    if len(blocks) < 2:
        raise CorruptionError(f"{path}: Arrow footer lists {len(blocks)} record batches; an SST has at least 2")
    data_end, meta_length = blocks[-1]
    if not 0 < data_end < footer_start or data_end + meta_length > footer_start:
        raise CorruptionError(f"{path}: meta block at {data_end}+{meta_length} does not fit before the footer")
    if data_end < tail_start:
        tail = store.get_range(path, data_end, tail_start) + tail
        tail_start = data_end
    tail = tail[data_end - tail_start :]
    computed, stored = tail_crc(tail, path)
    if computed != stored:
        raise CorruptionError(f"{path}: tail (meta block + footer, bytes {data_end}..{size}) failed its CRC32C check")
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(SCHEMA_MESSAGE + tail[:meta_length]))
        empty, custom = reader.read_next_batch_with_custom_metadata()
    except PARSE_ERRORS as exc:
        raise CorruptionError(f"{path}: meta block does not decode: {exc}") from exc
    if empty.num_rows != 0 or custom is None:
        raise CorruptionError(f"{path}: meta block has rows or no metadata")
    meta = decode_meta(dict(custom), path, size)
    if meta.info.tail_size != size - data_end or list(zip(meta.offsets, meta.lengths, strict=True)) != blocks[:-1]:
        raise CorruptionError(f"{path}: block index disagrees with the Arrow footer")
    return meta


class _BytesSource:
    """Serves ``get_range`` from bytes in memory, so the open path can re-read a downloaded file."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._data[start:end]


def _check_key(value: object, name: str, *, optional: bool = False) -> None:
    if not isinstance(value, bytes) and not (optional and value is None):
        raise TypeError(f"{name} must be bytes{' or None' if optional else ''}, not {type(value).__name__}")


def _check_seq(value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"snapshot_seq must be int, not {type(value).__name__}")
    if not 0 <= value <= MAX_SEQ:
        raise ValueError(f"snapshot_seq must be in 0..{MAX_SEQ}, got {value}")
