"""Planning through the index (catalog.planning.plan_files, catalog.file_index) against the linear plan.

The linear plan reads every live entry and prunes it by its statistics
(``planning.prune`` over ``files()``). The indexed plan reads only the
partitions a filter fixes, or the groups whose summaries may match; it must
give the same files, at the current version and at every past one.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import keys
from catalog.access import CatalogWriter
from catalog.ops import Append
from catalog.datafiles import read_file
from catalog.planning import prune

_names = itertools.count()
_P = [None, "a", "b", "c"]


def _ids(files: list[Any]) -> list[str]:
    return [f.id for f in files]


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


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partition_by=st.sampled_from([[], ["p"], ["p", "q"], ["q"]]),
    actions=st.lists(_action, min_size=1, max_size=6),
    values=st.lists(st.integers(0, 60), min_size=3, max_size=3),
)
def test_indexed_plans_give_the_linear_plan_s_files(
    partition_by: list[str], actions: list[tuple[str, Any]], values: list[int]
) -> None:
    lake = catalog.open(f"memory://planning-{next(_names)}", poll_interval_s=0)
    try:
        lake.create_namespace("n")
        schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("q", pa.int32()), ("v", pa.float64())])
        lake.create_table("n.t", schema, partition_by=partition_by)
        versions = []
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
            else:
                continue
            versions.append(version)
        table = lake.load_table("n.t")
        for expr in _filters(table.schema, values):
            _same_as_linear(lake, table, expr)
        for version in versions:
            with lake.at(version=version) as past:
                old = past.load_table("n.t")
                for expr in _filters(old.schema, values)[::2]:
                    _same_as_linear(lake, old, expr)
    finally:
        lake.close()


# -- what the index reads ------------------------------------------------------------


def _partitioned(lake: catalog.Lakehouse, commits: int) -> catalog.Table:
    lake.create_namespace("n")
    table = lake.create_table("n.t", pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"])
    for c in range(commits):
        table.append(pa.table({"id": list(range(c * 4, c * 4 + 4)), "p": ["a", "b", "c", "d"]}))
    return lake.load_table("n.t")


def test_a_one_partition_plan_reads_only_that_partition_s_keys(lake: catalog.Lakehouse, monkeypatch: Any) -> None:
    table = _partitioned(lake, 5)
    read: list[bytes] = []
    snapshot_type = type(lake.store.snapshot())
    real_scan, real_batches = snapshot_type.scan, snapshot_type.scan_batches

    def scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(kwargs.get("prefix") or b"")
        return real_scan(self, *args, **kwargs)

    def batches(self: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(kwargs.get("prefix") or b"")
        return real_batches(self, *args, **kwargs)

    monkeypatch.setattr(snapshot_type, "scan", scan)
    monkeypatch.setattr(snapshot_type, "scan_batches", batches)
    files = table.files(pc.field("p") == "b")
    assert len(files) == 5
    assert keys.table_files(table.id) not in read  # no read of every entry
    assert all(b"/pidx/" in prefix for prefix in read if prefix.startswith(keys.table_prefix(table.id)))
    read.clear()
    assert len(table.files(pc.field("id") == 9)) == 1  # a range of a sorted column: the group summaries
    assert keys.table_files(table.id) not in read


def test_removals_empty_groups_and_drop_clears_the_index(lake: catalog.Lakehouse) -> None:
    table = _partitioned(lake, 3)
    table.delete(pc.field("id") < 4)  # the whole first commit's group
    table = lake.load_table("n.t")
    assert len(list(lake.store.scan(prefix=keys.file_groups(table.id)))) == 2
    assert len(table.files(pc.field("id") < 6)) == 2
    lake.drop_table("n.t")
    for prefix in (keys.partition_index_prefix(table.id), keys.file_groups(table.id), keys.group_files_prefix(table.id)):
        assert list(lake.store.scan(prefix=prefix)) == []
    assert lake.store.get(keys.table_layout(table.id)) is None


# -- backward compatibility ------------------------------------------------------------


def _strip_index(lake: catalog.Lakehouse, table_id: str) -> None:
    """Make the table as a lakehouse written before the index has it: its file keys only."""
    prefix = keys.table_prefix(table_id)
    for part in (b"layout", b"pidx/", b"grp/", b"gfile/"):
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
