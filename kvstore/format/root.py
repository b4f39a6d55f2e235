"""Root files: one immutable file per version of the store — the version chain.

Layout: ``<root>/_<32-bit version, binary, bit-reversed>.ipc`` (TrinityLake's
naming: version 100 -> ``_00100110000000000000000000000000.ipc``), created with
put-if-absent. The chain of root files *is* the write-ahead log. (The
``.ipc`` suffix is kept from format 1 so that every store names its roots
alike; format 2 files are not Arrow IPC.)

Format 2 (written since issue 14; a one-key put is ~300 bytes, format 1 was
~2 KB, mostly the Arrow schema written twice) — all integers little-endian::

    "LKVROOT2"                  8 bytes of magic
    u32 H, then H bytes         header: UTF-8 JSON object, fields below
    u32 N                       delta rows, in storage order (key ascending,
                                then seq descending), each:
        u32 key length, key bytes
        u32 seq - first_seq
        u8  kind                1 = PUT, 2 = DELETE (stored: never renumber)
        u32 value length + 1, value bytes     (0 = null, for a DELETE)
        i64 expire_at_ms        (-1 = never)
    u32 CRC32C                  of every byte before it

Format 1 is an Arrow IPC file with one record batch of
:data:`~kvstore.format.rows.ROW_SCHEMA` and the header JSON (plus ``format``
and the ``crc`` seal token of :mod:`kvstore.format.sealed`) in the schema
metadata under ``lakekv.root``. It is still read; it is no longer written.

Header fields (null and empty ones are omitted in format 2):

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

ROOT_FORMAT: Final = 2
MAX_VERSION: Final = 2**32 - 1  # the file name has 32 bits
_MAGIC: Final = b"LKVROOT2"
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
    (``rows``), or both; at least one is set. Format 2 decodes to rows only:
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
    """Serialize ``root`` in format 2 (see the module docstring).

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
    """A format-2 root file from its parts: ``magic``, ``u32`` header length,
    ``header``, ``encoded_rows``, ``u32`` CRC32C of all of those.

    The pure-Python twin of ``cython_ext._rootrows.seal_root`` (same bytes).

    Raises:
        ValueError: the header is over 4 GiB.
    """
    if len(header) > 0xFFFFFFFF:
        raise ValueError(f"a root header of {len(header)} bytes does not fit format 2")
    out = bytearray(magic)
    out += _U32.pack(len(header))
    out += header
    out += encoded_rows
    out += _U32.pack(crc32c(out))
    return bytes(out)


def encode_rows_py(rows: list[Row], first_seq: int) -> bytes:
    """The delta section of a format-2 root: ``u32 N``, then the N rows.

    The pure-Python twin of ``cython_ext._rootrows.encode_rows`` (which
    :func:`encode_root` uses when it is built); same bytes, same errors.

    Raises:
        ValueError: a row is not a 5-tuple of the row types, or does not fit
            the format (unknown kind, seq below ``first_seq`` or over 2**32
            past it, an expiry outside int64, a key or value over 4 GiB).
    """
    if len(rows) > 0xFFFFFFFF:
        raise ValueError(f"{len(rows)} rows do not fit a root file")
    for row in rows:
        if type(row) is not tuple or len(row) != 5:
            raise ValueError(f"root row {row!r} is not a (key, seq, kind, value, expire) tuple")
        key, seq, kind, value, expire = row
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise ValueError(f"root row ({key!r}, {seq!r}) needs a bytes key and a bytes or None value")
        if not (kind == PUT or kind == DELETE) or seq < first_seq or seq - first_seq > 0xFFFFFFFF:
            raise ValueError(f"root row ({key!r}, {seq}) does not fit format 2")
        if expire is not None and not -(2**63) <= expire < 2**63:
            raise ValueError(f"root row ({key!r}, {seq}) has expiry {expire!r}, outside int64")
        if len(key) > 0xFFFFFFFF or (value is not None and len(value) >= 0xFFFFFFFF):
            raise ValueError(f"root row ({key!r}, {seq}) is too large for format 2")
    out = bytearray(_U32.pack(len(rows)))
    for key, seq, kind, value, expire in rows:
        out += _U32.pack(len(key))
        out += key
        out += _ROW_HEAD.pack(seq - first_seq, kind, 0 if value is None else len(value) + 1)
        if value is not None:
            out += value
        out += _EXPIRE.pack(_NO_EXPIRY if expire is None else expire)
    return bytes(out)


encode_rows: Callable[[list[Row], int], bytes]
seal_root: Callable[[bytes, bytes, bytes], bytes]
try:
    from cython_ext._rootrows import encode_rows, seal_root  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled root encoder unavailable ({exc}); using the pure-Python twin", stacklevel=2)
    encode_rows, seal_root = encode_rows_py, seal_root_py


def decode_root(data: bytes, expected_version: int | None = None) -> RootFile:
    """Parse and verify a root file of format 2 or 1.

    Raises:
        CorruptionError: checksum mismatch, unparseable bytes, an unknown
            format, or a version that differs from the one its name promises.
    """
    what = f"root file {root_path(expected_version)}" if expected_version is not None else "root file"
    batch: pa.RecordBatch | None = None
    rows: list[Row] | None = None
    if data.startswith(_MAGIC):
        meta, rows = _decode_v2(data, what)
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


def _decode_v2(data: bytes, what: str) -> tuple[dict[str, Any], list[Row]]:
    if len(data) < len(_MAGIC) + 12:
        raise CorruptionError(f"{what}: {len(data)} bytes is too short")
    body, (crc,) = data[:-4], _U32.unpack_from(data, len(data) - 4)
    if crc32c(body) != crc:
        raise CorruptionError(f"{what}: checksum mismatch (file is corrupt)")
    try:
        pos = len(_MAGIC)
        (length,) = _U32.unpack_from(body, pos)
        pos += 4
        meta = json.loads(body[pos : pos + length])
        if not isinstance(meta, dict):
            raise CorruptionError(f"{what}: header is not a JSON object")
        pos += length
        (count,) = _U32.unpack_from(body, pos)
        pos += 4
        first_seq = meta["first_seq"]
        rows: list[Row] = []
        for _ in range(count):
            (key_len,) = _U32.unpack_from(body, pos)
            pos += 4
            key = body[pos : pos + key_len]
            pos += key_len
            offset, kind, value_len = _ROW_HEAD.unpack_from(body, pos)
            pos += _ROW_HEAD.size
            value = None
            if value_len:
                value = body[pos : pos + value_len - 1]
                pos += value_len - 1
            (expire,) = _EXPIRE.unpack_from(body, pos)
            pos += _EXPIRE.size
            rows.append((key, first_seq + offset, kind, value, None if expire == _NO_EXPIRY else expire))
    except CorruptionError:
        raise
    except (struct.error, ValueError, KeyError, TypeError) as exc:  # checksum passed: a writer bug
        raise CorruptionError(f"{what}: cannot parse ({exc})") from exc
    if pos != len(body):
        raise CorruptionError(f"{what}: {len(body) - pos} bytes after the last row")
    return meta, rows


def _decode_v1(data: bytes, what: str) -> tuple[dict[str, Any], pa.RecordBatch]:
    meta, batch = sealed.read_sealed_ipc(data, _META_KEY, what)
    if meta.get("format") != 1:
        raise CorruptionError(f"{what}: unsupported format {meta.get('format')!r}")
    if not batch.schema.equals(ROW_SCHEMA, check_metadata=False):
        raise CorruptionError(f"{what}: delta has schema {batch.schema}")
    return meta, batch
