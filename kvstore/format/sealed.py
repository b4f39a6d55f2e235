"""Whole-file CRC32C for small metadata files (root files, tree manifests).

The file's JSON metadata carries a *seal token* ``lakekv-crc-<nonce>:<crc>``
where ``nonce`` is random per file. While sealing, the token is written with
``00000000`` as the CRC; the CRC32C of those bytes is then patched into every
copy of the token (Arrow IPC stores schema metadata twice: in the leading
schema message and in the footer). Verifying reverses the patch and recomputes,
so a flipped byte anywhere in the file, including Arrow framing and padding, is
caught. The random nonce keeps user data from ever matching the token.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, Final

import pyarrow as pa

from kvstore.errors import CorruptionError
from kvstore.format.checksum import crc32c

_ZERO: Final = b"00000000"
_TOKEN_RE: Final = re.compile(rb"^lakekv-crc-([0-9a-f]{16}):([0-9a-f]{8})$")


def new_token() -> str:
    """Return an unsealed token to embed in a file's JSON metadata."""
    return f"lakekv-crc-{secrets.token_hex(8)}:{_ZERO.decode()}"


def seal(data: bytes, token: str, copies: int) -> bytes:
    """Patch the CRC32C of ``data`` into each of the ``copies`` of ``token``.

    Raises:
        ValueError: ``token`` does not occur exactly ``copies`` times.
    """
    raw = token.encode()
    if data.count(raw) != copies:
        raise ValueError(f"seal token occurs {data.count(raw)} times, expected {copies}")
    crc = crc32c(data)
    return data.replace(raw, raw[: -len(_ZERO)] + b"%08x" % crc)


def verify(data: bytes, token: str, copies: int, what: str) -> None:
    """Check a sealed file; ``token`` is the sealed token read from its metadata.

    Raises:
        CorruptionError: the token is malformed, missing, or the CRC differs.
    """
    match = _TOKEN_RE.match(token.encode()) if isinstance(token, str) else None
    if match is None:
        raise CorruptionError(f"{what}: malformed checksum token {token!r}")
    raw = token.encode()
    if data.count(raw) != copies:
        raise CorruptionError(f"{what}: checksum token found {data.count(raw)} times, expected {copies}")
    unsealed = data.replace(raw, raw[: -len(_ZERO)] + _ZERO)
    if crc32c(unsealed) != int(match.group(2), 16):
        raise CorruptionError(f"{what}: checksum mismatch (file is corrupt)")


# Arrow IPC files repeat the schema (with its metadata) in header and footer.
_IPC_COPIES: Final = 2


def write_sealed_ipc(meta_key: bytes, meta: dict[str, Any], batch: pa.RecordBatch) -> bytes:
    """Arrow IPC file bytes: ``batch`` plus ``meta`` as JSON under ``meta_key``, sealed."""
    token = new_token()
    text = json.dumps(dict(meta, crc=token), separators=(",", ":"))
    schema = batch.schema.with_metadata({meta_key: text})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(batch.replace_schema_metadata(None))
    return seal(sink.getvalue().to_pybytes(), token, _IPC_COPIES)


def read_sealed_ipc(data: bytes, meta_key: bytes, what: str) -> tuple[dict[str, Any], pa.RecordBatch]:
    """Verify and parse bytes made by :func:`write_sealed_ipc`.

    Raises:
        CorruptionError: checksum mismatch or unparseable bytes, naming ``what``.
    """
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        raw_meta = (reader.schema.metadata or {}).get(meta_key)
        if raw_meta is None:
            raise CorruptionError(f"{what}: no {meta_key.decode()} metadata")
        meta = json.loads(raw_meta)
        if not isinstance(meta, dict):
            raise CorruptionError(f"{what}: metadata is not a JSON object")
        verify(data, meta.get("crc", ""), _IPC_COPIES, what)
        if reader.num_record_batches != 1:
            raise CorruptionError(f"{what}: expected 1 record batch, found {reader.num_record_batches}")
        batch = reader.get_batch(0).replace_schema_metadata(None)
    except CorruptionError:
        raise
    # pyarrow reports a damaged footer as OSError; on in-memory bytes it cannot be real I/O.
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise CorruptionError(f"{what}: cannot parse ({exc})") from exc
    return meta, batch
