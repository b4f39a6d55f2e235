"""A whole-table plan of many file groups (catalog.file_index.live_table) against the linear plan.

A process that lacks a table's unpacked packs reads them in a few key
ranges, each scanned and unpacked on its own thread; packs written before
compression (plain Arrow IPC, as earlier versions stored them) sit beside
compressed ones. The columnar plan must hold exactly the linear plan's
entries whatever the mix.
"""

from __future__ import annotations

import itertools
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import file_index, keys
from catalog.datafiles import DataFile, new_file_id
from catalog.file_columns import to_entries
from catalog.schema import field_id
from plain_pack_util import plain_pack

_names = itertools.count()
_SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.int64())])


def _table_of_groups(lake: catalog.Lakehouse, groups: int) -> tuple[catalog.Table, list[DataFile]]:
    """A table of ``groups`` one-file groups (placeholder files whose entries carry their statistics)."""
    lake.create_namespace("n")
    table = lake.create_table("n.t", _SCHEMA, partition_by=["p"])
    ids = {f.name: str(field_id(f)) for f in table.schema}
    entries = []
    for n in range(groups):
        fid = new_file_id()
        entries.append(DataFile(
            id=fid,
            # Every tenth file lives outside the table's directory: its path is stored, not rebuilt.
            path=f"{table.location}/{fid}.parquet" if n % 10 else f"{table.location}/imported/{n}.parquet",
            size=0,
            rows=2,
            partition={ids["p"]: n % 7},
            stats={ids["id"]: [2 * n, 2 * n + 1, 0], ids["p"]: [n % 7, n % 7, 0]},
        ))
    for entry in entries:
        lake.objects.put(entry.path, b"")
    with mock.patch.object(file_index, "GROUP_FILES", 1):
        table.commit_files(entries)
    return lake.load_table("n.t"), entries


def _ranged_scans(lake: catalog.Lakehouse, monkeypatch: Any) -> list[dict[str, Any]]:
    """The arguments of every ``scan_batches`` of the lakehouse's snapshots from now on (a list that grows)."""
    calls: list[dict[str, Any]] = []
    snapshot_type = type(lake.store.snapshot())
    real = snapshot_type.scan_batches

    def batches(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(snapshot_type, "scan_batches", batches)
    return calls


@pytest.mark.parametrize("groups", [20, 140, 270])  # read in one key range, two, four
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_first_whole_plan_of_many_groups_is_the_linear_plan(groups: int, data: Any, monkeypatch: Any) -> None:
    lake = catalog.open(f"memory://file-index-test-{next(_names)}", poll_interval_s=0)
    try:
        table, entries = _table_of_groups(lake, groups)
        packs = dict(lake.store.scan(prefix=keys.group_packs(table.id)))
        for key in data.draw(st.lists(st.sampled_from(sorted(packs)), max_size=30, unique=True), label="plain packs"):
            lake.store.put(key, plain_pack(packs[key]))
        removed = data.draw(st.lists(st.sampled_from(entries), max_size=20, unique_by=lambda e: e.id), label="removed")
        if removed:
            table.commit_files([], mode="replace", replaced=removed)
        table = lake.load_table("n.t")
        with monkeypatch.context() as patch:
            calls = _ranged_scans(lake, patch)
            columnar = table.files_table()
        pack_scans = [c for c in calls if c.get("prefix") == keys.group_packs(table.id) or "start" in c]
        live = groups - len(removed)  # a group per file
        # A few packs are read with a get each; more in key ranges of 64 at least, 4 at most.
        expected = 0 if live < 16 else max(1, min(4, live // 64))
        assert len(pack_scans) == expected, "the packs were not read in the expected key ranges"
        linear = table.files()
        assert sorted(to_entries(columnar), key=lambda f: f.id) == sorted(linear, key=lambda f: f.id)
        assert len(linear) == groups - len(removed)
    finally:
        lake.close()


def test_a_group_without_its_pack_among_many_is_an_error_naming_it(lake: catalog.Lakehouse) -> None:
    table, _ = _table_of_groups(lake, 140)  # read in two ranges
    keys_ = [key for key, _ in lake.store.scan(prefix=keys.group_packs(table.id))]
    lost = keys_[len(keys_) // 2 + 3]  # in the second range
    lake.store.delete(lost)
    group = lost[len(keys.group_packs(table.id)) :].decode()
    with pytest.raises(ValueError, match=f"file group {group} has a summary but no pack"):
        lake.load_table("n.t").files_table()
