"""File entries in columns (catalog.file_columns): a pack and a plan table hold exactly the entries put in.

Packs are stored with their buffers compressed; packs stored before that
(plain Arrow IPC streams of the same table) must read the same.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.datafiles import DataFile
from catalog.file_columns import SCHEMA, from_entries, pack, to_entries, unpack, unpack_each, without
from plain_pack_util import plain_pack

# File ids are 32 hex digits; a pack takes ids of any length.
_hex = st.text("0123456789abcdef", min_size=32, max_size=32) | st.text("0123456789abcdef", min_size=1, max_size=40)
_value = st.one_of(st.none(), st.integers(-(2**62), 2**62), st.sampled_from(["", "a", "é\n\"x"]), st.floats(-1e300, 1e300))


@st.composite
def _entry(draw: Any) -> DataFile:
    fid = draw(_hex)
    prefix = draw(st.sampled_from(["data/t1/", "s3://b/lake/t1/", ""]))
    path = draw(st.sampled_from([f"{prefix}{fid}.parquet", f"{prefix}other/{fid}.parquet", "imported/x.parquet"]))
    size = draw(st.integers(8, 2**40))
    footer = draw(st.one_of(st.none(), st.integers(8, size)))
    return DataFile(
        id=fid,
        path=path,
        size=size,
        rows=draw(st.integers(0, 2**40)),
        partition=draw(st.dictionaries(st.sampled_from(["1", "2"]), _value, max_size=2)),
        stats=draw(st.dictionaries(st.sampled_from(["1", "2", "3"]), st.lists(_value, min_size=3, max_size=3), max_size=3)),
        crc32c=draw(st.one_of(st.none(), st.integers(0, 2**32 - 1))),
        parquet_field_ids=draw(st.booleans()),
        footer_size=footer,
        footer_crc32c=None if footer is None else draw(st.integers(0, 2**32 - 1)),
        column_ids=draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b c"]), st.sampled_from(["1", "2"]), max_size=2))),
    )


_entries = st.lists(_entry(), min_size=1, max_size=5, unique_by=lambda f: f.id)


@settings(max_examples=40, deadline=None)
@given(files=_entries, data=st.data())
def test_a_pack_holds_its_entries_and_loses_exactly_the_removed_ones(files: list[DataFile], data: Any) -> None:
    raw = pack(files)
    table = unpack(raw)
    assert table.schema == SCHEMA
    assert to_entries(table) == files
    assert to_entries(from_entries(files)) == files
    removed = data.draw(st.sets(st.sampled_from([f.id for f in files] + ["0" * 32])))
    rest, lost = without(raw, removed)
    kept = [f for f in files if f.id not in removed]
    assert lost == len(files) - len(kept)
    assert (rest is None) == (not kept)
    if rest is not None:
        assert to_entries(unpack(rest)) == kept


def test_an_empty_plan_table_has_the_schema() -> None:
    assert from_entries([]).schema == SCHEMA
    assert to_entries(from_entries([])) == []


def test_unpacking_what_is_not_a_pack_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a file group pack"):
        unpack(b"not arrow")


@settings(max_examples=15, deadline=None)
@given(groups=st.lists(st.tuples(_entries, st.booleans()), min_size=1, max_size=3), data=st.data())
def test_packs_stored_before_compression_read_as_they_did(groups: list[tuple[list[DataFile], bool]], data: Any) -> None:
    stored = [plain_pack(pack(files)) if plain else pack(files) for files, plain in groups]
    assert [to_entries(t) for t in unpack_each(stored)] == [files for files, _ in groups]
    files, _ = groups[0]
    removed = data.draw(st.sets(st.sampled_from([f.id for f in files])))
    rest, lost = without(plain_pack(pack(files)), removed)
    kept = [f for f in files if f.id not in removed]
    assert lost == len(removed)
    assert (rest is None) == (not kept)
    if rest is not None:
        assert to_entries(unpack(rest)) == kept


def test_a_pack_is_stored_compressed() -> None:
    files = [
        DataFile(id=f"{n:032x}", path=f"data/t1/{n:032x}.parquet", size=100, rows=4, partition={"2": n % 3},
                 stats={"1": [4 * n, 4 * n + 3, 0], "2": [n % 3, n % 3, 0]})
        for n in range(1_000)
    ]
    raw = pack(files)
    assert len(raw) * 2 < len(plain_pack(raw))
    assert to_entries(unpack(raw)) == files
