"""The compiled CRC32C (the CPU instruction where there is one, else tables)
agrees with the pure-Python reference on every length, alignment and seed."""

from __future__ import annotations

import platform
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cython_ext import _checksum  # internals: which CRC32C implementation the build chose
from kvstore.format.checksum import _crc32c_py, crc32c  # internals: the pure-Python reference CRC


def test_the_compiled_crc_is_the_one_in_use() -> None:
    assert crc32c is _checksum.crc32c
    assert hex(crc32c(b"123456789")) == "0xe3069283"  # the published check value


def test_x86_64_with_sse42_uses_the_crc_instruction() -> None:
    cpuinfo = Path("/proc/cpuinfo")
    has_sse42 = cpuinfo.exists() and " sse4_2" in cpuinfo.read_text()
    assert _checksum.HARDWARE == (platform.machine() == "x86_64" and has_sse42)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=100), start=st.integers(0, 7), seed=st.integers(0, 2**32 - 1))
def test_the_compiled_crc_matches_the_reference(data: bytes, start: int, seed: int) -> None:
    view = memoryview(data)[min(start, len(data)) :]  # unaligned starts too
    assert crc32c(view, seed) == _crc32c_py(view, seed)
    # Chaining over a split equals one pass over the whole.
    cut = len(view) // 3
    assert crc32c(view[cut:], crc32c(view[:cut])) == crc32c(view)


def test_a_large_buffer_matches_the_reference() -> None:
    data = bytes(range(256)) * 257 + b"tail"
    assert crc32c(data) == _crc32c_py(data)
