"""Root files: one immutable file per version of the store — the version chain.

Layout: ``<root>/_<32-bit version, binary, bit-reversed>.ipc`` (TrinityLake's
naming: version 100 -> ``_00100110000000000000000000000000.ipc``), created with
put-if-absent. The chain of root files *is* the write-ahead log. (The
``.ipc`` suffix is kept from format 1 so that every store names its roots
alike; format 2 and 3 files are not Arrow IPC.)

Format 3 (written since issue 38; a 1,000-row bulk commit of 16-byte keys
and 100-byte values is ~0.92 bytes per key+value byte, format 2 was ~1.18)::

    "LKVROOT3"                  8 bytes of magic
    u32 H, then H bytes         header: UTF-8 JSON object, fields below
    varint N                    the number of delta rows
    u8 section flags            bit 0: every row's seq is first_seq, and the
                                rows omit it (a commit of one transaction);
                                bits 1-7: 0
    N rows, in storage order (key ascending, then seq descending), each:
        u8 lead                 under 0x80: a PUT with a value and no expiry
                                whose key shares ``lead`` bytes with the
                                previous row's key; else 0x80 | flags, with
                                flags bits 0-1: kind, 1 = PUT, 2 = DELETE
                                (stored: never renumber), bit 2: the value is
                                null (a DELETE), bit 3: an expiry follows,
                                bits 4-6: 0; then
          varint shared         the bytes shared with the previous row's key
        varint S, S bytes       the rest of the key (the shared length is
                                always the longest common prefix; 0 for the
                                first row)
        varint seq - first_seq  unless section bit 0 is set
        varint V, V bytes       the value, unless it is null
        varint zigzag(expire_at_ms)   only when flags bit 3 is set
    u32 CRC32C                  of every byte before it

A varint is unsigned LEB128 (7 bits a byte, least significant first, the high
bit set on every byte but the last), at most 10 bytes and 64 bits. zigzag
maps an int64 ``e`` to the uint64 ``(e << 1) ^ (e >> 63)``.

Format 2 (issue 14 to 38; a one-key put is ~300 bytes, format 1 was ~2 KB,
mostly the Arrow schema written twice) has the same magic-header-CRC frame
with magic ``"LKVROOT2"`` and fixed-width rows (integers little-endian)::

    u32 N, then N rows, each:
        u32 key length, key bytes
        u32 seq - first_seq
        u8  kind                1 = PUT, 2 = DELETE
        u32 value length + 1, value bytes     (0 = null, for a DELETE)
        i64 expire_at_ms        (-1 = never)

Format 1 is an Arrow IPC file with one record batch of
:data:`~kvstore.format.rows.ROW_SCHEMA` and the header JSON (plus ``format``
and the ``crc`` seal token of :mod:`kvstore.format.sealed`) in the schema
metadata under ``lakekv.root``. Formats 1 and 2 are still read; they are no
longer written. Each magic differs, so a reader of an older format refuses
a newer file ("unknown magic") instead of misreading it.

Header fields (null and empty ones are omitted since format 2):

=================  =========================================================
``version``        this version N (the parent is N-1)
``first_seq``      first seq of this commit; ``last_seq`` its last. A commit
                   that only changes the tree has ``first_seq = last_seq + 1``
``writer_id``      id of the writing store handle; ``writer_clock_ms`` its clock
``commit_id``      unique id of this attempt: resolves an ambiguous PUT
``tree``           path of the tree manifest (``tree/<uuid>.ipc``) or null
``flushed_upto``   versions <= this are in the tree; later ones are *unflushed*
                   and their deltas are read from their root files
``delta_sst``      SST info (dict) when the delta was too large to inline
``commits``        one descriptor per transaction: ``op``, ``seq``, ``keys``,
                   ``txn``/``isolation``, ``summary`` (set by the caller),
                   ``lock_keys`` (hex keys it read with get_for_update; they
                   conflict like written keys)
``checkpoints``    name -> pinned version (maintained by later commits)
=================  =========================================================
"""

from __future__ import annotations

import json
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Final

import pyarrow as pa

from kvstore.errors import CorruptionError
from kvstore.format import sealed
from kvstore.format.checksum import crc32c
from kvstore.format.rows import DELETE, PUT, ROW_SCHEMA, Row, batch_to_rows, rows_to_batch

ROOT_FORMAT: Final = 3
MAX_VERSION: Final = 2**32 - 1  # the file name has 32 bits
_MAGIC: Final = b"LKVROOT3"
_MAGIC_V2: Final = b"LKVROOT2"
_ARROW_MAGIC: Final = b"ARROW1"  # format 1 files start with it
_META_KEY: Final = b"lakekv.root"  # format 1 only
# One encoder for every root (json.dumps with options builds a new one per call).
_HEADER_JSON: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_U32: Final = struct.Struct("<I")
# key length is written separately; then seq offset, kind, value length + 1
_ROW_HEAD: Final = struct.Struct("<IBI")
_EXPIRE: Final = struct.Struct("<q")
_NO_EXPIRY: Final = -1


def root_path(version: int) -> str:
    """Object path of the root file of ``version``.

    >>> root_path(100)
    '_00100110000000000000000000000000.ipc'
    """
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"version {version} is outside 0..{MAX_VERSION}")
    return "_" + format(version, "032b")[::-1] + ".ipc"


def parse_root_path(path: str) -> int | None:
    """Inverse of :func:`root_path`; None if ``path`` is not a root file name.

    >>> parse_root_path('_00100110000000000000000000000000.ipc')
    100
    """
    if len(path) != 37 or not path.startswith("_") or not path.endswith(".ipc"):
        return None
    bits = path[1:33]
    if set(bits) - {"0", "1"}:
        return None
    return int(bits[::-1], 2)


def oldest_needed_version(tree: str | None, flushed_upto: int) -> int:
    """The first version not in ``tree`` (version 0 when nothing was flushed yet).

    >>> oldest_needed_version(None, 0), oldest_needed_version("tree/t.ipc", 41)
    (0, 42)
    """
    return flushed_upto + 1 if tree is not None else 0


@dataclass(frozen=True)
class RootFile:
    """The decoded contents of one root file (see module docstring).

    The inline delta is held as an Arrow batch (``delta``), as row tuples
    (``rows``), or both; at least one is set. Formats 2 and 3 decode to rows only:
    building a batch per root would dominate reading a chain of small roots.
    Use :meth:`delta_rows`, :meth:`delta_batch` and :attr:`delta_row_count`.
    """

    version: int
    parent: int | None
    first_seq: int
    last_seq: int
    writer_id: str
    writer_clock_ms: int
    commit_id: str
    tree: str | None
    flushed_upto: int
    delta: pa.RecordBatch | None
    delta_sst: dict[str, Any] | None = None
    commits: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    rows: tuple[Row, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def path(self) -> str:
        return root_path(self.version)

    @property
    def oldest_needed(self) -> int:
        """The oldest version whose root a reader of this version needs:
        its first unflushed version (the tree holds everything before)."""
        return oldest_needed_version(self.tree, self.flushed_upto)

    def __post_init__(self) -> None:
        if self.delta is None and self.rows is None:
            raise ValueError("a RootFile needs its delta as a batch or as rows")

    def delta_rows(self) -> list[Row]:
        """The inline delta as row tuples (empty when it lives in ``delta_sst``)."""
        if self.rows is not None:
            return list(self.rows)
        assert self.delta is not None  # __post_init__
        return batch_to_rows(self.delta)

    def delta_batch(self) -> pa.RecordBatch:
        """The inline delta as a :data:`~kvstore.format.rows.ROW_SCHEMA` batch."""
        return self.delta if self.delta is not None else rows_to_batch(list(self.rows or ()))

    @property
    def delta_row_count(self) -> int:
        """Rows of the inline delta."""
        return len(self.rows) if self.rows is not None else self.delta.num_rows  # type: ignore[union-attr]

    def metadata(self) -> dict[str, Any]:
        """The header fields (every one, nulls included)."""
        return {
            "version": self.version,
            "parent": self.parent,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "writer_id": self.writer_id,
            "writer_clock_ms": self.writer_clock_ms,
            "commit_id": self.commit_id,
            "tree": self.tree,
            "flushed_upto": self.flushed_upto,
            "delta_sst": self.delta_sst,
            "commits": self.commits,
            "checkpoints": self.checkpoints,
        }


def encode_root(root: RootFile, encoded_rows: bytes | None = None) -> bytes:
    """Serialize ``root`` in format 3 (see the module docstring).

    ``encoded_rows``: ``encode_rows(root's delta rows, root.first_seq)`` if
    the caller already has it (the committer sizes the delta with it).

    Raises:
        ValueError: the delta does not have ROW_SCHEMA, or a row does not fit
            the format (e.g. a seq below ``first_seq``).
    """
    if root.delta is not None and not root.delta.schema.equals(ROW_SCHEMA, check_metadata=False):
        raise ValueError("root delta must have ROW_SCHEMA")
    header = {
        name: value
        for name, value in root.metadata().items()
        # The parent is implied by the version; empty fields cost bytes in
        # every root of the chain.
        if name != "parent" and value is not None and value != {} and value != []
    }
    text = _HEADER_JSON.encode(header).encode()
    if encoded_rows is None:
        rows = root.rows if root.rows is not None else root.delta_rows()
        encoded_rows = encode_rows(rows if type(rows) is list else list(rows), root.first_seq)
    return seal_root(_MAGIC, text, encoded_rows)


def seal_root_py(magic: bytes, header: bytes, encoded_rows: bytes) -> bytes:
    """A root file from its parts: ``magic``, ``u32`` header length,
    ``header``, ``encoded_rows``, ``u32`` CRC32C of all of those.

    The pure-Python twin of ``cython_ext._rootrows.seal_root`` (same bytes).

    Raises:
        ValueError: the header is over 4 GiB.
    """
    if len(header) > 0xFFFFFFFF:
        raise ValueError(f"a root header of {len(header)} bytes does not fit a root file")
    out = bytearray(magic)
    out += _U32.pack(len(header))
    out += header
    out += encoded_rows
    out += _U32.pack(crc32c(out))
    return bytes(out)


_U64_MAX: Final = 2**64 - 1
_KIND_BITS: Final = 0x03
_NULL_VALUE: Final = 0x04
_HAS_EXPIRY: Final = 0x08
_FLAGGED_LEAD: Final = 0x80
_ONE_SEQ: Final = 0x01


def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _shared_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def encode_rows_py(rows: list[Row], first_seq: int) -> bytes:
    """The delta section of a format-3 root: ``varint N``, the section flags, then the N rows.

    The pure-Python twin of ``cython_ext._rootrows.encode_rows`` (which
    :func:`encode_root` uses when it is built); same bytes, same errors.
    Rows in any order encode (storage order shares the most key bytes).

    Raises:
        ValueError: a row is not a 5-tuple of the row types, or does not fit
            the format (a kind other than PUT or DELETE, a seq that is not an
            int from ``first_seq`` to 2**64 - 1 past it, an expiry that is
            not an int64).
    """
    for row in rows:
        if type(row) is not tuple or len(row) != 5:
            raise ValueError(f"root row {row!r} is not a (key, seq, kind, value, expire) tuple")
        key, seq, kind, value, expire = row
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise ValueError(f"root row ({key!r}, {seq!r}) needs a bytes key and a bytes or None value")
        if (
            not isinstance(seq, int)
            or not isinstance(kind, int)
            or not (kind == PUT or kind == DELETE)
            or seq < first_seq
            or seq - first_seq > _U64_MAX
        ):
            raise ValueError(f"root row ({key!r}, {seq!r}) does not fit format 3")
        if expire is not None and (not isinstance(expire, int) or not -(2**63) <= expire < 2**63):
            raise ValueError(f"root row ({key!r}, {seq!r}) has expiry {expire!r}, not an int64")
    out = bytearray()
    _varint(out, len(rows))
    one_seq = all(row[1] == first_seq for row in rows)
    out.append(_ONE_SEQ if one_seq else 0)
    previous = b""
    for key, seq, kind, value, expire in rows:
        shared = _shared_prefix(previous, key)
        if kind == PUT and value is not None and expire is None and shared < _FLAGGED_LEAD:
            out.append(shared)
        else:
            flags = PUT if kind == PUT else DELETE
            if value is None:
                flags |= _NULL_VALUE
            if expire is not None:
                flags |= _HAS_EXPIRY
            out.append(_FLAGGED_LEAD | flags)
            _varint(out, shared)
        _varint(out, len(key) - shared)
        out += key[shared:]
        previous = key
        if not one_seq:
            _varint(out, seq - first_seq)
        if value is not None:
            _varint(out, len(value))
            out += value
        if expire is not None:
            _varint(out, ((expire << 1) ^ (expire >> 63)) & _U64_MAX)
    return bytes(out)


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it.

    Raises:
        ValueError: it runs past ``end`` or over 64 bits.
    """
    result = shift = 0
    while True:
        if pos >= end:
            raise ValueError("a varint runs past the end of the rows")
        byte = data[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise ValueError("a varint overflows 64 bits")
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def decode_rows_py(data: bytes, pos: int, end: int, first_seq: int) -> list[Row]:
    """The rows of a format-3 delta section at ``data[pos:end]``.

    The pure-Python twin of ``cython_ext._rootrows.decode_rows``: same rows,
    and a ``ValueError`` (same message) wherever that raises one.

    Raises:
        ValueError: the bytes are not a delta section (truncated, a field
            out of range, bytes left over).
    """
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"rows at {pos}..{end} are outside {len(data)} bytes")
    count, pos = _read_varint(data, pos, end)
    if pos >= end:
        raise ValueError("the section flags are missing")
    section = data[pos]
    pos += 1
    if section & ~_ONE_SEQ:
        raise ValueError(f"the rows have section flags {section:#04x}")
    rows: list[Row] = []
    previous = b""
    for _ in range(count):
        if pos >= end:
            raise ValueError("a row's lead byte is missing")
        lead = data[pos]
        pos += 1
        if lead < _FLAGGED_LEAD:
            flags, shared = PUT, lead
        else:
            flags = lead & ~_FLAGGED_LEAD
            kind = flags & _KIND_BITS
            if flags & ~(_KIND_BITS | _NULL_VALUE | _HAS_EXPIRY) or not (kind == PUT or kind == DELETE):
                raise ValueError(f"a row has flags {flags:#04x}")
            shared, pos = _read_varint(data, pos, end)
        if shared > len(previous):
            raise ValueError(f"a key shares {shared} bytes with a {len(previous)}-byte key")
        length, pos = _read_varint(data, pos, end)
        if length > end - pos:
            raise ValueError("a key runs past the end of the rows")
        key = previous[:shared] + data[pos : pos + length]
        pos += length
        previous = key
        offset = 0
        if not section & _ONE_SEQ:
            offset, pos = _read_varint(data, pos, end)
        kind = flags & _KIND_BITS
        value = None
        if not flags & _NULL_VALUE:
            length, pos = _read_varint(data, pos, end)
            if length > end - pos:
                raise ValueError("a value runs past the end of the rows")
            value = data[pos : pos + length]
            pos += length
        expire = None
        if flags & _HAS_EXPIRY:
            zigzag, pos = _read_varint(data, pos, end)
            expire = (zigzag >> 1) ^ -(zigzag & 1)
        rows.append((key, first_seq + offset, kind, value, expire))
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the last row")
    return rows


encode_rows: Callable[[list[Row], int], bytes]
decode_rows: Callable[[bytes, int, int, int], list[Row]]
seal_root: Callable[[bytes, bytes, bytes], bytes]
try:
    from cython_ext._rootrows import decode_rows, encode_rows, seal_root  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled root encoder unavailable ({exc}); using the pure-Python twin", stacklevel=2)
    encode_rows, decode_rows, seal_root = encode_rows_py, decode_rows_py, seal_root_py


def decode_root(data: bytes, expected_version: int | None = None) -> RootFile:
    """Parse and verify a root file of format 3, 2 or 1.

    Raises:
        CorruptionError: checksum mismatch, unparseable bytes, an unknown
            format, or a version that differs from the one its name promises.
    """
    what = f"root file {root_path(expected_version)}" if expected_version is not None else "root file"
    if type(data) is not bytes:  # the compiled row decoder reads bytes only
        data = bytes(data)
    batch: pa.RecordBatch | None = None
    rows: list[Row] | None = None
    if data.startswith(_MAGIC):
        meta, rows = _decode_framed(data, what, decode_rows)
    elif data.startswith(_MAGIC_V2):
        meta, rows = _decode_framed(data, what, _decode_rows_v2)
    elif data.startswith(_ARROW_MAGIC):
        meta, batch = _decode_v1(data, what)
    else:
        raise CorruptionError(f"{what}: not a lakekv root file (unknown magic {data[:8]!r})")
    if expected_version is not None and meta.get("version") != expected_version:
        raise CorruptionError(f"{what}: claims version {meta.get('version')!r}")
    try:
        version = meta["version"]
        return RootFile(
            version=version,
            parent=version - 1 if version > 0 else None,
            first_seq=meta["first_seq"],
            last_seq=meta["last_seq"],
            writer_id=meta["writer_id"],
            writer_clock_ms=meta["writer_clock_ms"],
            commit_id=meta["commit_id"],
            tree=meta.get("tree"),
            flushed_upto=meta["flushed_upto"],
            delta=batch,
            delta_sst=meta.get("delta_sst"),
            commits=meta.get("commits", []),
            checkpoints=meta.get("checkpoints", {}),
            rows=tuple(rows) if rows is not None else None,
        )
    except (KeyError, TypeError) as exc:
        raise CorruptionError(f"{what}: header lacks or mangles {exc}") from exc


def _decode_framed(
    data: bytes, what: str, decode: Callable[[bytes, int, int, int], list[Row]]
) -> tuple[dict[str, Any], list[Row]]:
    """Check the CRC and parse the header of a format-2 or -3 root; ``decode``
    parses its rows."""
    if len(data) < len(_MAGIC) + 9:
        raise CorruptionError(f"{what}: {len(data)} bytes is too short")
    end = len(data) - 4
    (crc,) = _U32.unpack_from(data, end)
    if crc32c(memoryview(data)[:end]) != crc:
        raise CorruptionError(f"{what}: checksum mismatch (file is corrupt)")
    try:
        pos = len(_MAGIC)
        (length,) = _U32.unpack_from(data, pos)
        pos += 4
        if length > end - pos:
            raise CorruptionError(f"{what}: header runs past the end")
        meta = json.loads(data[pos : pos + length])
        if not isinstance(meta, dict):
            raise CorruptionError(f"{what}: header is not a JSON object")
        first_seq = meta["first_seq"]
        if type(first_seq) is not int:
            raise CorruptionError(f"{what}: first_seq is {first_seq!r}")
        return meta, decode(data, pos + length, end, first_seq)
    except CorruptionError:
        raise
    except (struct.error, ValueError, KeyError, TypeError) as exc:  # checksum passed: a writer bug
        raise CorruptionError(f"{what}: cannot parse ({exc})") from exc


def _decode_rows_v2(body: bytes, pos: int, end: int, first_seq: int) -> list[Row]:
    """The rows of a format-2 delta section (see the module docstring)."""
    body = body[:end]  # a row must not run on into the CRC
    (count,) = _U32.unpack_from(body, pos)
    pos += 4
    rows: list[Row] = []
    for _ in range(count):
        (key_len,) = _U32.unpack_from(body, pos)
        pos += 4
        if key_len > end - pos:
            raise ValueError("a key runs past the end of the rows")
        key = body[pos : pos + key_len]
        pos += key_len
        offset, kind, value_len = _ROW_HEAD.unpack_from(body, pos)
        pos += _ROW_HEAD.size
        value = None
        if value_len:
            if value_len - 1 > end - pos:
                raise ValueError("a value runs past the end of the rows")
            value = body[pos : pos + value_len - 1]
            pos += value_len - 1
        (expire,) = _EXPIRE.unpack_from(body, pos)
        pos += _EXPIRE.size
        rows.append((key, first_seq + offset, kind, value, None if expire == _NO_EXPIRY else expire))
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the last row")
    return rows


def _decode_v1(data: bytes, what: str) -> tuple[dict[str, Any], pa.RecordBatch]:
    meta, batch = sealed.read_sealed_ipc(data, _META_KEY, what)
    if meta.get("format") != 1:
        raise CorruptionError(f"{what}: unsupported format {meta.get('format')!r}")
    if not batch.schema.equals(ROW_SCHEMA, check_metadata=False):
        raise CorruptionError(f"{what}: delta has schema {batch.schema}")
    return meta, batch
