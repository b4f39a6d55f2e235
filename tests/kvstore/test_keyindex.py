"""The compiled block search (cython_ext/_keyindex.pxd: key heads in a static
search tree, per-block summaries) against bisect and the pure-Python
``PyBlockView``, on blocks large enough for trees of several levels: keys of
one length whose heads hold all of them (no key bytes read), keys of mixed
lengths, several versions per key, deletes, expiries and fixed or varying
value lengths."""

from __future__ import annotations

import bisect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.format.block_view import PyBlockView, compiled
from kvstore.format.rows import DELETE, MAX_SEQ, PUT, Row
from kvstore.format.sst import SSTReader, write_sst
from kvstore.objstore.memory import MemoryStore

pytestmark = pytest.mark.skipif(compiled is None, reason="cython_ext._pointget is not built")

NOW_MS = 5_000


def _one_block(rows: list[Row]) -> tuple[Any, SSTReader, SSTReader]:
    """The rows as one SST block: its batch, and a compiled and a Python reader."""
    store = MemoryStore()
    info = write_sst(store, "sst/big.sst", rows, block_size=1 << 30)
    fast = SSTReader.open(store, "sst/big.sst", size=info.size, implementation="cython")
    slow = SSTReader.open(store, "sst/big.sst", size=info.size, implementation="python")
    block, lo, _ = next(fast.iter_segments())
    assert lo == 0 and block.num_rows == len(rows)
    return block.batch, fast, slow


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[Row], list[bytes]]:
    """Rows of one block (storage order) and keys to look up in it."""
    fixed = draw(st.booleans())
    prefix = draw(st.sampled_from([b"", b"user", b"0000000000"]))
    # One length: up to 8 bytes after the shared prefix, each key is whole in its head; more, and it is not.
    width = draw(st.sampled_from([1, 3, 8, 9, 12])) if fixed else 0
    # Sizes drawn first, contents from a seeded generator: trees of 1 to 4 levels.
    rng = draw(st.randoms(use_true_random=False))
    numbers = {rng.randrange(10**12) for _ in range(draw(st.sampled_from([1, 7, 60, 600, 3000])))}
    if fixed:
        keys = sorted(prefix + b"%0*d" % (width, n % 10**width) for n in numbers)
    else:
        keys = sorted(prefix + b"%d" % n + b"\x00" * (n % 3) for n in numbers)
    keys = sorted(set(keys))
    value_length = draw(st.sampled_from([None, 0, 7, 100]))  # None: lengths vary
    with_deletes = draw(st.booleans())
    with_expiry = draw(st.booleans())
    top_seq = draw(st.sampled_from([10, 1000, MAX_SEQ - 1]))
    rows: list[Row] = []
    for i, key in enumerate(keys):
        for v in range(i % 3 + 1):  # 1-3 versions, newest first
            seq = top_seq - v * 2 - (i % 2)
            kind = DELETE if with_deletes and (i + v) % 5 == 0 else PUT
            value = None if kind == DELETE else bytes([i % 251]) * (i % 13 if value_length is None else value_length)
            expire = NOW_MS - 1 + (i % 3) if with_expiry and kind == PUT and i % 4 == 0 else None
            rows.append((key, seq, kind, value, expire))
    probes = [*draw(st.lists(st.sampled_from(keys), max_size=40)), keys[0], keys[-1], b"\x00", b"\xff" * 20,
              *(k + b"\x00" for k in keys[:5]), *(k[:-1] for k in keys[:5] if len(k) > 1),
              *draw(st.lists(st.binary(min_size=1, max_size=20), max_size=10)),
              *(prefix + b"%0*d" % (width, n % 10**width) for n in draw(st.lists(st.integers(0, 10**12), max_size=20)))]
    return rows, probes


@settings(max_examples=40, deadline=None)
@given(block=blocks())
def test_large_blocks_search_like_bisect_and_the_reference(block: tuple[list[Row], list[bytes]]) -> None:
    rows, probes = block
    batch, fast_reader, slow_reader = _one_block(rows)
    fast, slow = compiled.BlockView(batch, 1), PyBlockView(batch, 1)
    column = [row[0] for row in rows]
    seqs = sorted({row[1] for row in rows})
    snapshots = [0, seqs[0], seqs[len(seqs) // 2], seqs[-1] - 1, seqs[-1], MAX_SEQ]
    for probe in probes:
        assert fast.lower_bound(probe) == bisect.bisect_left(column, probe)
        for snapshot in snapshots:
            found = fast.find(probe, snapshot)
            assert found == slow.find(probe, snapshot)
            if found >= 0:
                assert fast.row(found) == slow.row(found)
                assert fast.visible_value(found, NOW_MS) == slow.visible_value(found, NOW_MS)
            assert fast_reader.get(probe, snapshot) == slow_reader.get(probe, snapshot)
    last_keys = tuple(sorted(set(column)))
    for probe in probes:
        assert compiled.tuple_lower_bound(last_keys, probe) == bisect.bisect_left(last_keys, probe)


def test_tree_levels_at_their_boundaries() -> None:
    """Blocks of 1, 8, 9, 64, 65, 512 and 513 rows: a tree level fills up
    exactly, or one key spills into a new group or level."""
    for n in (1, 2, 8, 9, 63, 64, 65, 511, 512, 513):
        keys = [b"k%05d" % (i * 2) for i in range(n)]
        rows = [(key, 1, PUT, b"v", None) for key in keys]
        batch, _fast_reader, _slow_reader = _one_block(rows)
        fast = compiled.BlockView(batch, 1)
        for i in range(-1, 2 * n + 2):
            probe = b"k%05d" % i if i >= 0 else b"k"
            assert fast.lower_bound(probe) == bisect.bisect_left(keys, probe), (n, probe)
            assert compiled.tuple_lower_bound(tuple(keys), probe) == bisect.bisect_left(keys, probe), (n, probe)
