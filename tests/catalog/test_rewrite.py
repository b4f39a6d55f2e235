"""lake.rewrite_data_files: compaction by condition, bin-packed or sorted, same rows, rebasing over appends."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from catalog import Lakehouse

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64())])


def _rows(lake: Lakehouse) -> list[tuple[object, ...]]:
    data = lake.load_table("ns.t").scan().to_arrow()
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)), key=repr)


def _small_files(lake: Lakehouse, n: int = 6) -> catalog.Table:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    for i in range(n):
        t.append(pa.table({"id": [i, 100 + i], "day": ["a", "b"], "v": [float(i), None]}, schema=SCHEMA))
    return t


def test_binpack_keeps_the_rows_in_fewer_files_per_partition(lake: Lakehouse) -> None:
    _small_files(lake)
    before = _rows(lake)
    report = lake.rewrite_data_files("ns.t")
    files = lake.load_table("ns.t").files()
    assert report.rewritten_data_files_count == 12 and report.added_data_files_count == len(files) == 2
    assert report.version == lake.version and report.attempts == 1
    assert report.rewritten_bytes_count > report.added_bytes_count > 0
    assert _rows(lake) == before
    assert lake.history(limit=1)[0].operations[0]["kind"] == "compact"
    assert lake.rewrite_data_files("ns.t").version is None  # nothing small is left


def test_where_selects_only_files_holding_matching_rows(lake: Lakehouse) -> None:
    _small_files(lake)
    before = _rows(lake)
    report = lake.rewrite_data_files("ns.t", where="day = 'a' AND id < 4")
    assert report.rewritten_data_files_count == 4  # ids 0..3 of partition a
    assert len(lake.load_table("ns.t").files(filter=pc.field("day") == "b")) == 6
    assert _rows(lake) == before


def test_sort_orders_the_rows_within_each_new_file(lake: Lakehouse) -> None:
    _small_files(lake)
    before = _rows(lake)
    lake.rewrite_data_files("ns.t", strategy="sort", sort_order="id DESC", target_file_bytes=1 << 20)
    table = lake.load_table("ns.t")
    for f in table.files():
        ids = catalog.datafiles.read_file(lake.objects, f, table.schema).column("id").to_pylist()
        assert ids == sorted(ids, reverse=True)
    assert _rows(lake) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"strategy": "zorder"}, ValueError, "strategy must be one of binpack, sort"),
        ({"strategy": "sort"}, ValueError, "needs sort_order"),
        ({"sort_order": "id"}, ValueError, "sort_order goes with strategy 'sort'"),
        ({"strategy": "sort", "sort_order": "nope"}, ValueError, "column 'nope'"),
        ({"strategy": "sort", "sort_order": "id SIDEWAYS"}, ValueError, "is not 'column"),
        ({"target_file_bytes": 10}, ValueError, "at least 1024"),
        ({"target_file_bytes": "big"}, TypeError, "target_file_bytes"),
        ({"where": "nope = 1"}, ValueError, "where 'nope = 1'"),
        ({"where": "id >"}, ValueError, "where 'id >'"),
    ],
)
def test_bad_arguments_name_the_argument_and_change_nothing(lake: Lakehouse, kwargs: dict, error: type, match: str) -> None:
    _small_files(lake, 2)
    head = lake.version
    with pytest.raises(error, match=match):
        lake.rewrite_data_files("ns.t", **kwargs)
    assert lake.refresh() == head


def test_appends_committed_during_the_rewrite_are_kept(lake: Lakehouse) -> None:
    """A writer thread appends while rewrites run: every row is there, every append committed."""
    _small_files(lake)
    done = threading.Event()
    appended: list[int] = []

    def append() -> None:
        table = lake.load_table("ns.t")
        i = 1000
        while not done.is_set() or len(appended) < 5:
            table.append(pa.table({"id": [i], "day": ["a"], "v": [1.0]}, schema=SCHEMA))
            appended.append(i)
            i += 1

    writer = threading.Thread(target=append)
    writer.start()
    try:
        for _ in range(3):
            lake.rewrite_data_files("ns.t")
    finally:
        done.set()
        writer.join()
    ids = {r[0] for r in _rows(lake)}
    assert set(appended) <= ids and len(_rows(lake)) == 12 + len(appended)
