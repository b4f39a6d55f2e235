"""Tests for kvstore.format.bloom: the hash, both kernel implementations, sizing, FPR."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from kvstore.format import bloom
from kvstore.format.bloom import PYTHON_KERNELS, BloomFilter, filter_shape

COMPILED_MISSING = bloom.kernels is PYTHON_KERNELS
KERNELS = [
    pytest.param(bloom.kernels, id="compiled", marks=pytest.mark.skipif(COMPILED_MISSING, reason="not built")),
    pytest.param(PYTHON_KERNELS, id="python"),
]

# Reference values from the xxHash project (XXH64, seed 0); the last input is
# longer than 32 bytes, so it exercises the four-lane loop.
XXH64_VECTORS = [
    (b"", 0xEF46DB3751D8E999),
    (b"a", 0xD24EC4F1A98C6E5B),
    (b"abc", 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1),
]


@pytest.fixture(params=KERNELS)
def kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> object:
    """Run the test with one kernel implementation installed in kvstore.format.bloom."""
    monkeypatch.setattr(bloom, "kernels", request.param)
    return request.param


@pytest.mark.parametrize(("data", "expected"), XXH64_VECTORS)
def test_xxh64_matches_reference_vectors(kernels: object, data: bytes, expected: int) -> None:
    assert kernels.xxh64(data) == expected  # type: ignore[attr-defined]


@pytest.mark.skipif(COMPILED_MISSING, reason="compiled kernels not built")
def test_compiled_and_python_kernels_set_identical_bits() -> None:
    rng = random.Random(7)
    # Every length from 0 to 70 covers each tail path of XXH64 (8/4/1-byte steps, 32-byte lanes).
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(71)] * 2
    array = pa.array(keys, pa.binary()).slice(5, 120)  # a slice has a non-zero offset
    num_bits, num_hashes = filter_shape(len(keys), 10)
    compiled, python = bytearray(num_bits // 8), bytearray(num_bits // 8)
    _validity, offsets, data = array.buffers()
    bloom.kernels.add_binary_array(compiled, num_bits, num_hashes, offsets, data, array.offset, len(array))
    PYTHON_KERNELS.add_binary_array(python, num_bits, num_hashes, offsets, data, array.offset, len(array))
    assert compiled == python
    assert any(compiled)
    for key in keys:
        assert bloom.kernels.may_contain(bytes(compiled), num_bits, num_hashes, key) == PYTHON_KERNELS.may_contain(
            bytes(compiled), num_bits, num_hashes, key
        )


def test_no_false_negatives(kernels: object) -> None:
    keys = [b"", b"\x00", b"\xff" * 40] + [b"key-%d" % i for i in range(500)]
    filt = BloomFilter.from_keys(keys)
    assert all(filt.may_contain(key) for key in keys)


def test_all_empty_keys_have_no_data_buffer(kernels: object) -> None:
    filt = BloomFilter.build([pa.array([b"", b""], pa.binary())], 1, 10)
    assert filt.may_contain(b"")


@pytest.mark.skipif(COMPILED_MISSING, reason="100k keys need the compiled kernels")
def test_false_positive_rate_within_twice_the_target() -> None:
    n = 100_000
    keys = [b"user:%08d" % i for i in range(n)]
    filt = BloomFilter.build([pa.array(keys, pa.binary())], n, 10)
    probes = 200_000
    false_positives = sum(filt.may_contain(b"absent:%08d" % i) for i in range(probes))
    target = filt.expected_fpr(n)
    assert 0.005 < target < 0.01  # ~0.82 % at 10 bits per key
    assert false_positives / probes <= 2 * target


def test_filter_shape() -> None:
    assert filter_shape(0, 10) == (64, 7)
    assert filter_shape(1000, 10) == (10000, 7)
    assert filter_shape(3, 1) == (64, 1)
    num_bits, num_hashes = filter_shape(1001, 3)
    assert num_bits % 8 == 0 and num_bits >= 3003 and num_hashes == 2


@pytest.mark.parametrize(("num_keys", "bits_per_key"), [(-1, 10), (10, 0), (10, 65)])
def test_filter_shape_rejects_bad_arguments(num_keys: int, bits_per_key: int) -> None:
    with pytest.raises(ValueError):
        filter_shape(num_keys, bits_per_key)


def test_bad_inputs_raise_typed_errors() -> None:
    with pytest.raises(TypeError, match="key must be bytes"):
        BloomFilter.from_keys([b"a"]).may_contain("a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="binary"):
        BloomFilter.build([pa.array(["a"], pa.string())], 1, 10)
    with pytest.raises(ValueError, match="null"):
        BloomFilter.build([pa.array([b"a", None], pa.binary())], 2, 10)
    with pytest.raises(TypeError, match="bytes"):
        BloomFilter.from_keys(["a"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="num_bits"):
        BloomFilter(b"\x00" * 8, 72, 3)
    with pytest.raises(ValueError, match="num_hashes"):
        BloomFilter(b"\x00" * 8, 64, 0)


@pytest.mark.skipif(COMPILED_MISSING, reason="compiled kernels not built")
def test_compiled_kernels_reject_inconsistent_buffers() -> None:
    with pytest.raises(ValueError, match="num_bits"):
        bloom.kernels.may_contain(b"\x00", 64, 3, b"k")
    array = pa.array([b"abc"], pa.binary())
    _validity, offsets, data = array.buffers()
    with pytest.raises(ValueError, match="offsets"):
        bloom.kernels.add_binary_array(bytearray(8), 64, 3, offsets, data, 0, 5)
