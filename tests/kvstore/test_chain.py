"""Version chain: galloping discovery of the latest version, and the hint."""

from __future__ import annotations

import time

import pytest

from kvstore.chain import HINT_PATH, HintWriter, VersionChain
from kvstore.format.root import RootFile, encode_root, root_path
from kvstore.format.rows import rows_to_batch
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore


def _publish_versions(store: MemoryStore, upto: int) -> None:
    for version in range(upto + 1):
        root = RootFile(
            version=version, parent=version - 1 if version else None, first_seq=version + 1, last_seq=version,
            writer_id="w", writer_clock_ms=0, commit_id=f"c{version}", tree=None, flushed_upto=0,
            delta=rows_to_batch([]),
        )
        assert VersionChain(store).publish(encode_root(root), version)


def test_empty_store_has_no_latest() -> None:
    assert VersionChain(MemoryStore()).find_latest() is None


@pytest.mark.parametrize("latest", [0, 1, 2, 5, 64, 1000])
def test_find_latest_without_hint(latest: int) -> None:
    store = MemoryStore()
    _publish_versions(store, latest)
    assert VersionChain(store).find_latest() == latest


def test_stale_hint_costs_logarithmic_probes() -> None:
    inner = MemoryStore()
    _publish_versions(inner, 3000)
    inner.put(HINT_PATH, b"10")
    counting = CountingStore(inner)
    assert VersionChain(counting).find_latest() == 3000
    # ~2*log2(2990) = 23 probes, not ~3000.
    assert counting.counts["head"] <= 2 * 12 + 2


def test_hint_ahead_of_reality_or_garbage_is_ignored() -> None:
    store = MemoryStore()
    _publish_versions(store, 9)
    store.put(HINT_PATH, b"500")
    assert VersionChain(store).find_latest() == 9
    store.put(HINT_PATH, b"not a number")
    assert VersionChain(store).find_latest() == 9


def test_known_version_is_a_lower_bound() -> None:
    store = MemoryStore()
    _publish_versions(store, 40)
    assert VersionChain(store).find_latest(known=39) == 40


def test_latest_found_when_old_roots_were_deleted() -> None:
    store = MemoryStore()
    _publish_versions(store, 20)
    for version in range(0, 15):
        store.delete(root_path(version))
    assert VersionChain(store).find_latest() == 20


def test_publish_is_put_if_absent() -> None:
    store = MemoryStore()
    _publish_versions(store, 0)
    assert not VersionChain(store).publish(b"other bytes", 0)


def test_hint_writer_is_rate_limited_and_flushes_on_close() -> None:
    store = CountingStore(MemoryStore())
    hint = HintWriter(store, interval_s=3600)
    for version in range(1, 200):
        hint.offer(version)
    deadline = time.monotonic() + 5
    while store.counts["put"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    hint.close(flush=True)
    # At most one write when the first offer arrived, one final write on close.
    assert 1 <= store.counts["put"] <= 2
    assert store.get(HINT_PATH) == b"199"
