"""Planning through the index (catalog.planning.plan_files, catalog.file_index) against the linear plan.

The linear plan reads every live entry and prunes it by its statistics
(``planning.prune`` over ``files()``). The indexed plan reads only the
partitions a filter fixes, or the groups whose summaries may match; the
columnar plan (``files_table()``) of a whole table reads the groups'
packs. Each must give the same files, at the current version and at every
past one.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from unittest import mock

from catalog import file_index, keys
from catalog.access import CatalogWriter
from catalog.file_columns import to_entries
from catalog.ops import Append
from catalog.datafiles import read_file
from catalog.planning import prune

_names = itertools.count()
_P = [None, "a", "b", "c"]


def _ids(files: list[Any]) -> list[str]:
    return [f.id for f in files]


def _by_id(files: list[Any]) -> list[Any]:
    return sorted(files, key=lambda f: f.id)


def _whole_plan_is_linear(table: catalog.Table) -> None:
    """The columnar plan of every file holds the linear plan's entries, field for field (in its own order)."""
    linear = table.files()
    columnar = table.files_table()
    assert columnar.schema.names[:4] == ["id", "path", "size", "rows"]
    assert _by_id(to_entries(columnar)) == _by_id(linear), "the columnar plan is not the linear plan's files"


def _same_as_linear(lake: catalog.Lakehouse, table: catalog.Table, expr: pc.Expression) -> None:
    """The indexed plan lists the linear plan's files, in its order, less only files with no matching row.

    A file the linear plan keeps only because a statistic is unknown (a
    partition column that is null in it, say) may be left out where the
    file's partition proves that no row matches: it is read to check.
    """
    linear = prune(table.files(), table.schema, expr)  # no filter: every entry, read and tested
    indexed = _ids(table.files(expr))
    kept = set(indexed)
    assert indexed == [i for i in _ids(linear) if i in kept], f"filter {expr}: not the linear plan's files"
    assert sorted(table.files_table(expr).column("id").to_pylist()) == sorted(indexed), f"filter {expr}: columnar plan"
    for entry in linear:
        if entry.id not in kept:
            rows = read_file(lake.objects, entry, table.schema).filter(expr)
            assert rows.num_rows == 0, f"filter {expr}: the indexed plan left out {entry.id}, which matches"


# -- the property ------------------------------------------------------------------

_rows = st.lists(
    st.tuples(st.integers(0, 60), st.sampled_from(_P), st.integers(0, 3), st.one_of(st.none(), st.floats(-5, 5))),
    min_size=1,
    max_size=12,
)
_action = st.one_of(
    st.tuples(st.just("append"), _rows),
    st.tuples(st.just("delete"), st.integers(0, 60)),
    st.tuples(st.just("overwrite"), st.tuples(st.sampled_from(_P[1:]), _rows)),
    st.tuples(st.just("rename"), st.none()),
    st.tuples(st.just("add"), st.none()),
    st.tuples(st.just("drop"), st.none()),
    st.tuples(st.just("widen"), st.none()),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("rollback"), st.integers(0, 5)),
)


def _batch(schema: pa.Schema, rows: list[tuple[Any, ...]], p: str | None = None) -> pa.Table:
    cols: dict[str, list[Any]] = {"id": [r[0] for r in rows], "p": [p if p is not None else r[1] for r in rows]}
    cols["q"] = [r[2] for r in rows]
    for name in schema.names:
        if name not in cols:
            cols[name] = [r[3] for r in rows] if schema.field(name).type == pa.float64() else [r[0] * 7 for r in rows]
    return pa.table({n: pa.array(cols[n], schema.field(n).type) for n in schema.names})


def _filters(schema: pa.Schema, values: list[int]) -> list[pc.Expression]:
    lo, hi = sorted(values[:2])
    out = [
        pc.field("p") == "a",
        pc.field("p").isin(["b", "c"]),
        pc.field("p").is_null(),
        (pc.field("p") == "b") & (pc.field("q") == values[2] % 4),
        (pc.field("p") == "c") & (pc.field("id") >= lo),
        (pc.field("id") >= lo) & (pc.field("id") <= hi),
        pc.field("id") == values[0],
        pc.field("q") > values[1] % 4,
        (pc.field("id") < lo) | (pc.field("p") == "b"),
        ~(pc.field("id") > hi),
        pc.field("p") != "a",
    ]
    for name in schema.names:
        if name not in ("id", "p", "q"):
            out.append(pc.field(name) > pa.scalar(1, schema.field(name).type))
            out.append(pc.field(name).is_null())
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partition_by=st.sampled_from([[], ["p"], ["p", "q"], ["q"]]),
    actions=st.lists(_action, min_size=1, max_size=6),
    values=st.lists(st.integers(0, 60), min_size=3, max_size=3),
    group_files=st.sampled_from([1, 3, file_index.GROUP_FILES]),
)
def test_indexed_plans_give_the_linear_plan_s_files(
    partition_by: list[str], actions: list[tuple[str, Any]], values: list[int], group_files: int
) -> None:
    lake = catalog.open(f"memory://planning-{next(_names)}", poll_interval_s=0)
    try:
        with mock.patch.object(file_index, "GROUP_FILES", group_files):  # a commit of more files: several groups
            _check_random_history(lake, partition_by, actions, values)
    finally:
        lake.close()


def _check_random_history(
    lake: catalog.Lakehouse, partition_by: list[str], actions: list[tuple[str, Any]], values: list[int]
) -> None:
    lake.create_namespace("n")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("q", pa.int32()), ("v", pa.float64())])
    lake.create_table("n.t", schema, partition_by=partition_by)
    versions: list[int] = []
    extra = itertools.count()
    for kind, arg in actions:
        table = lake.load_table("n.t")
        names = table.schema.names
        if kind == "append":
            version = table.append(_batch(table.schema, arg))
        elif kind == "delete":
            version = table.delete(pc.field("id") < arg)
        elif kind == "overwrite":
            p, rows = arg
            version = table.overwrite(_batch(table.schema, rows, p), filter=pc.field("p") == p)
        elif kind == "rename" and "v" in names:
            version = table.update_schema().rename_column("v", "w").commit()
        elif kind == "add":
            version = table.update_schema().add_column(f"x{next(extra)}", pa.int64()).commit()
        elif kind == "drop" and len(names) > 3:
            version = table.update_schema().drop_column(names[-1]).commit()
        elif kind == "widen" and table.schema.field("q").type == pa.int32():
            version = table.update_schema().widen("q", pa.int64()).commit()
        elif kind == "compact":
            version = lake.compact_table("n.t").version
            if version is None:
                continue  # nothing to compact
        elif kind == "rollback" and versions:
            try:
                version = lake.rollback_table("n.t", version=versions[arg % len(versions)]).version
            except ValueError as exc:  # a schema change it refuses to undo (a dropped column, a widened type)
                assert "cannot roll 'n.t' back" in str(exc)
                continue
            if version is None:
                continue  # nothing changed since
        else:
            continue
        assert version is not None
        versions.append(version)
    table = lake.load_table("n.t")
    _whole_plan_is_linear(table)
    for expr in _filters(table.schema, values):
        _same_as_linear(lake, table, expr)
    for version in versions:
        with lake.at(version=version) as past:
            old = past.load_table("n.t")
            _whole_plan_is_linear(old)
            for expr in _filters(old.schema, values)[::2]:
                _same_as_linear(lake, old, expr)


# -- what the index reads ------------------------------------------------------------


def _partitioned(lake: catalog.Lakehouse, commits: int) -> catalog.Table:
    lake.create_namespace("n")
    table = lake.create_table("n.t", pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"])
    for c in range(commits):
        table.append(pa.table({"id": list(range(c * 4, c * 4 + 4)), "p": ["a", "b", "c", "d"]}))
    return lake.load_table("n.t")


def _record_reads(lake: catalog.Lakehouse, monkeypatch: Any) -> list[bytes]:
    """The prefixes the lakehouse's snapshots scan, and the keys they get, from now on (a list that grows)."""
    read: list[bytes] = []
    snapshot_type = type(lake.store.snapshot())
    real_scan, real_batches, real_get = snapshot_type.scan, snapshot_type.scan_batches, snapshot_type.get

    def scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(kwargs.get("prefix") or b"")
        return real_scan(self, *args, **kwargs)

    def batches(self: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(kwargs.get("prefix") or b"")
        return real_batches(self, *args, **kwargs)

    def get(self: Any, key: bytes, *args: Any, **kwargs: Any) -> Any:
        read.append(key)
        return real_get(self, key, *args, **kwargs)

    monkeypatch.setattr(snapshot_type, "scan", scan)
    monkeypatch.setattr(snapshot_type, "scan_batches", batches)
    monkeypatch.setattr(snapshot_type, "get", get)
    return read


def test_a_one_partition_plan_reads_only_that_partition_s_keys(lake: catalog.Lakehouse, monkeypatch: Any) -> None:
    table = _partitioned(lake, 5)
    read = _record_reads(lake, monkeypatch)
    files = table.files(pc.field("p") == "b")
    assert len(files) == 5
    assert keys.table_files(table.id) not in read  # no read of every entry
    expected = (keys.table_layout(table.id), keys.table_def(table.id))  # and gets of the files found
    ours = [key for key in read if key.startswith(keys.table_prefix(table.id))]
    assert all(b"/pidx/" in key or key in expected or key.startswith(keys.table_files(table.id)) for key in ours)
    read.clear()
    assert len(table.files(pc.field("id") == 9)) == 1  # a range of a sorted column: the group summaries
    assert keys.table_files(table.id) not in read


def test_a_whole_table_columnar_plan_reads_the_packs_not_the_entries(lake: catalog.Lakehouse, monkeypatch: Any) -> None:
    table = _partitioned(lake, 5)
    table.delete(pc.field("id") == 5)  # one file of the second commit's group
    table = lake.load_table("n.t")
    read = _record_reads(lake, monkeypatch)
    plan = table.files_table()
    assert plan.num_rows == 19
    assert keys.table_files(table.id) not in read
    packs = [key for key in read if key.startswith(keys.group_packs(table.id))]
    assert len(packs) == 5  # one per group
    read.clear()
    assert table.files_table().num_rows == 19  # again: this process holds the unpacked packs
    ours = [key for key in read if key.startswith(keys.table_prefix(table.id))]
    assert ours == [keys.table_layout(table.id), keys.file_groups(table.id)]  # the marker, the summaries
    table.delete(pc.field("id") == 9)  # one group's pack is rewritten
    read.clear()
    table = lake.load_table("n.t")
    assert table.files_table().num_rows == 18
    reread = [key for key in read if key.startswith(keys.group_packs(table.id))]
    assert len(reread) == 1 and reread[0] in packs  # only the rewritten one
    monkeypatch.undo()
    _whole_plan_is_linear(table)


def test_a_whole_table_plan_of_many_groups_reads_their_packs_in_one_scan(lake: catalog.Lakehouse, monkeypatch: Any) -> None:
    with mock.patch.object(file_index, "GROUP_FILES", 1):  # a group per file: 20 groups
        table = _partitioned(lake, 5)
    table.delete(pc.field("id") == 5)
    table = lake.load_table("n.t")
    read = _record_reads(lake, monkeypatch)
    assert table.files_table().num_rows == 19
    assert keys.group_packs(table.id) in read  # one scan of the packs, no get each
    assert not [key for key in read if key.startswith(keys.group_packs(table.id)) and key != keys.group_packs(table.id)]
    monkeypatch.undo()
    _whole_plan_is_linear(table)


def test_a_group_without_its_pack_is_an_error_naming_it(lake: catalog.Lakehouse) -> None:
    table = _partitioned(lake, 2)
    key, _ = next(iter(lake.store.scan(prefix=keys.group_packs(table.id))))
    lake.store.delete(key)
    group = key[len(keys.group_packs(table.id)) :].decode()
    with pytest.raises(ValueError, match=f"file group {group} has a summary but no pack"):
        lake.load_table("n.t").files_table()


def test_removals_empty_groups_and_drop_clears_the_index(lake: catalog.Lakehouse) -> None:
    table = _partitioned(lake, 3)
    table.delete(pc.field("id") < 4)  # the whole first commit's group
    table = lake.load_table("n.t")
    assert len(list(lake.store.scan(prefix=keys.file_groups(table.id)))) == 2
    assert len(list(lake.store.scan(prefix=keys.group_packs(table.id)))) == 2
    assert len(table.files(pc.field("id") < 6)) == 2
    lake.drop_table("n.t")
    for prefix in (
        keys.partition_index_prefix(table.id),
        keys.file_groups(table.id),
        keys.group_files_prefix(table.id),
        keys.group_packs(table.id),
    ):
        assert list(lake.store.scan(prefix=prefix)) == []
    assert lake.store.get(keys.table_layout(table.id)) is None


# -- backward compatibility ------------------------------------------------------------


def _strip_index(lake: catalog.Lakehouse, table_id: str) -> None:
    """Make the table as a lakehouse written before the index has it: its file keys only."""
    prefix = keys.table_prefix(table_id)
    for part in (b"layout", b"pidx/", b"grp/", b"gfile/", b"gpack/"):
        for key, _ in list(lake.store.scan(prefix=prefix + part)):
            lake.store.delete(key)


def test_a_table_without_the_index_plans_every_entry_correctly(lake: catalog.Lakehouse) -> None:
    table = _partitioned(lake, 4)
    _strip_index(lake, table.id)
    old_version = lake.store.version
    table = lake.load_table("n.t")
    assert len(table.files(pc.field("p") == "a")) == 4
    table.append(pa.table({"id": [100], "p": ["a"]}))  # writes index keys, but the index still lacks the old files
    table.delete(pc.field("id") == 4)
    table = lake.load_table("n.t")
    for expr in (pc.field("p") == "a", pc.field("id") >= 99, pc.field("id") == 5):
        _same_as_linear(lake, table, expr)
    assert len(table.files(pc.field("p") == "a")) == 4  # 4 old, one appended, the one holding id 4 deleted
    with lake.at(version=old_version) as past:
        _same_as_linear(lake, past.load_table("n.t"), pc.field("p") == "b")


def test_a_table_indexed_before_packs_plans_every_file_correctly(lake: catalog.Lakehouse) -> None:
    """Layout 1 (partition keys and groups, no packs): its whole plans read every entry."""
    table = _partitioned(lake, 3)
    for key, _ in list(lake.store.scan(prefix=keys.group_packs(table.id))):
        lake.store.delete(key)
    lake.store.put(keys.table_layout(table.id), json.dumps({"index": 1}).encode())
    table = lake.load_table("n.t")
    assert table.files_table().num_rows == 12
    _whole_plan_is_linear(table)
    table.append(pa.table({"id": [100, 101], "p": ["a", "b"]}))  # a packed group beside the unpacked ones
    table.delete(pc.field("id") <= 4)  # empties the first group, which has no pack
    table = lake.load_table("n.t")
    _whole_plan_is_linear(table)
    assert len(list(lake.store.scan(prefix=keys.file_groups(table.id)))) == 3
    for expr in (pc.field("p") == "a", pc.field("id") >= 99, pc.field("id") == 6):
        _same_as_linear(lake, table, expr)


def test_a_malformed_layout_marker_is_an_error_naming_the_table(lake: catalog.Lakehouse) -> None:
    table = _partitioned(lake, 1)
    lake.store.put(keys.table_layout(table.id), b"{}")
    with pytest.raises(ValueError, match=f"table {table.id}: malformed planning index marker"):
        lake.load_table("n.t").files_table()


# -- appends from two processes --------------------------------------------------------

_APPEND = """
import sys, pyarrow as pa, catalog
lake = catalog.open(sys.argv[1], poll_interval_s=0)
lake.load_table("n.t").append(pa.table({"id": [1000], "p": ["a"]}))
lake.close()
"""


def test_an_append_never_conflicts_with_another_process_s_append(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    lake = catalog.open(url, poll_interval_s=0)
    try:
        table = _partitioned(lake, 2)
        files = table.write_files(pa.table({"id": [2000], "p": ["a"]}))
        txn = lake.store.begin()  # SERIALIZABLE, as every catalog commit
        Append(table="n.t", table_id=table.id, files=files, schema=table.schema).apply(CatalogWriter(txn), None, False)  # type: ignore[arg-type]
        # Another process appends to the same partition while ours is open.
        subprocess.run([sys.executable, "-c", _APPEND, url], check=True, timeout=120)
        txn.commit()  # a ConflictError here: the two appends shared a key
        lake.refresh()
        table = lake.load_table("n.t")
        assert sorted(r for f in table.files(pc.field("p") == "a") for r in [f.rows]) == [1, 1, 1, 1]
        _same_as_linear(lake, table, pc.field("id") >= 1000)
    finally:
        lake.close()
