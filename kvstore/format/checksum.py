"""CRC32C checksums for every block and metadata section of lakekv files.

The compiled implementation (``cython_ext._checksum``) is chosen here, once,
at import time; the pure-Python twin below is the reference and the fallback.
"""

from __future__ import annotations

import warnings
from typing import Callable, Final

_POLY: Final = 0x82F63B78  # reflected Castagnoli polynomial


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE: Final = _make_table()


def _crc32c_py(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Reference CRC32C, one byte at a time.

    >>> hex(_crc32c_py(b"123456789"))
    '0xe3069283'
    """
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _load() -> Callable[..., int]:
    try:
        from cython_ext._checksum import crc32c as compiled
    except ImportError as exc:  # pragma: no cover - exercised only on broken builds
        warnings.warn(f"lakekv: compiled checksum unavailable ({exc}); using the slow pure-Python CRC32C", stacklevel=3)
        return _crc32c_py
    return compiled  # type: ignore[no-any-return]


crc32c: Final = _load()

__all__ = ["crc32c"]
