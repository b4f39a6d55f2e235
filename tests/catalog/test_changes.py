"""catalog.changes: the changelog and the appended rows of a table, checked against a model of its rows."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import changes
from catalog.errors import NoSuchTableError, NonAppendVersionError
from kvstore.errors import SnapshotTooOldError
from kvstore.format.root import root_path

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
_names = itertools.count()

# One step: ("insert", ids), ("update", ids, tag), ("delete", ids), ("merge", ids, tag), ("compact",).
_ids = st.lists(st.integers(0, 12), min_size=1, max_size=4, unique=True)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), _ids),
        st.tuples(st.just("update"), _ids, st.sampled_from(["a", "b"])),
        st.tuples(st.just("delete"), _ids),
        st.tuples(st.just("merge"), _ids, st.sampled_from(["a", "b"])),
        st.tuples(st.just("compact")),
    ),
    min_size=1,
    max_size=8,
)


def _apply(lake: catalog.Lakehouse, model: dict[int, str], step: tuple) -> None:
    """Run one step on table ns.t and on the model (id -> v; ids are unique)."""
    t = lake.load_table("ns.t")
    kind = step[0]
    if kind == "insert":
        new = [i for i in step[1] if i not in model]
        if new:
            t.append(pa.table({"id": new, "v": [f"i{i}" for i in new]}, SCHEMA))
            model.update({i: f"i{i}" for i in new})
    elif kind == "update":
        hit = [i for i in step[1] if i in model]
        if hit:
            rows = pa.table({"id": hit, "v": [step[2] + model[i] for i in hit]}, SCHEMA)
            t.overwrite(rows, pc.field("id").isin(hit))
            model.update({i: step[2] + model[i] for i in hit})
    elif kind == "delete":
        t.delete(pc.field("id").isin(list(step[1])))
        for i in step[1]:
            model.pop(i, None)
    elif kind == "merge":  # upsert: matched rows updated, the others inserted
        ids = list(step[1])
        values = [step[2] + model[i] if i in model else f"m{i}" for i in ids]
        t.overwrite(pa.table({"id": ids, "v": values}, SCHEMA), pc.field("id").isin(ids))
        model.update(dict(zip(ids, values)))
    else:
        lake.compact_table("ns.t")


def _expected(before: dict[int, str], after: dict[int, str], version: int, ids: bool) -> set[tuple]:
    out = set()
    for i in before.keys() | after.keys():
        old, new = before.get(i), after.get(i)
        if old == new:
            continue
        if old is not None and new is not None and ids:
            out |= {(i, old, "update_preimage", version), (i, new, "update_postimage", version)}
            continue
        if old is not None:
            out.add((i, old, "delete", version))
        if new is not None:
            out.add((i, new, "insert", version))
    return out


def _got(data: pa.Table) -> list[tuple]:
    return list(zip(*(data.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_version"))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, cut=st.integers(0, 100))
def test_changelog_reports_every_change_once_with_its_type(steps: list[tuple], cut: int) -> None:
    with catalog.open(f"memory://changes-{next(_names)}", poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_table("ns.t", SCHEMA)
        states = [(lake.version, {})]  # (version, model rows) after each step
        model: dict[int, str] = {}
        for step in steps:
            _apply(lake, model, step)
            states.append((lake.refresh(), dict(model)))
        start_at = cut % len(states)
        start = states[start_at][0]
        end = states[-1][0]
        for ids in (True, False):
            expected: set[tuple] = set()
            for (_, before), (version, after) in zip(states[start_at:], states[start_at + 1:]):
                expected |= _expected(before, after, version, ids)
            got = _got(changes.table_changes(lake, "ns.t", start, end, ["id"] if ids else None))
            assert len(got) == len(set(got)), got  # exactly once
            assert set(got) == expected


def test_update_images_are_adjacent_and_carry_timestamp(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA)
    start = t.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, SCHEMA))
    v = lake.load_table("ns.t").overwrite(pa.table({"id": [2], "v": ["B"]}, SCHEMA), pc.field("id") == 2)
    out = changes.table_changes(lake, "ns.t", start, v, ["id"])
    assert _got(out) == [(2, "b", "update_preimage", v), (2, "B", "update_postimage", v)]
    when = lake.history(limit=1)[0].timestamp
    assert out.column("_commit_timestamp")[0].value == int(when * 1_000_000)
    # Rows 1 and 3 were carried over by the rewrite of their file: not changes.
    assert changes.table_changes(lake, "ns.t", start, v).num_rows == 2


def test_appended_reads_appends_and_skips_compactions_refuses_deletes(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA)
    v0 = lake.version
    v1 = t.append(pa.table({"id": [1, 2], "v": ["a", "b"]}, SCHEMA))
    v2 = lake.load_table("ns.t").append(pa.table({"id": [3], "v": ["c"]}, SCHEMA))
    lake.compact_table("ns.t")
    v3 = lake.refresh()
    assert sorted(changes.appended(lake, "ns.t", v0, v3).column("id").to_pylist()) == [1, 2, 3]
    assert changes.appended(lake, "ns.t", v1, v2).column("id").to_pylist() == [3]
    assert changes.appended(lake, "ns.t", v2, v3).num_rows == 0
    v4 = lake.load_table("ns.t").delete(pc.field("id") == 1)
    v5 = lake.load_table("ns.t").append(pa.table({"id": [4], "v": ["d"]}, SCHEMA))
    with pytest.raises(NonAppendVersionError, match=f"lakehouse version {v4} \\(delete\\) deleted rows") as info:
        changes.appended(lake, "ns.t", v0, v5)
    assert info.value.version == v4 and info.value.kind == "delete"
    assert changes.appended(lake, "ns.t", v3, v5, skip=["delete"]).column("id").to_pylist() == [4]
    v6 = lake.load_table("ns.t").overwrite(pa.table({"id": [2], "v": ["B"]}, SCHEMA), pc.field("id") == 2)
    with pytest.raises(NonAppendVersionError, match="changed rows") as info:
        changes.appended(lake, "ns.t", v5, v6, skip=["delete"])
    assert info.value.kind == "overwrite"


def test_bad_ranges_are_refused_by_name(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA)
    v = t.append(pa.table({"id": [1], "v": ["a"]}, SCHEMA))
    with pytest.raises(ValueError, match="start version .* is after end version"):
        changes.table_changes(lake, "ns.t", v, v - 1)
    with pytest.raises(ValueError, match="not committed yet"):
        changes.table_changes(lake, "ns.t", 0, v + 5)
    with pytest.raises(TypeError, match="start must be a lakehouse version"):
        changes.table_changes(lake, "ns.t", "1", v)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="identifier column 'nope'"):
        changes.table_changes(lake, "ns.t", 0, v, ["nope"])
    with pytest.raises(NoSuchTableError):
        changes.table_changes(lake, "ns.gone", 0, v)
    with pytest.raises(ValueError, match="skip takes"):
        changes.appended(lake, "ns.t", 0, v, skip=["everything"])


def test_a_start_past_retention_names_the_version_and_floor(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, poll_interval_s=0, retention_window_s=60) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        first = t.append(pa.table({"id": [1], "v": ["a"]}, SCHEMA))
        second = lake.load_table("ns.t").append(pa.table({"id": [2], "v": ["b"]}, SCHEMA))
        lake.load_table("ns.t").append(pa.table({"id": [3], "v": ["c"]}, SCHEMA))
    floor = _expire_up_to(tmp_path / "lake", url, second)
    assert floor > first
    with catalog.open(url, poll_interval_s=0) as lake:
        with pytest.raises(SnapshotTooOldError, match=f"lakehouse version {first} is past retention: .* below {floor}"):
            changes.table_changes(lake, "ns.t", first, lake.version)


def _expire_up_to(root: Path, url: str, version: int) -> int:
    """Make versions ``0..version`` an hour old and collect them (a 60 s window); return the floor."""
    then = time.time() - 3600
    for v in range(version + 1):
        os.utime(root / root_path(v), (then, then))
    with catalog.open(url, poll_interval_s=0) as collector:
        return collector.gc().floor_version


def test_renamed_table_keeps_its_changes(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA)
    v0 = lake.version
    t.append(pa.table({"id": [1], "v": ["a"]}, SCHEMA))
    lake.rename_table("ns.t", "ns.u")
    got = _got(changes.table_changes(lake, "ns.u", v0, lake.refresh()))
    assert [g[:3] for g in got] == [(1, "a", "insert")]
