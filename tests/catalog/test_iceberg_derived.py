"""Native tables served as Iceberg v2 tables (catalog.iceberg_derived), read by real Iceberg clients with no server.

DuckDB's ``iceberg_scan``, Polars' ``scan_iceberg`` and pyiceberg's
``StaticTable`` read the derived metadata of a partitioned native table and
must return exactly the rows ``table.scan()`` returns, at every retained
version (by snapshot id and by timestamp), through schema evolution,
deletes and overwrites; derivation is deterministic across processes,
reuses earlier manifests, survives losing its files and write faults, and
GC removes what no retained version needs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import duckdb_ext
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.table import StaticTable

import catalog
from catalog import iceberg_derived
from catalog.context import LakeContext
from catalog.errors import NoSuchTableError
from kvstore.errors import InjectedFaultError, SnapshotTooOldError
from kvstore.format.root import root_path
from kvstore.objstore.faulty import FaultyStore

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("name", pa.string()), ("amount", pa.int32())])
REPO = Path(__file__).resolve().parents[2]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as sorted tuples, column names first: the row-for-row comparison."""
    columns = table.column_names
    values = [tuple(r[c] for c in columns) for r in table.to_pylist()]
    return [tuple(columns), *sorted(values, key=repr)]


def _native(lake: catalog.Lakehouse, version: int, name: str = "ns.t") -> list[tuple[Any, ...]]:
    with lake.at(version=version) as past:
        return _rows(past.load_table(name).scan().to_arrow())


def _local_path(uri: str) -> Path:
    assert uri.startswith("file://")
    return Path(uri[len("file://") :])


def _derived_files(lake: catalog.Lakehouse, name: str = "ns.t") -> set[str]:
    directory = Path(lake.url[len("file://") :]) / lake.load_table(name).location / "metadata"
    return set(os.listdir(directory)) if directory.exists() else set()


def _duckdb() -> duckdb.DuckDBPyConnection:
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
    con.execute("LOAD iceberg")
    return con


@pytest.fixture
def evolved(tmp_path: Path) -> Iterator[tuple[catalog.Lakehouse, list[int]]]:
    """A partitioned native table through appends, a rename, an added and a dropped column, a delete and an
    overwrite; with the lakehouse version of each step."""
    lake = catalog.open(str(tmp_path / "lake"), poll_interval_s=0)
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    versions = [lake.version]
    versions.append(t.append(pa.table({"id": [1, 2, 3], "day": ["mon", "tue", "mon"], "name": ["a", "b", None], "amount": [10, 20, 30]})))
    versions.append(t.append(pa.table({"id": [4, 5], "day": ["wed", "tue"], "name": ["d", "e"], "amount": [40, None]})))
    t.update_schema().rename_column("name", "label").add_column("score", pa.float64()).commit()
    versions.append(lake.version)
    t = lake.load_table("ns.t")
    versions.append(t.append(pa.table({"id": [6], "day": ["mon"], "label": ["f"], "amount": [60], "score": [1.5]})))
    versions.append(t.delete(pc.field("id") == 2))
    t.update_schema().drop_column("amount").commit()
    versions.append(lake.version)
    t = lake.load_table("ns.t")
    versions.append(t.overwrite(pa.table({"id": [7], "day": ["wed"], "label": ["g"], "score": [2.5]}), filter=pc.field("day") == "wed"))
    try:
        yield lake, versions
    finally:
        lake.close()


def test_snapshot_id_is_a_pure_positive_int63() -> None:
    ids = {iceberg_derived.snapshot_id(t, v) for t in ("a" * 32, "b" * 32) for v in range(50)}
    assert len(ids) == 100
    assert all(0 < i < 2**63 for i in ids)
    assert iceberg_derived.snapshot_id("a" * 32, 7) == iceberg_derived.snapshot_id("a" * 32, 7)
    with pytest.raises(TypeError, match="version"):
        iceberg_derived.snapshot_id("a", "7")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="version"):
        iceberg_derived.snapshot_id("a", -1)


def test_pyiceberg_reads_every_retained_version_by_snapshot_id_and_timestamp(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, versions = evolved
    head = iceberg_derived.derive(lake, "ns.t")
    table = StaticTable.from_metadata(head.metadata_location)
    assert _rows(table.scan().to_arrow()) == _native(lake, lake.version)
    table_id = lake.load_table("ns.t").id
    history = {e.version: e.timestamp for e in lake.history(limit=None, table="ns.t")}
    assert [s.timestamp_ms for s in table.metadata.snapshots] == [iceberg_derived.timestamp_ms(history[v]) for v in sorted(history)]
    assert [s.sequence_number for s in table.metadata.snapshots] == sorted(history)
    assert [e.snapshot_id for e in table.metadata.snapshot_log] == [s.snapshot_id for s in table.metadata.snapshots]
    assert table.metadata.refs["main"].snapshot_id == table.metadata.current_snapshot_id
    for version in versions:
        sid = iceberg_derived.snapshot_id(table_id, version)
        assert _rows(table.scan(snapshot_id=sid).to_arrow()) == _native(lake, version), version
        # TIMESTAMP AS OF the snapshot's millisecond lands where lake.at(timestamp=) does.
        stamp = table.snapshot_by_id(sid).timestamp_ms  # type: ignore[union-attr]
        by_time = table.snapshot_as_of_timestamp(stamp)
        assert by_time is not None
        with lake.at(timestamp=stamp / 1000) as past:
            assert past.version >= version
            assert _rows(table.scan(snapshot_id=by_time.snapshot_id).to_arrow()) == _rows(
                past.load_table("ns.t").scan().to_arrow()
            )
        if stamp not in {s.timestamp_ms for s in table.metadata.snapshots if s.snapshot_id != sid}:
            assert by_time.snapshot_id == sid
        # The metadata derived at that version has it as its current snapshot.
        at = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t", version).metadata_location)
        assert _rows(at.scan().to_arrow()) == _native(lake, version)


def test_duckdb_iceberg_scan_reads_head_and_older_snapshots(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, versions = evolved
    location = lake.load_table("ns.t").metadata_location
    assert location is not None
    con = _duckdb()
    table_id = lake.load_table("ns.t").id
    head = con.execute(f"SELECT * FROM iceberg_scan('{location}')").fetch_arrow_table()
    assert _rows(head) == _native(lake, lake.version)
    for version in versions[1:]:
        sid = iceberg_derived.snapshot_id(table_id, version)
        old = con.execute(f"SELECT * FROM iceberg_scan('{location}', snapshot_from_id={sid})").fetch_arrow_table()
        assert _rows(old) == _native(lake, version), version


def test_polars_scan_iceberg_reads_every_version(evolved: tuple[catalog.Lakehouse, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # the polars_iceberg planner is not installed
    lake, versions = evolved
    for version in versions[1:]:
        location = iceberg_derived.derive(lake, "ns.t", version).metadata_location
        frame = pl.scan_iceberg(location).collect()
        assert _rows(frame.to_arrow()) == _native(lake, version), version


def test_statistics_and_partitions_let_engines_prune(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, _ = evolved
    table = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t").metadata_location)
    assert [f.name for f in table.spec().fields] == ["day"]
    tasks = list(table.scan(row_filter="day = 'mon'").plan_files())
    native = lake.load_table("ns.t").files(pc.field("day") == "mon")
    assert sorted(t.file.file_path for t in tasks) == sorted(f"{lake.url}/{f.path}" for f in native)
    for task in tasks:
        id_field = table.schema().find_field("id").field_id
        assert task.file.value_counts[id_field] == task.file.record_count
        assert task.file.null_value_counts[id_field] == 0
        assert id_field in task.file.lower_bounds and id_field in task.file.upper_bounds
    assert list(table.scan(row_filter="id > 1000").plan_files()) == []


def test_two_processes_derive_identical_metadata(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, _ = evolved
    first = iceberg_derived.derive(lake, "ns.t")
    body = _local_path(first.metadata_location).read_bytes()
    for name in _derived_files(lake):
        (_local_path(first.metadata_location).parent / name).unlink()
    script = (
        "import sys, catalog\n"
        "from catalog import iceberg_derived\n"
        "with catalog.open(sys.argv[1], create=False, poll_interval_s=0) as lake:\n"
        "    print(iceberg_derived.derive(lake, 'ns.t').metadata_location)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, lake.url[len("file://") :]],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.stdout.strip() == first.metadata_location
    assert _local_path(first.metadata_location).read_bytes() == body
    again = iceberg_derived.derive(lake, "ns.t")
    assert again.metadata == first.metadata


def test_an_append_writes_one_manifest_and_one_list(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, _ = evolved
    before = iceberg_derived.derive(lake, "ns.t")
    existing = _derived_files(lake)
    old_manifests = {m.manifest_path for m in before.metadata.current_snapshot().manifests(_io(lake))}  # type: ignore[union-attr]
    version = lake.load_table("ns.t").append(
        pa.table({"id": [8, 9, 10], "day": ["mon", "tue", "fri"], "label": ["h", "i", "j"], "score": [None, 1.0, 2.0]})
    )
    after = iceberg_derived.derive(lake, "ns.t")
    new = _derived_files(lake) - existing
    previous = before.snapshot_version
    assert new == {
        f"{version:020d}-{previous:020d}-m0.avro",
        f"snap-{version:020d}-{iceberg_derived.snapshot_id(lake.load_table('ns.t').id, version)}.avro",
        f"{version:020d}-{0:020d}.metadata.json",
    }
    manifests = after.metadata.current_snapshot().manifests(_io(lake))  # type: ignore[union-attr]
    assert {m.manifest_path for m in manifests} - old_manifests == {f"{_dir(before)}/{version:020d}-{previous:020d}-m0.avro"}
    assert [m.added_files_count for m in manifests if m.manifest_path.endswith(f"{version:020d}-{previous:020d}-m0.avro")] == [3]
    assert _rows(StaticTable.from_metadata(after.metadata_location).scan().to_arrow()) == _native(lake, version)


def test_a_delete_rewrites_only_the_manifests_that_held_its_files(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        first = t.append(pa.table({"id": [1, 2], "day": ["mon", "tue"], "name": ["a", "b"], "amount": [1, 2]}))
        second = t.append(pa.table({"id": [3], "day": ["wed"], "name": ["c"], "amount": [3]}))
        iceberg_derived.derive(lake, "ns.t")
        existing = _derived_files(lake)
        version = t.delete(pc.field("day") == "tue")  # one whole file of the first append
        after = iceberg_derived.derive(lake, "ns.t")
        assert _derived_files(lake) - existing == {
            f"{version:020d}-{second:020d}-m1.avro",
            f"snap-{version:020d}-{iceberg_derived.snapshot_id(t.id, version)}.avro",
            f"{version:020d}-{0:020d}.metadata.json",
        }
        names = sorted(m.manifest_path.rsplit("/", 1)[-1] for m in after.metadata.current_snapshot().manifests(_io(lake)))  # type: ignore[union-attr]
        assert names == [f"{second:020d}-{first:020d}-m0.avro", f"{version:020d}-{second:020d}-m1.avro"]
        assert after.metadata.current_snapshot().summary.operation.value == "delete"  # type: ignore[union-attr]
        assert _rows(StaticTable.from_metadata(after.metadata_location).scan().to_arrow()) == _native(lake, version)


def test_lost_derived_files_are_derived_again(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, versions = evolved
    first = iceberg_derived.derive(lake, "ns.t")
    body = _local_path(first.metadata_location).read_bytes()
    directory = _local_path(first.metadata_location).parent
    for name in os.listdir(directory):
        (directory / name).unlink()
    again = iceberg_derived.derive(lake, "ns.t")
    assert again.metadata_location == first.metadata_location
    assert _local_path(again.metadata_location).read_bytes() == body
    table = StaticTable.from_metadata(again.metadata_location)
    sid = iceberg_derived.snapshot_id(lake.load_table("ns.t").id, versions[2])
    assert _rows(table.scan(snapshot_id=sid).to_arrow()) == _native(lake, versions[2])


@pytest.mark.parametrize("seed", range(6))
def test_write_faults_never_leave_metadata_that_reads_wrong(evolved: tuple[catalog.Lakehouse, list[int]], seed: int) -> None:
    lake, versions = evolved
    table_id = lake.load_table("ns.t").id
    faulty = FaultyStore(lake.store.objects, seed=seed, error_rate=0.3, after_rate=0.3, ops=["put"])
    ctx = LakeContext(objects=faulty, target_file_bytes=lake.context.target_file_bytes, store=lake.store)
    derived = None
    for _ in range(200):
        try:
            derived = iceberg_derived.derive_table(ctx, table_id, lake.version)
            break
        except InjectedFaultError:
            continue
    assert derived is not None
    clean = iceberg_derived.derive(lake, "ns.t")
    assert clean.metadata == derived.metadata
    table = StaticTable.from_metadata(derived.metadata_location)
    for version in versions[1:]:
        sid = iceberg_derived.snapshot_id(table_id, version)
        assert _rows(table.scan(snapshot_id=sid).to_arrow()) == _native(lake, version), version


def test_table_metadata_location_and_errors(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        v = t.append(pa.table({"id": [1], "day": ["mon"], "name": ["a"], "amount": [1]}))
        t.append(pa.table({"id": [2], "day": ["mon"], "name": ["b"], "amount": [2]}))
        # Each load derives for the version it reads: the first load after a commit sees it.
        assert lake.load_table("ns.t").metadata_location == iceberg_derived.derive(lake, "ns.t").metadata_location
        with lake.at(version=v) as past:
            location = past.load_table("ns.t").metadata_location
        assert location == iceberg_derived.derive(lake, "ns.t", v).metadata_location
        with lake.transaction() as tx:
            assert tx.load_table("ns.t").metadata_location is None  # uncommitted: no version yet
        with pytest.raises(NoSuchTableError):
            iceberg_derived.derive(lake, "ns.missing")
        with pytest.raises(ValueError, match="not a lakehouse version"):
            iceberg_derived.derive(lake, "ns.t", lake.version + 5)
        with pytest.raises(TypeError, match="version"):
            iceberg_derived.derive(lake, "ns.t", "1")  # type: ignore[arg-type]


def test_non_native_table_is_refused(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_table("ns.ice", SCHEMA, format="iceberg", location=f"{lake.url}/ice")
        with pytest.raises(ValueError, match="only native tables"):
            iceberg_derived.derive(lake, "ns.ice")


def test_cli_prints_the_metadata_location(evolved: tuple[catalog.Lakehouse, list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    from kvstore.cli import main

    lake, versions = evolved
    url = lake.url
    expected_head = iceberg_derived.derive(lake, "ns.t").metadata_location
    expected_old = iceberg_derived.derive(lake, "ns.t", versions[2]).metadata_location
    assert main(["lake", url, "iceberg", "ns.t"]) == 0
    assert capsys.readouterr().out.strip() == expected_head
    assert main(["lake", url, "iceberg", "ns.t", "--version", str(versions[2])]) == 0
    assert capsys.readouterr().out.strip() == expected_old
    assert main(["lake", url, "iceberg", "ns.nope"]) == 1


def test_gc_removes_derived_files_below_the_floor_and_of_dropped_tables(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, retention_window_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        for i in range(3):
            t.append(pa.table({"id": [i], "day": ["mon"], "name": ["x"], "amount": [i]}))
            iceberg_derived.derive(lake, "ns.t")
        u = lake.create_table("ns.u", SCHEMA)
        u.append(pa.table({"id": [1], "day": ["mon"], "name": ["x"], "amount": [1]}))
        iceberg_derived.derive(lake, "ns.u")
        dropped = Path(lake.url[len("file://") :]) / u.location / "metadata"
        assert os.listdir(dropped)
        lake.drop_table("ns.u")
        head = t.overwrite(pa.table({"id": [9], "day": ["tue"], "name": ["y"], "amount": [9]}))
        current = iceberg_derived.derive(lake, "ns.t")
        before = _derived_files(lake)
    # Every version an hour old by its root file's time: the zero window's floor
    # reaches the head whatever the machine's speed (a version committed within
    # twice the clock's resolution of the GC is not yet "old").
    then = time.time() - 3600
    for version in range(head + 1):
        os.utime(tmp_path / "lake" / root_path(version), (then, then))
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, retention_window_s=0) as lake:
        report = lake.gc(grace_s=0)
        assert report.floor_version == head
        assert not dropped.exists() or os.listdir(dropped) == []
        after = _derived_files(lake)
        assert after < before
        assert all(not name.startswith(f"{v:020d}") for name in after for v in range(head))
        # Derived under the old floor: collected; the head's files at the new floor are derived again.
        assert _local_path(current.metadata_location).exists() is False
        fresh = iceberg_derived.derive(lake, "ns.t")
        assert fresh.metadata_location.endswith(f"{head:020d}-{head:020d}.metadata.json")
        assert [s.sequence_number for s in fresh.metadata.snapshots] == [head]
        assert _rows(StaticTable.from_metadata(fresh.metadata_location).scan().to_arrow()) == _native(lake, head)


def test_gc_keeps_the_derived_files_of_retained_versions(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, versions = evolved
    derived = iceberg_derived.derive(lake, "ns.t")
    before = _derived_files(lake)
    report = lake.gc(grace_s=0)  # the default window keeps every version
    assert report.floor_version <= versions[0]
    assert report.derived_files == [] and report.orphan_files == []
    assert _derived_files(lake) == before
    table = StaticTable.from_metadata(derived.metadata_location)
    assert _rows(table.scan().to_arrow()) == _native(lake, lake.version)


def test_below_the_floor_is_snapshot_too_old(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, poll_interval_s=0, retention_window_s=60) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        created = lake.version
        appended = t.append(pa.table({"id": [1], "day": ["mon"], "name": ["a"], "amount": [1]}))
        t.overwrite(pa.table({"id": [2], "day": ["mon"], "name": ["b"], "amount": [2]}))
    # The versions up to the append an hour old (by their root files' times, the
    # storage clock the window is measured on): the window's floor passes the
    # create whatever the machine's speed. A zero window raced the clock: versions
    # committed within twice its resolution of the GC are not yet "old".
    then = time.time() - 3600
    for version in range(appended + 1):
        os.utime(tmp_path / "lake" / root_path(version), (then, then))
    with catalog.open(url, poll_interval_s=0) as lake:
        lake.gc(grace_s=0)
        assert created < lake.retention_floor
        with pytest.raises(SnapshotTooOldError):
            iceberg_derived.derive(lake, "ns.t", created)


def _io(lake: catalog.Lakehouse) -> iceberg_derived.LakeFileIO:
    return iceberg_derived.LakeFileIO(lake.store.objects)


def _dir(derived: iceberg_derived.Derived) -> str:
    return derived.metadata_location.rsplit("/", 1)[0]


# -- a property: any history of changes, derived at any moments, reads as the native table ----

_STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(st.sampled_from(["mon", "tue", "wed"]), min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
    st.tuples(st.just("overwrite"), st.sampled_from(["mon", "tue", "wed"])),
    st.tuples(st.just("evolve"), st.sampled_from(["rename", "add", "drop", "widen"])),
    st.tuples(st.just("derive"), st.booleans()),  # True: lose every derived file first
)


def _play(t: Any, kind: str, arg: Any, next_id: int) -> int:
    """Apply one step of a generated history to table ``t``; the next unused id."""
    if kind == "append":
        t.append(_conformed(t, {"id": list(range(next_id, next_id + len(arg))), "day": arg}))
        return next_id + len(arg)
    if kind == "delete":
        t.delete(pc.field("id") < arg)
    elif kind == "overwrite":
        t.overwrite(_conformed(t, {"id": [next_id], "day": [arg]}), filter=pc.field("day") == arg)
        return next_id + 1
    else:
        _evolve(t, arg)
    return next_id


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=10))
def test_any_history_reads_as_the_native_table_at_every_version(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]) -> None:
    root = tmp_path_factory.mktemp("model")
    with catalog.open(str(root / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_table("ns.t", pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.int64())]), partition_by=["day"])
        next_id = 0
        for kind, arg in steps:
            t = lake.load_table("ns.t")
            if kind != "derive":
                next_id = _play(t, kind, arg, next_id)
                continue
            if arg:
                for name in _derived_files(lake):
                    (Path(lake.url[len("file://") :]) / t.location / "metadata" / name).unlink()
            iceberg_derived.derive(lake, "ns.t")
        derived = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t").metadata_location)
        table_id = lake.load_table("ns.t").id
        for entry in lake.history(limit=None, table="ns.t"):
            sid = iceberg_derived.snapshot_id(table_id, entry.version)
            assert _rows(derived.scan(snapshot_id=sid).to_arrow()) == _native(lake, entry.version), entry


_HISTORY_STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(st.sampled_from(["mon", "tue", "wed"]), min_size=1, max_size=3)),
    st.tuples(st.just("append"), st.lists(st.sampled_from(["mon", "tue", "wed"]), min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("overwrite"), st.sampled_from(["mon", "tue", "wed"])),
    st.tuples(st.just("evolve"), st.sampled_from(["rename", "add", "drop", "widen"])),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_HISTORY_STEP, min_size=2, max_size=9))
def test_a_first_derivation_writes_the_bytes_a_version_by_version_one_writes(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]
) -> None:
    # A first derivation finds the files of a run of appends from one scan
    # of the newest one's keys; deriving each version as it lands scans each.
    # Both must write the same files, byte for byte.
    root = tmp_path_factory.mktemp("firstload")
    with catalog.open(str(root / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_table("ns.t", pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.int32())]), partition_by=["day"])
        next_id = 0
        for kind, arg in steps:
            next_id = _play(lake.load_table("ns.t"), kind, arg, next_id)
        for entry in reversed(lake.history(limit=None, table="ns.t")):
            iceberg_derived.derive(lake, "ns.t", entry.version)
        head = iceberg_derived.derive(lake, "ns.t")
        directory = _local_path(head.metadata_location).parent
        step_by_step = {name: (directory / name).read_bytes() for name in os.listdir(directory)}
        for name in step_by_step:
            (directory / name).unlink()
        first = iceberg_derived.derive(lake, "ns.t")
        assert first.metadata_location == head.metadata_location
        written = {name: (directory / name).read_bytes() for name in os.listdir(directory)}
        assert set(written) <= set(step_by_step)
        assert [n for n in written if written[n] != step_by_step[n]] == []
        table = StaticTable.from_metadata(first.metadata_location)
        assert _rows(table.scan().to_arrow()) == _native(lake, lake.version)


def test_a_first_derivation_keeps_files_of_a_commit_whose_summary_left_the_table_out(tmp_path: Path) -> None:
    # A transaction of hundreds of operations keeps only its first summaries
    # in the history: its append to ns.t is in no summary that names the
    # table, yet its files are live in every later version.
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        t.append(pa.table({"id": [1], "day": ["mon"], "name": ["a"], "amount": [1]}))
        with lake.transaction() as tx:
            for i in range(450):
                tx.create_table(f"ns.filler_{i}", pa.schema([("x", pa.int64())]))
            tx.load_table("ns.t").append(pa.table({"id": [2], "day": ["tue"], "name": ["b"], "amount": [2]}))
        hidden = lake.version
        assert not [e for e in lake.history(limit=None, table="ns.t") if e.version == hidden]
        t = lake.load_table("ns.t")
        t.append(pa.table({"id": [3], "day": ["wed"], "name": ["c"], "amount": [3]}))
        t.append(pa.table({"id": [4], "day": ["mon"], "name": ["d"], "amount": [4]}))
        derived = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t").metadata_location)
        assert _rows(derived.scan().to_arrow()) == _native(lake, lake.version)


def _conformed(t: catalog.Table, columns: dict[str, list[Any]]) -> pa.Table:
    """Rows for the table's current schema: the given columns, every other column a value derived from the id."""
    ids = columns["id"]
    data = {}
    for f in t.schema:
        data[f.name] = columns[f.name] if f.name in columns else pa.array([i * 10 for i in ids]).cast(f.type)
    return pa.table(data, schema=t.schema)


def _evolve(t: catalog.Table, change: str) -> None:
    others = [f.name for f in t.schema if f.name not in ("id", "day")]
    if change == "rename" and others:
        t.update_schema().rename_column(others[0], others[0] + "_r").commit()
    elif change == "add":
        t.update_schema().add_column(f"c{len(t.schema)}", pa.int32()).commit()
    elif change == "drop" and others:
        t.update_schema().drop_column(others[-1]).commit()
    elif change == "widen":
        narrow = [f.name for f in t.schema if f.type == pa.int32()]
        if narrow:
            t.update_schema().widen(narrow[0], pa.int64()).commit()


def test_a_widened_column_rewrites_every_manifest_with_its_new_bounds(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", pa.schema([("id", pa.int64()), ("n", pa.int32())]))
        t.append(pa.table({"id": [1, 2], "n": pa.array([5, 7], pa.int32())}))
        before = iceberg_derived.derive(lake, "ns.t")
        t.update_schema().widen("n", pa.int64()).commit()
        version = lake.load_table("ns.t").append(pa.table({"id": [3], "n": [2**40]}))
        after = StaticTable.from_metadata(iceberg_derived.derive(lake, "ns.t").metadata_location)
        old = {m.manifest_path for m in before.metadata.current_snapshot().manifests(_io(lake))}  # type: ignore[union-attr]
        assert old.isdisjoint(m.manifest_path for m in after.current_snapshot().manifests(_io(lake)))  # type: ignore[union-attr]
        assert _rows(after.scan().to_arrow()) == _native(lake, version)
        assert sorted(r["id"] for r in after.scan(row_filter="n >= 6").to_arrow().to_pylist()) == [2, 3]


@pytest.fixture(scope="module")
def moto_lake_url() -> Iterator[tuple[str, dict[str, str]]]:
    """A moto S3 server on 127.0.0.1 with one bucket: the lakehouse URL and its options."""
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", "key": "moto", "secret": "moto", "region": "us-east-1"}
        s3fs.S3FileSystem(key="moto", secret="moto", endpoint_url=options["endpoint_url"], skip_instance_cache=True).mkdir("derived")
        yield "s3://derived/lake", options
    finally:
        server.stop()


def test_on_s3_every_path_is_an_s3_uri_engines_read(moto_lake_url: tuple[str, dict[str, str]]) -> None:
    url, options = moto_lake_url
    with catalog.open(url, poll_interval_s=0, **options) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
        version = t.append(pa.table({"id": [1, 2], "day": ["mon", "tue"], "name": ["a", None], "amount": [1, 2]}))
        location = lake.load_table("ns.t").metadata_location
        assert location is not None and location.startswith("s3://derived/lake/data/")
        table = StaticTable.from_metadata(
            location,
            properties={
                "s3.endpoint": options["endpoint_url"], "s3.access-key-id": "moto", "s3.secret-access-key": "moto",
                "s3.region": "us-east-1",
            },
        )
        assert all(f.file.file_path.startswith("s3://derived/lake/data/") for f in table.scan().plan_files())
        assert _rows(table.scan().to_arrow()) == _native(lake, version)
        con = _duckdb()
        con.execute("LOAD httpfs")
        endpoint = options["endpoint_url"].removeprefix("http://")
        con.execute(
            f"CREATE SECRET (TYPE s3, KEY_ID 'moto', SECRET 'moto', ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
        )
        assert _rows(con.execute(f"SELECT * FROM iceberg_scan('{location}')").fetch_arrow_table()) == _native(lake, version)


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_timestamp_ms_is_the_least_millisecond_at_or_after_the_commit(timestamp: float) -> None:
    m = iceberg_derived.timestamp_ms(timestamp)
    assert timestamp <= m / 1000
    assert (m - 1) / 1000 < timestamp


def test_a_table_unchanged_since_before_the_floor_has_its_snapshot_at_the_floor(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, retention_window_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        t.append(pa.table({"id": [1], "day": ["mon"], "name": ["a"], "amount": [1]}))
        other = lake.create_table("ns.other", SCHEMA)
        other.append(pa.table({"id": [1], "day": ["mon"], "name": ["a"], "amount": [1]}))
        other.overwrite(pa.table({"id": [2], "day": ["mon"], "name": ["b"], "amount": [2]}))
        lake.gc(grace_s=0)
        floor = lake.retention_floor
        assert not lake.history(limit=None, table="ns.t")  # its changes are below the floor
        derived = iceberg_derived.derive(lake, "ns.t")
        assert [s.sequence_number for s in derived.metadata.snapshots] == [floor]
        assert _rows(StaticTable.from_metadata(derived.metadata_location).scan().to_arrow()) == _native(lake, floor)


def test_a_second_process_builds_on_the_files_the_first_derived(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, _ = evolved
    iceberg_derived.derive(lake, "ns.t")
    before = _derived_files(lake)
    version = lake.load_table("ns.t").append(pa.table({"id": [20], "day": ["tue"], "label": ["z"], "score": [0.5]}))
    script = (
        "import sys, catalog\n"
        "from catalog import iceberg_derived\n"
        "with catalog.open(sys.argv[1], create=False, poll_interval_s=0) as lake:\n"
        "    print(iceberg_derived.derive(lake, 'ns.t').metadata_location)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, lake.url[len("file://") :]],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    location = out.stdout.strip()
    # The other process reused every earlier file and added one manifest, one list, one metadata.json.
    assert len(_derived_files(lake) - before) == 3 and before <= _derived_files(lake)
    incremental = _local_path(location).read_bytes()
    directory = _local_path(location).parent
    for name in os.listdir(directory):
        (directory / name).unlink()
    scratch = iceberg_derived.derive(lake, "ns.t")
    assert scratch.metadata_location == location
    assert _local_path(location).read_bytes() == incremental
    assert _rows(StaticTable.from_metadata(location).scan().to_arrow()) == _native(lake, version)


def test_two_processes_deriving_at_once_leave_readable_identical_metadata(evolved: tuple[catalog.Lakehouse, list[int]]) -> None:
    lake, versions = evolved
    script = (
        "import sys, catalog\n"
        "from catalog import iceberg_derived\n"
        "with catalog.open(sys.argv[1], create=False, poll_interval_s=0) as lake:\n"
        "    print(iceberg_derived.derive(lake, 'ns.t').metadata_location)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    racers = [
        subprocess.Popen([sys.executable, "-c", script, lake.url[len("file://") :]], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0].strip() for p in racers]
    assert [p.returncode for p in racers] == [0, 0]
    assert outputs[0] == outputs[1]
    raced = StaticTable.from_metadata(outputs[0])
    assert iceberg_derived.derive(lake, "ns.t").metadata == raced.metadata
    table_id = lake.load_table("ns.t").id
    for version in versions[1:]:
        sid = iceberg_derived.snapshot_id(table_id, version)
        assert _rows(raced.scan(snapshot_id=sid).to_arrow()) == _native(lake, version), version


@pytest.mark.parametrize(
    "column",
    [pa.field("tags", pa.list_(pa.string())), pa.field("at", pa.timestamp("ns")), pa.field("big", pa.uint64()), pa.field("u", pa.uint32())],
)
def test_a_column_iceberg_cannot_hold_is_a_clear_value_error(tmp_path: Path, column: pa.Field) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_table("ns.t", pa.schema([("id", pa.int64()), column]))
        with pytest.raises(ValueError, match=f"{column.name}|Iceberg"):
            iceberg_derived.derive(lake, "ns.t")
        assert _derived_files(lake) == set()  # nothing written


def _tear(path: Path, how: str) -> None:
    """What a crash of the machine can leave of a file put without fsync: cut short, zeroed, or garbled."""
    data = path.read_bytes()
    middle = len(data) // 2
    if how == "truncated":
        path.write_bytes(data[:middle])
    elif how == "zeroed":
        path.write_bytes(data[:middle] + bytes(len(data) - middle))
    else:
        path.write_bytes(data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 8]) + data[middle + 8 :])


@pytest.mark.parametrize("how", ["truncated", "zeroed", "garbled"])
@pytest.mark.parametrize("which", ["metadata.json", "manifest list", "manifest"])
def test_a_torn_derived_file_is_derived_again_not_served(
    evolved: tuple[catalog.Lakehouse, list[int]], which: str, how: str
) -> None:
    lake, versions = evolved
    first = iceberg_derived.derive(lake, "ns.t")
    current = first.metadata.current_snapshot()
    assert current is not None
    if which == "metadata.json":
        torn = _local_path(first.metadata_location)
    elif which == "manifest list":
        torn = _local_path(current.manifest_list)
    else:
        # The oldest manifest the current snapshot names: every later snapshot names it too.
        torn = _local_path(sorted(m.manifest_path for m in current.manifests(iceberg_derived.LakeFileIO(lake.objects)))[0])
    intact = torn.read_bytes()
    _tear(torn, how)
    # A crash of the machine ends every process: the next one finds the files as they are.
    script = (
        "import sys, catalog\n"
        "from catalog import iceberg_derived\n"
        "with catalog.open(sys.argv[1], create=False, poll_interval_s=0) as lake:\n"
        "    print(iceberg_derived.derive(lake, 'ns.t').metadata_location)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, lake.url[len("file://") :]],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == first.metadata_location
    assert torn.read_bytes() == intact  # written again, byte for byte (derived bytes are a pure function)
    table = StaticTable.from_metadata(first.metadata_location)
    assert table.metadata == first.metadata
    table_id = lake.load_table("ns.t").id
    for version in versions[1:]:
        sid = iceberg_derived.snapshot_id(table_id, version)
        assert _rows(table.scan(snapshot_id=sid).to_arrow()) == _native(lake, version), version
