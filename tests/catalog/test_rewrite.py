"""lake.rewrite_data_files: compaction by condition, bin-packed or sorted, same rows, rebasing over appends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
import kvstore
from catalog import Lakehouse
from catalog.errors import RetryableConflictError
from catalog.rewrite import RewriteReport
from kvstore.objstore.forwarding import ForwardingStore
from kvstore.objstore.local import LocalStore
from lake_peer import QUIET

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


class _RewriteOnFirstOutput(ForwardingStore):
    """Runs ``meanwhile`` once, when the first data file is written through this handle.

    A rewrite writes its output after it planned and read its inputs: ``meanwhile``
    then lands in the window between that plan and the rewrite's commit.
    """

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.meanwhile: Callable[[], object] | None = None

    def put(self, path: str, data: bytes) -> None:
        hook, self.meanwhile = (self.meanwhile, None) if path.endswith(".parquet") else (None, self.meanwhile)
        if hook is not None:
            hook()
        super().put(path, data)


@pytest.mark.parametrize("compact", ["rewrite_data_files", "compact_table"])
def test_a_rewrite_whose_inputs_another_rewrite_took_after_its_plan_adds_no_rows_twice(tmp_path: Path, compact: str) -> None:
    """Two compactions plan the same files; the second to commit must not add their rows again.

    ``rewrite_data_files`` redoes its plan on the new version (nothing is left
    to rewrite); ``compact_table`` raises RetryableConflictError, as documented.

    The second one's inputs were removed after its plan but before its commit
    began: its commit must see they are gone (and redo its plan), as it does
    when they go during its commit. The stores read linearizably (the default):
    the commit's transaction then starts at the newest version, after the
    other compaction's, so no conflict at the KV layer reports the race.
    """
    store = _RewriteOnFirstOutput(LocalStore(tmp_path, fsync=False))
    options = dict(QUIET, fsync=False, read_consistency="linearizable")
    with Lakehouse(kvstore.open(store, **options)) as lake, Lakehouse(kvstore.open(LocalStore(tmp_path, fsync=False), **options)) as other:
        _small_files(lake)
        before = _rows(lake)

        def compact_other() -> None:
            other.refresh()
            assert getattr(other, compact)("ns.t").version is not None

        store.meanwhile = compact_other
        outcome: object
        try:
            outcome = getattr(lake, compact)("ns.t")
        except RetryableConflictError as exc:
            outcome = exc
        assert store.meanwhile is None  # the other compaction committed inside ours
        lake.refresh(), other.refresh()
        assert _rows(lake) == before  # not each row twice
        assert _rows(other) == before
        assert len(lake.load_table("ns.t").files()) == 2
        if compact == "rewrite_data_files":
            assert isinstance(outcome, RewriteReport) and (outcome.attempts, outcome.version) == (2, None)
        else:
            assert isinstance(outcome, RetryableConflictError) and "was removed" in str(outcome)
