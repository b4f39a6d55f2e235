"""Bloom filter over the user keys of one SST file.

A point read asks the filter first and skips the file (no I/O) when the key
was certainly never written to it. The scheme is simple enough to reproduce
byte for byte in another language:

* ``h = XXH64(key, seed=0)``: the 64-bit xxHash of the raw key bytes (spec:
  https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md);
* double hashing (Kirsch & Mitzenmacher): ``h1 = h & 0xFFFFFFFF``,
  ``h2 = h >> 32``; the key sets bits ``(h1 + i * h2) % num_bits`` for
  ``i = 0 .. num_hashes - 1``, in exact unsigned arithmetic (the sum is below
  ``2**37``, so 64-bit integers never overflow);
* bit ``b`` lives in byte ``b // 8`` under mask ``1 << (b % 8)`` (LSB first).

Sizing for ``n`` distinct keys and ``bits_per_key`` bits per key:
``num_bits = max(64, ceil(n * bits_per_key / 8) * 8)`` and
``num_hashes = clamp(round(bits_per_key * ln 2), 1, 30)``, the count that
minimises the false-positive rate, whose expected value is
``(1 - exp(-num_hashes * n / num_bits)) ** num_hashes`` (~0.82 % at 10 bits
per key).

The hash and bit-setting loop are compiled (``cython_ext._bloom``); the
pure-Python twins below are the reference and the fallback, chosen once at
import time.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Final

import pyarrow as pa

# Never change: filters stored in SST files depend on these.
HASH_NAME: Final = "xxh64-seed0-double-hashing"

# A filter never shrinks below one 64-bit word: tiny files would otherwise get
# a filter of a few bits with a false-positive rate near 1.
_MIN_BITS: Final = 64
# Beyond ~30 hashes the rate no longer improves (30 hashes suit ~43 bits per key,
# far more than anyone configures), while every probe gets slower.
_MAX_HASHES: Final = 30
MAX_BITS_PER_KEY: Final = 64

_MASK64: Final = (1 << 64) - 1
_P1: Final = 0x9E3779B185EBCA87
_P2: Final = 0xC2B2AE3D27D4EB4F
_P3: Final = 0x165667B19E3779F9
_P4: Final = 0x85EBCA77C2B2AE63
_P5: Final = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK64, 31) * _P1) & _MASK64


def _xxh64_py(data: bytes, seed: int = 0) -> int:
    """Reference XXH64 (slow: ~100x the compiled one).

    >>> hex(_xxh64_py(b"abc"))
    '0x44bc2cf5ad770999'
    """
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK64
        v2 = (seed + _P2) & _MASK64
        v3 = seed
        v4 = (seed - _P1) & _MASK64
        while n - p >= 32:
            v1 = _round(v1, int.from_bytes(data[p : p + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[p + 8 : p + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[p + 16 : p + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[p + 24 : p + 32], "little"))
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK64
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _MASK64
    else:
        h = (seed + _P5) & _MASK64
    h = (h + n) & _MASK64
    while n - p >= 8:
        h ^= _round(0, int.from_bytes(data[p : p + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK64
        p += 8
    if n - p >= 4:
        h ^= (int.from_bytes(data[p : p + 4], "little") * _P1) & _MASK64
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK64
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _MASK64
        h = (_rotl(h, 11) * _P1) & _MASK64
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK64
    h ^= h >> 29
    h = (h * _P3) & _MASK64
    return h ^ (h >> 32)


def _bit_positions(key: bytes, num_bits: int, num_hashes: int) -> list[int]:
    h = _xxh64_py(key)
    h1, h2 = h & 0xFFFFFFFF, h >> 32
    return [(h1 + i * h2) % num_bits for i in range(num_hashes)]


def _add_binary_array_py(
    bits: bytearray, num_bits: int, num_hashes: int, offsets: object, data: object, array_offset: int, length: int
) -> None:
    """Reference twin of ``cython_ext._bloom.add_binary_array`` (same arguments)."""
    offs = memoryview(offsets).cast("B")  # type: ignore[arg-type]
    values = memoryview(data).cast("B") if data is not None else memoryview(b"")  # type: ignore[arg-type]
    for i in range(array_offset, array_offset + length):
        start = int.from_bytes(offs[4 * i : 4 * i + 4], "little", signed=True)
        stop = int.from_bytes(offs[4 * i + 4 : 4 * i + 8], "little", signed=True)
        for b in _bit_positions(bytes(values[start:stop]), num_bits, num_hashes):
            bits[b >> 3] |= 1 << (b & 7)


def _may_contain_py(bits: bytes, num_bits: int, num_hashes: int, key: bytes) -> bool:
    """Reference twin of ``cython_ext._bloom.may_contain``."""
    return all(bits[b >> 3] & (1 << (b & 7)) for b in _bit_positions(key, num_bits, num_hashes))


class _PythonKernels:
    """The pure-Python kernels under the compiled module's names."""

    xxh64 = staticmethod(_xxh64_py)
    add_binary_array = staticmethod(_add_binary_array_py)
    may_contain = staticmethod(_may_contain_py)


PYTHON_KERNELS: Final = _PythonKernels()


def _load_kernels() -> ModuleType | _PythonKernels:
    """The compiled kernels if the extension was built, else the Python twins (with a warning)."""
    try:
        return importlib.import_module("cython_ext._bloom")
    except ImportError as exc:  # pragma: no cover - exercised only on broken builds
        warnings.warn(f"lakekv: compiled bloom kernels unavailable ({exc}); using the slow Python ones", stacklevel=3)
        return PYTHON_KERNELS


# Module-level so tests can swap in PYTHON_KERNELS (monkeypatch) to run both.
kernels: ModuleType | _PythonKernels = _load_kernels()

xxh64: Callable[..., int] = kernels.xxh64


def filter_shape(num_keys: int, bits_per_key: int) -> tuple[int, int]:
    """Return ``(num_bits, num_hashes)`` for ``num_keys`` keys (see module docstring).

    >>> filter_shape(1000, 10)
    (10000, 7)

    Raises:
        ValueError: ``num_keys`` < 0 or ``bits_per_key`` outside 1..64.
    """
    if num_keys < 0:
        raise ValueError(f"num_keys must be >= 0, got {num_keys}")
    if not 1 <= bits_per_key <= MAX_BITS_PER_KEY:
        raise ValueError(f"bits_per_key must be in 1..{MAX_BITS_PER_KEY}, got {bits_per_key}")
    num_bits = max(_MIN_BITS, -(-num_keys * bits_per_key // 8) * 8)
    num_hashes = min(_MAX_HASHES, max(1, round(bits_per_key * math.log(2))))
    return num_bits, num_hashes


@dataclass(frozen=True)
class BloomFilter:
    """An immutable Bloom filter; thread-safe (read-only after construction).

    Attributes:
        bits: the bit array, ``num_bits / 8`` bytes.
        num_bits: filter size in bits, a positive multiple of 8.
        num_hashes: bits probed per key.
    """

    bits: bytes
    num_bits: int
    num_hashes: int

    def __post_init__(self) -> None:
        if not isinstance(self.bits, bytes):
            raise TypeError(f"bits must be bytes, not {type(self.bits).__name__}")
        if self.num_bits <= 0 or self.num_bits % 8 or len(self.bits) * 8 != self.num_bits:
            raise ValueError(f"num_bits={self.num_bits} must be a positive multiple of 8 equal to 8 * len(bits)")
        if not 1 <= self.num_hashes <= _MAX_HASHES:
            raise ValueError(f"num_hashes must be in 1..{_MAX_HASHES}, got {self.num_hashes}")

    @classmethod
    def build(cls, key_arrays: Iterable[pa.Array], num_keys: int, bits_per_key: int) -> BloomFilter:
        """Build a filter sized for ``num_keys`` keys from Arrow ``binary`` arrays.

        Repeated keys are harmless (they set the same bits) but ``num_keys``
        should count distinct keys, or the filter comes out larger than needed.
        Complexity: O(total keys); ~0.05 s per million short keys compiled.

        Raises:
            TypeError: an array is not of Arrow type ``binary``.
            ValueError: bad ``num_keys``/``bits_per_key``, or an array has nulls.
        """
        num_bits, num_hashes = filter_shape(num_keys, bits_per_key)
        bits = bytearray(num_bits // 8)
        add = kernels.add_binary_array
        for array in key_arrays:
            if not pa.types.is_binary(array.type):
                raise TypeError(f"key_arrays must hold binary arrays, got {array.type}")
            if array.null_count:
                raise ValueError("key_arrays must not contain null keys")
            _validity, offsets, data = array.buffers()
            add(bits, num_bits, num_hashes, offsets, data, array.offset, len(array))
        return cls(bytes(bits), num_bits, num_hashes)

    @classmethod
    def from_keys(cls, keys: Iterable[bytes], bits_per_key: int = 10) -> BloomFilter:
        """Build a filter from Python ``bytes`` keys (tests, small inputs).

        >>> BloomFilter.from_keys([b"a", b"b"]).may_contain(b"a")
        True
        """
        key_list = list(keys)
        if not all(isinstance(key, bytes) for key in key_list):
            raise TypeError("keys must all be bytes")
        return cls.build([pa.array(key_list, pa.binary())], len(set(key_list)), bits_per_key)

    def may_contain(self, key: bytes) -> bool:
        """Return False if ``key`` was certainly never added, True if it may have been.

        Raises:
            TypeError: ``key`` is not bytes.
        """
        if not isinstance(key, bytes):
            raise TypeError(f"key must be bytes, not {type(key).__name__}")
        return kernels.may_contain(self.bits, self.num_bits, self.num_hashes, key)

    def expected_fpr(self, num_keys: int) -> float:
        """The theoretical false-positive rate once ``num_keys`` distinct keys were added."""
        return (1.0 - math.exp(-self.num_hashes * num_keys / self.num_bits)) ** self.num_hashes
