"""Tests for kvstore.cache.BlockCache: LRU order, byte budget, counters, threads."""

from __future__ import annotations

import threading

import pytest

from kvstore.cache import IMPLEMENTATION, BlockCache, CacheStats, PyLruCore


class PyBlockCache(PyLruCore):
    """BlockCache on the pure-Python core: the twin the compiled core must match."""

    stats = BlockCache.stats


@pytest.fixture(params=["selected", "python"])
def cache_type(request: pytest.FixtureRequest) -> type:
    return BlockCache if request.param == "selected" else PyBlockCache


def test_the_compiled_core_is_selected_when_built() -> None:
    assert IMPLEMENTATION == "cython"


def test_get_miss_then_hit(cache_type: type) -> None:
    cache = cache_type(100)
    assert cache.get("k") is None
    cache.put("k", "value", 10)
    assert cache.get("k") == "value"
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries, stats.bytes) == (1, 1, 1, 10)


def test_evicts_least_recently_used_first(cache_type: type) -> None:
    cache = cache_type(30)
    for key in ("a", "b", "c"):
        cache.put(key, key.upper(), 10)
    assert cache.get("a") == "A"  # "a" is now the most recent; "b" the least
    cache.put("d", "D", 10)
    assert cache.get("b") is None
    assert [cache.get(k) for k in ("a", "c", "d")] == ["A", "C", "D"]
    assert cache.stats().evictions == 1


def test_one_large_entry_evicts_several_small_ones(cache_type: type) -> None:
    cache = cache_type(100)
    for i in range(10):
        cache.put(i, i, 10)
    cache.put("big", "B", 55)
    stats = cache.stats()
    assert stats.bytes <= 100 and stats.evictions == 6 and len(cache) == 5
    assert cache.get("big") == "B" and cache.get(0) is None and cache.get(9) == 9


def test_replacing_an_entry_recharges_it(cache_type: type) -> None:
    cache = cache_type(100)
    cache.put("k", "old", 60)
    cache.put("k", "new", 30)
    assert cache.get("k") == "new"
    assert cache.stats().bytes == 30 and len(cache) == 1 and cache.stats().evictions == 0


def test_entry_larger_than_budget_is_rejected_not_cached(cache_type: type) -> None:
    cache = cache_type(50)
    cache.put("small", 1, 10)
    cache.put("huge", 2, 51)
    assert cache.get("huge") is None and cache.get("small") == 1
    assert cache.stats().rejected == 1


def test_zero_capacity_caches_nothing(cache_type: type) -> None:
    cache = cache_type(0)
    cache.put("k", 1, 1)
    assert cache.get("k") is None and len(cache) == 0
    cache.put("empty", 1, 0)  # a zero-byte entry fits even a zero budget
    assert cache.get("empty") == 1


def test_clear_keeps_counters(cache_type: type) -> None:
    cache = cache_type(10)
    cache.put("k", 1, 5)
    cache.get("k")
    cache.clear()
    assert cache.get("k") is None
    assert cache.stats() == CacheStats(hits=1, misses=1, evictions=0, rejected=0, entries=0, bytes=0, capacity_bytes=10)
    assert cache.stats().to_dict()["capacity_bytes"] == 10


@pytest.mark.parametrize(
    ("capacity", "error"), [(-1, ValueError), ("10", TypeError), (1.5, TypeError), (True, TypeError)]
)
def test_bad_capacity(capacity: object, error: type[Exception], cache_type: type) -> None:
    with pytest.raises(error, match="capacity_bytes"):
        cache_type(capacity)  # type: ignore[arg-type]


def test_bad_put_arguments(cache_type: type) -> None:
    cache = cache_type(10)
    with pytest.raises(ValueError, match="nbytes"):
        cache.put("k", 1, -1)
    with pytest.raises(TypeError, match="nbytes"):
        cache.put("k", 1, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="None"):
        cache.put("k", None, 1)


def test_concurrent_use_keeps_accounting_exact(cache_type: type) -> None:
    cache = cache_type(1000)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for i in range(3000):
                key = (seed * 7 + i) % 200
                if cache.get(key) is None:
                    cache.put(key, key, 1 + key % 13)
        except BaseException as exc:  # re-raised in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stats = cache.stats()
    held = [key for key in range(200) if cache.get(key) is not None]
    assert stats.bytes == sum(1 + key % 13 for key in held) <= 1000
    assert stats.hits + stats.misses == 8 * 3000
