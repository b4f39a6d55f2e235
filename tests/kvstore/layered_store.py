"""Random layered stores for the read-path tests: a memtable, L0 SSTs and a
sorted run built from one random history of versions, with tombstones, TTLs
and keys whose versions straddle small blocks (test_pointget, test_arrow_scan)."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from kvstore.cache import BlockCache
from kvstore.format.rows import DELETE, PUT, Row
from kvstore.format.sst import SSTReader, write_sst
from kvstore.memtable import Memtable
from kvstore.objstore.memory import MemoryStore
from kvstore.state import Layers, SortedRun

NOW_MS = 10_000
KEY_POOL = [b"a", b"ab", b"abc", b"b", b"b\x00", b"ba", b"c", b"k" * 40, b"\xff", b"\xff\xff"]
ABSENT = [b"0", b"aa", b"abd", b"bb", b"d", b"\xfe", b"\xff\x00"]

# A version maps keys to (kind, value, expire_at_ms); expiries sit around NOW_MS.
mutations = st.one_of(
    st.tuples(st.just(PUT), st.binary(max_size=30), st.sampled_from([None, None, NOW_MS - 1, NOW_MS, NOW_MS + 1])),
    st.tuples(st.just(DELETE), st.none(), st.none()),
)
versions = st.lists(st.dictionaries(st.sampled_from(KEY_POOL), mutations, min_size=1, max_size=6), min_size=1, max_size=25)


def rows_of(history: list[dict]) -> list[Row]:
    """Every row of ``history`` (version i has seq i + 1)."""
    return [(key, seq, kind, value, expire) for seq, version in enumerate(history, 1)
            for key, (kind, value, expire) in version.items()]


def storage_order(rows: list[Row]) -> list[Row]:
    """``rows`` in SST order: key ascending, then seq descending."""
    return sorted(rows, key=lambda row: (row[0], -row[1]))


def model_row(rows: list[Row], key: bytes, snapshot_seq: int) -> Row | None:
    """The newest row of ``key`` with ``seq <= snapshot_seq``: what a point get must return."""
    visible = [row for row in rows if row[0] == key and row[1] <= snapshot_seq]
    return max(visible, key=lambda row: row[1]) if visible else None


def build_layers(
    history: list[dict], cuts: list[int], run_files: int, block_size: int, cache_bytes: int | None, implementation: str,
) -> Layers:
    """Layers over ``history``: versions before cuts[0] in a sorted run, each
    span between cuts an L0 SST, the rest in the memtable."""
    store = MemoryStore()
    cache = None if cache_bytes is None else BlockCache(cache_bytes)
    bounds = [0, *cuts, len(history)]
    segments = []
    for lo, hi in itertools.pairwise(bounds):
        segments.append([(k, s, kind, v, e) for (k, s, kind, v, e) in rows_of(history) if lo < s <= hi])
    names = itertools.count()

    def sst(rows: list[Row]) -> SSTReader:
        path = f"sst/{next(names)}.sst"
        info = write_sst(store, path, storage_order(rows), block_size=block_size)
        return SSTReader.open(store, path, cache=cache, size=info.size, implementation=implementation)

    run_rows = storage_order(segments[0])
    run: list[SSTReader] = []
    if run_rows:
        keys = sorted({row[0] for row in run_rows})
        per_file = max(1, -(-len(keys) // run_files))
        for i in range(0, len(keys), per_file):
            chunk = set(keys[i:i + per_file])
            run.append(sst([row for row in run_rows if row[0] in chunk]))
    l0 = [sst(rows) for rows in segments[1:-1] if rows]
    memtable = Memtable()
    for seq in range(bounds[-2] + 1, len(history) + 1):
        memtable.apply([(k, seq, kind, v, e) for k, (kind, v, e) in history[seq - 1].items()])
    return Layers(memtable, tuple(reversed(l0)), (SortedRun(tuple(run)),) if run else ())
