"""Derived Iceberg metadata that costs what a change costs (catalog.iceberg_derived, issue 38).

Deriving one more version after an append finds the files it added through
the planning index's file groups (``iceberg_derived.files_added``), not by
comparing every file key at two versions. These tests hold that path to
the model it replaces: the files it finds are exactly the live keys that
are new (property test), the bytes a version-by-version derivation writes
are those the key-comparing derivation writes, and a commit whose
summaries left the table out is never missed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.table import StaticTable

import catalog
from catalog import iceberg_derived, keys

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.int32())])


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = table.column_names
    return [tuple(columns), *sorted((tuple(r[c] for c in columns) for r in table.to_pylist()), key=repr)]


def _native(lake: catalog.Lakehouse, version: int) -> list[tuple[Any, ...]]:
    with lake.at(version=version) as past:
        return _rows(past.load_table("ns.t").scan().to_arrow())


def _conformed(t: catalog.Table, ids: list[int], days: list[str]) -> pa.Table:
    """Rows for the table's current schema: ids and days given, every other column derived from the id."""
    data = {}
    for f in t.schema:
        data[f.name] = {"id": ids, "day": days}.get(f.name) or pa.array([i * 10 for i in ids]).cast(f.type)
    return pa.table(data, schema=t.schema)


def _hidden_append(lake: catalog.Lakehouse, ids: list[int]) -> None:
    """Append in a transaction so large that its history keeps no summary naming ns.t (transactions.bounded)."""
    with lake.transaction() as tx:
        for i in range(450):
            tx.create_table(f"ns.filler_{ids[0]}_{i}", pa.schema([("x", pa.int64())]))
        t = tx.load_table("ns.t")
        t.append(_conformed(t, ids, ["mon"] * len(ids)))


_STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(st.sampled_from(["mon", "tue", "wed"]), min_size=1, max_size=3)),
    st.tuples(st.just("append"), st.lists(st.sampled_from(["mon", "tue", "wed"]), min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("overwrite"), st.sampled_from(["mon", "tue", "wed"])),
    st.tuples(st.just("evolve"), st.sampled_from(["add", "widen"])),
    st.tuples(st.just("hidden"), st.integers(1, 2)),
    st.tuples(st.just("compact"), st.none()),
)


def _play(lake: catalog.Lakehouse, kind: str, arg: Any, next_id: int) -> int:
    """Apply one generated step to ns.t (one lakehouse version); the next unused id."""
    t = lake.load_table("ns.t")
    if kind == "append":
        t.append(_conformed(t, list(range(next_id, next_id + len(arg))), arg))
        return next_id + len(arg)
    if kind == "hidden":
        _hidden_append(lake, list(range(next_id, next_id + arg)))
        return next_id + arg
    if kind == "compact":
        lake.compact_table("ns.t")
    elif kind == "delete":
        t.delete(pc.field("id") < arg)
    elif kind == "overwrite":
        t.overwrite(_conformed(t, [next_id], [arg]), filter=pc.field("day") == arg)
        return next_id + 1
    elif arg == "add":
        t.update_schema().add_column(f"c{len(t.schema)}", pa.int32()).commit()
    elif any(f.type == pa.int32() for f in t.schema):
        t.update_schema().widen(next(f.name for f in t.schema if f.type == pa.int32()), pa.int64()).commit()
    return next_id


def _file_entries(lake: catalog.Lakehouse, table_id: str, version: int) -> dict[bytes, bytes]:
    with lake.store.at(version=version) as snap:
        return dict(snap.scan(prefix=keys.table_files(table_id)))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=7))
def test_files_added_and_changed_are_exactly_the_live_file_keys_that_came_and_went(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("added")
    with catalog.open(str(root / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        table_id = lake.create_table("ns.t", SCHEMA, partition_by=["day"]).id
        next_id = 0
        for kind, arg in steps:
            before = lake.version
            next_id = _play(lake, kind, arg, next_id)
            after = lake.version
            old, new = _file_entries(lake, table_id, before), _file_entries(lake, table_id, after)
            model = sorted((k, v) for k, v in new.items() if k not in old)
            (info,) = lake.store.history(limit=1, start=after)
            seqs = frozenset(
                c["seq"] for c in info.commits if any(op.get("table_id") == table_id for op in c["summary"]["ops"])
            )
            with lake.store.at(version=before) as snap:
                since = snap.seq
            if kind in ("append", "evolve", "hidden"):  # files_added is asked about changes that removed nothing
                with lake.store.at(version=after) as snap:
                    found = iceberg_derived.files_added(snap, table_id, seqs, since, len(model))
                    # A count other than the summaries' is refused, not trusted.
                    assert iceberg_derived.files_added(snap, table_id, seqs, since, len(model) + 1) is None
                assert found is None or sorted(found) == model, (kind, arg)
                if kind == "append":
                    assert found is not None  # what keeps a load after an append cheap
                if kind == "hidden":
                    assert found is None  # its commit names no table: the caller compares the keys
            gone = sorted((k, v) for k, v in old.items() if k not in new)
            with lake.store.at(version=before) as old_snap, lake.store.at(version=after) as new_snap:
                changed = iceberg_derived.files_changed(old_snap, new_snap, table_id, seqs, (len(model), len(gone)))
                wrong = iceberg_derived.files_changed(old_snap, new_snap, table_id, seqs, (len(model), len(gone) + 1))
            assert wrong is None
            assert changed is None or (sorted(changed[0]), sorted(changed[1])) == (model, gone), (kind, arg)
            if kind in ("append", "delete", "overwrite", "compact"):
                assert changed is not None  # what keeps a load after a removal cheap
            if kind == "hidden":
                assert changed is None


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=2, max_size=7))
def test_version_by_version_derivation_writes_the_bytes_the_key_comparison_writes(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]
) -> None:
    # Derived as each version lands, appends find their files through the
    # index; with files_added answering None every version compares the
    # live keys, as before. Both must write the same files, byte for byte.
    root = tmp_path_factory.mktemp("growth")
    with catalog.open(str(root / "lake"), poll_interval_s=0) as lake, pytest.MonkeyPatch.context() as patch:
        lake.create_namespace("ns")
        lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        found: list[int] = []
        real = iceberg_derived.files_added

        def counted(*args: Any) -> list[tuple[bytes, bytes]] | None:
            pairs = real(*args)
            if pairs is not None:
                found.append(len(pairs))
            return pairs

        patch.setattr(iceberg_derived, "files_added", counted)
        next_id = 0
        iceberg_derived.derive(lake, "ns.t")
        # A column added, then an append: a commit whose summaries left the
        # table out shows in the derived metadata from the table's next
        # change on, and the append after it finds its files through the index.
        steps = [*steps, ("evolve", "add"), ("append", ["tue"])]
        for kind, arg in steps:
            next_id = _play(lake, kind, arg, next_id)
            iceberg_derived.derive(lake, "ns.t")
        head = iceberg_derived.derive(lake, "ns.t")
        assert found  # the index path ran (for the last append at least)
        directory = Path(head.metadata_location[len("file://") :]).parent
        by_index = {name: (directory / name).read_bytes() for name in os.listdir(directory)}
        for name in by_index:
            (directory / name).unlink()
        patch.setattr(iceberg_derived, "files_added", lambda *args: None)
        patch.setattr(iceberg_derived, "files_changed", lambda *args: None)
        versions = sorted({e.version for e in lake.history(limit=None, table="ns.t")} | {lake.version})
        for version in versions:
            iceberg_derived.derive(lake, "ns.t", version)
        compared = {name: (directory / name).read_bytes() for name in os.listdir(directory)}
        assert set(compared) <= set(by_index)
        assert [n for n in compared if compared[n] != by_index[n]] == []
        table = StaticTable.from_metadata(head.metadata_location)
        assert _rows(table.scan().to_arrow()) == _native(lake, lake.version)


def test_a_schema_change_after_an_append_its_summaries_left_out_keeps_that_append(tmp_path: Path) -> None:
    # The schema change's summary says no file changed since the table's
    # previous change, but a commit between them (its summaries cut to fit
    # the root file) appended to the table without naming it.
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        t.append(_conformed(t, [1], ["mon"]))
        iceberg_derived.derive(lake, "ns.t")
        _hidden_append(lake, [2])
        lake.load_table("ns.t").update_schema().add_column("extra", pa.int32()).commit()
        derived = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t").metadata_location)
        assert _rows(derived.scan().to_arrow()) == _native(lake, lake.version)
