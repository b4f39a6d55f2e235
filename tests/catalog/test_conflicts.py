"""The conflict matrix (catalog/conflicts.py), pair by pair, with real races.

Each test lets ``peer`` commit one operation (the winner, ``theirs``) while
``me`` still stands on the version before it, then runs ``me``'s operation
(``ours``): the race is lost at validation every time (see :mod:`lake_peer`).
The test then checks the exact outcome: the error class with its ``ours``,
``theirs``, ``object`` and winning ``version``, or that both committed and the
table holds what applying the two in version order gives. Every test runs with
the peer in this process and in a second process.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from catalog import IncompatibleConflictError, RetryableConflictError
from kvstore import ConflictError
from lake_peer import SCHEMA, rows
from race_fixtures import lake_url, me, peer, remote_process  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(120)

T = "db.t"
Peer = Callable[..., int]


def seed(me: catalog.Lakehouse, *batches: range | list[int]) -> catalog.Table:
    """Namespace ``db`` and table ``db.t`` with one data file per batch (tag ``seed``)."""
    me.create_namespace("db")
    table = me.create_table(T, SCHEMA)
    for ids in batches:
        table.append(rows(ids, "seed"))
    return me.load_table(T)


def content(lake: catalog.Lakehouse, table: str = T, column: str = "tag") -> list[tuple[int, Any]]:
    """The table's rows as sorted ``(id, tag)`` pairs, as of the newest version."""
    lake.refresh()
    data = lake.load_table(table).scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column(column).to_pylist()))


def tagged(ids: range | list[int], tag: str) -> list[tuple[int, str]]:
    return [(i, tag) for i in ids]


def check_conflict(
    error: BaseException, cls: type, *, ours: str, theirs: str, version: int, obj: str | None = T
) -> None:
    assert type(error) is cls, f"expected {cls.__name__}, got {type(error).__name__}: {error}"
    assert isinstance(error, ConflictError)  # code retrying any lakekv conflict still catches it
    assert (error.ours, error.theirs, error.object, error.version) == (ours, theirs, obj, version), str(error)


def assert_no_orphans(lake: catalog.Lakehouse) -> None:
    """The losing operation's data files were deleted: nothing under data/ is unreferenced."""
    report = lake.gc(dry_run=True, grace_s=0)
    assert report.orphan_files == []


def table_history(lake: catalog.Lakehouse, table: str = T) -> list[tuple[int, list[str]]]:
    """``(version, operation kinds)`` of the versions that touched ``table``, oldest first."""
    lake.refresh()
    return [(e.version, [op["kind"] for op in e.operations]) for e in reversed(lake.history(limit=None, table=table))]


SEED = tagged(range(5), "seed")


# -- appends, overwrites, deletes ------------------------------------------------------


def test_append_append_both_commit(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("append", table=T, ids=[10, 11])
    ours = t.append(rows([20, 21], "me"))
    assert ours > theirs
    assert content(me) == sorted(SEED + tagged([10, 11], "peer") + tagged([20, 21], "me"))
    assert table_history(me)[-2:] == [(theirs, ["append"]), (ours, ["append"])]


def test_append_after_overwrite_commits_on_top(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("overwrite", table=T, ids=[100, 101])
    ours = t.append(rows([20], "me"))
    assert ours > theirs  # serial order: their overwrite, then our rows
    assert content(me) == sorted(tagged([100, 101], "peer") + tagged([20], "me"))


def test_overwrite_after_append_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("append", table=T, ids=[10])
    with pytest.raises(RetryableConflictError) as info:
        t.overwrite(rows([200, 201], "me"))
    check_conflict(info.value, RetryableConflictError, ours="overwrite", theirs="append", version=theirs)
    assert content(me) == sorted(SEED + tagged([10], "peer"))  # the appended row was not silently dropped
    assert_no_orphans(me)


def test_overwrite_overwrite_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("overwrite", table=T, ids=[100])
    with pytest.raises(RetryableConflictError) as info:
        t.overwrite(rows([200], "me"))
    check_conflict(info.value, RetryableConflictError, ours="overwrite", theirs="overwrite", version=theirs)
    assert content(me) == tagged([100], "peer")
    assert_no_orphans(me)


def test_read_modify_write_overwrite_after_an_append_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    # The overwrite's input was read before the peer's append; the append
    # committed before the overwrite even started its commit (no KV race).
    t = seed(me, range(5))
    read = t.files()
    theirs = peer("append", table=T, ids=[10])
    me.refresh()
    fresh = me.load_table(T)
    new_files = fresh.write_files(rows([200, 201], "me"))
    with pytest.raises(RetryableConflictError) as info:
        fresh.commit_files(new_files, mode="overwrite", read_files=read)
    assert "committed after its input was read" in str(info.value)
    assert (info.value.ours, info.value.object) == ("overwrite", T)
    assert me.version == theirs  # nothing committed
    assert content(me) == sorted(SEED + tagged([10], "peer"))
    assert_no_orphans(me)


def test_blind_overwrite_after_an_append_replaces_it(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    t.files()
    peer("append", table=T, ids=[10])
    me.refresh()
    fresh = me.load_table(T)
    fresh.commit_files(fresh.write_files(rows([200], "me")), mode="overwrite")
    assert content(me) == tagged([200], "me")  # serial order: the append, then the overwrite


def test_read_modify_write_overwrite_commits_when_nothing_relevant_was_added(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    read = t.files()
    # Unchanged since the read: commits.
    t.commit_files(t.write_files(rows([0, 1], "me")), mode="overwrite", read_files=read)
    assert content(me) == tagged([0, 1], "me")
    # A filtered overwrite only cares about added files that may hold rows it replaces.
    t = me.load_table(T)
    read = t.files()
    peer("append", table=T, ids=[500])
    me.refresh()
    fresh = me.load_table(T)
    low = pc.field("id") < 100
    fresh.commit_files(fresh.write_files(rows([1], "low")), mode="overwrite", filter=low, read_files=read)
    assert content(me) == [(1, "low"), (500, "peer")]


def test_read_files_is_checked(me: catalog.Lakehouse) -> None:
    t = seed(me, range(5))
    new_files = t.write_files(rows([7], "me"))
    with pytest.raises(TypeError, match="read_files must be a list of DataFile"):
        t.commit_files(new_files, mode="overwrite", read_files=["not-a-file"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="read_files only goes with mode='overwrite'"):
        t.commit_files(new_files, mode="append", read_files=t.files())


# -- copy-on-write rewrites (commit_files mode="replace": Spark's UPDATE and MERGE) ---------------


def test_replace_removes_exactly_the_replaced_files(me: catalog.Lakehouse) -> None:
    t = seed(me, range(5), range(5, 10))
    read = t.files()
    first = min(read, key=lambda f: f.stats[next(iter(f.stats))][0])  # the file of ids 0..4
    version = t.commit_files(t.write_files(rows(range(5), "me")), mode="replace", replaced=[first], read_files=read)
    assert me.version == version
    assert content(me) == sorted(tagged(range(5), "me") + tagged(range(5, 10), "seed"))
    summary = [h for h in me.history() if h.version == version][0].operations[0]
    assert (summary["files_removed"], summary["rows_removed"], summary["rows_added"]) == (1, 5, 5)


def test_replace_of_a_file_another_writer_removed_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5), range(5, 10))
    read = t.files()
    second = max(read, key=lambda f: f.stats[next(iter(f.stats))][0])  # the file of ids 5..9
    theirs = peer("delete", table=T, where=pc.field("id") >= 5)  # removes that file whole
    with pytest.raises(RetryableConflictError) as raced:  # lost at the commit: overwrite x delete
        t.commit_files(t.write_files(rows(range(5, 10), "me")), mode="replace", replaced=[second], read_files=read)
    check_conflict(raced.value, RetryableConflictError, ours="overwrite", theirs="delete", version=theirs)
    me.refresh()
    fresh = me.load_table(T)  # the delete landed before this commit began: found at its first application
    with pytest.raises(RetryableConflictError, match="rewritten or removed after it was read"):
        fresh.commit_files(fresh.write_files(rows(range(5, 10), "me")), mode="replace", replaced=[second], read_files=read)
    assert me.version == theirs
    assert content(me) == SEED
    assert_no_orphans(me)


def test_replace_conflicts_only_with_added_rows_it_may_have_read(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5), range(5, 10))
    read = t.files()
    first = min(read, key=lambda f: f.stats[next(iter(f.stats))][0])
    peer("append", table=T, ids=[500])  # outside what the rewrite read (id < 5): it stands
    me.refresh()
    fresh = me.load_table(T)
    fresh.commit_files(
        fresh.write_files(rows(range(5), "me")), mode="replace", replaced=[first], read_files=read, filter=pc.field("id") < 5
    )
    assert content(me) == sorted(tagged(range(5), "me") + tagged(range(5, 10), "seed") + [(500, "peer")])
    read = me.load_table(T).files()
    mine = [f for f in read if f.rows == 5 and f.stats[next(iter(f.stats))][0] == 0]
    peer("append", table=T, ids=[3])  # may be a row the rewrite read: retryable
    me.refresh()
    fresh = me.load_table(T)
    with pytest.raises(RetryableConflictError, match="committed after its input was read"):
        fresh.commit_files(
            fresh.write_files(rows(range(5), "again")), mode="replace", replaced=mine, read_files=read, filter=pc.field("id") < 5
        )
    assert_no_orphans(me)


def test_replace_arguments_are_checked_before_anything_changes(me: catalog.Lakehouse) -> None:
    t = seed(me, range(5))
    version, new_files = me.version, t.write_files(rows([7], "me"))
    with pytest.raises(TypeError, match="replaced must be a list of DataFile"):
        t.commit_files(new_files, mode="replace", replaced=["not-a-file"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="replaced goes with mode='replace'"):
        t.commit_files(new_files, mode="overwrite", replaced=t.files())
    with pytest.raises(ValueError, match="replaced goes with mode='replace'"):
        t.commit_files(new_files, mode="replace")
    assert me.version == version and content(me) == SEED


def test_append_after_delete_commits_on_top(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("delete", table=T, where=pc.field("id") < 3)
    ours = t.append(rows([1], "me"))  # matches their filter, but lands after their delete
    assert ours > theirs
    assert content(me) == sorted(tagged([3, 4], "seed") + tagged([1], "me"))


def test_delete_rebases_over_append_of_non_matching_rows(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("append", table=T, ids=[50, 51])  # statistics prove: no row with id < 3
    ours = t.delete(pc.field("id") < 3)
    assert ours > theirs
    assert content(me) == sorted(tagged([3, 4], "seed") + tagged([50, 51], "peer"))
    assert table_history(me)[-2:] == [(theirs, ["append"]), (ours, ["delete"])]
    assert_no_orphans(me)


def test_delete_after_append_of_matching_rows_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5))
    theirs = peer("append", table=T, ids=[1])  # a row the delete would have removed
    with pytest.raises(RetryableConflictError) as info:
        t.delete(pc.field("id") < 3)
    check_conflict(info.value, RetryableConflictError, ours="delete", theirs="append", version=theirs)
    assert content(me) == sorted(SEED + tagged([1], "peer"))
    assert_no_orphans(me)


def test_delete_delete_of_the_same_file_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(10))  # one file
    theirs = peer("delete", table=T, where=pc.field("id") == 2)
    with pytest.raises(RetryableConflictError) as info:
        t.delete(pc.field("id") == 5)
    check_conflict(info.value, RetryableConflictError, ours="delete", theirs="delete", version=theirs)
    assert content(me) == sorted(tagged([i for i in range(10) if i != 2], "seed"))
    assert_no_orphans(me)


def test_delete_delete_of_different_files_both_commit(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(5), range(10, 15))  # two files
    theirs = peer("delete", table=T, where=pc.field("id") == 12)
    ours = t.delete(pc.field("id") == 3)
    assert ours > theirs
    assert content(me) == sorted(tagged([0, 1, 2, 4, 10, 11, 13, 14], "seed"))
    assert_no_orphans(me)


# -- compaction --------------------------------------------------------------------------


def test_compaction_rebases_over_append(me: catalog.Lakehouse, peer: Peer) -> None:
    seed(me, range(3), range(10, 13), range(20, 23))
    theirs = peer("append", table=T, ids=[50])
    report = me.compact_table(T, target_file_bytes=1 << 20)
    assert report.version is not None and report.version > theirs
    assert (report.files_removed, report.files_added) == (3, 1)
    assert content(me) == sorted(tagged([0, 1, 2, 10, 11, 12, 20, 21, 22], "seed") + tagged([50], "peer"))
    assert len(me.load_table(T).files()) == 2  # the compacted file and the peer's


def test_compaction_after_delete_of_its_input_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    seed(me, range(3), range(10, 13), range(20, 23))
    theirs = peer("delete", table=T, where=pc.field("id") == 11)
    with pytest.raises(RetryableConflictError) as info:
        me.compact_table(T, target_file_bytes=1 << 20)
    check_conflict(info.value, RetryableConflictError, ours="compact", theirs="delete", version=theirs)
    assert content(me) == sorted(tagged([0, 1, 2, 10, 12, 20, 21, 22], "seed"))  # the delete stands
    assert len(me.load_table(T).files()) == 3
    assert_no_orphans(me)


def test_delete_after_compaction_of_its_file_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(3), range(10, 13), range(20, 23))
    theirs = peer("compact", table=T)
    with pytest.raises(RetryableConflictError) as info:
        t.delete(pc.field("id") == 11)
    check_conflict(info.value, RetryableConflictError, ours="delete", theirs="compact", version=theirs)
    assert content(me) == sorted(tagged([0, 1, 2, 10, 11, 12, 20, 21, 22], "seed"))
    assert len(me.load_table(T).files()) == 1
    assert_no_orphans(me)


# -- drops -------------------------------------------------------------------------------

WRITES: dict[str, Callable[[catalog.Lakehouse, catalog.Table], object]] = {
    "append": lambda me, t: t.append(rows([50], "me")),
    "overwrite": lambda me, t: t.overwrite(rows([50], "me")),
    "delete": lambda me, t: t.delete(pc.field("id") == 1),
    "compact": lambda me, t: me.compact_table(T, target_file_bytes=1 << 20),
    "update_properties": lambda me, t: t.update_properties(updates={"owner": "me"}),
    "update_schema": lambda me, t: t.update_schema().add_column("score", pa.float64()).commit(),
}


@pytest.mark.parametrize("ours", sorted(WRITES))
def test_any_write_after_drop_is_incompatible(me: catalog.Lakehouse, peer: Peer, ours: str) -> None:
    t = seed(me, range(3), range(10, 13))
    theirs = peer("drop_table", table=T)
    with pytest.raises(IncompatibleConflictError) as info:
        WRITES[ours](me, t)
    check_conflict(info.value, IncompatibleConflictError, ours=ours, theirs="drop_table", version=theirs)
    me.refresh()
    assert not me.table_exists(T)
    assert_no_orphans(me)


def test_append_after_replace_with_new_schema_is_incompatible(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(3))
    theirs = peer("replace_table", table=T)  # drop + create with another schema, one commit
    with pytest.raises(IncompatibleConflictError) as info:
        t.append(rows([50], "me"))
    check_conflict(info.value, IncompatibleConflictError, ours="append", theirs="drop_table", version=theirs)
    me.refresh()
    replaced = me.load_table(T)
    assert replaced.id != t.id and replaced.schema.names == ["id"]
    assert replaced.scan().to_arrow().num_rows == 0
    assert_no_orphans(me)


PEER_WRITES: dict[str, dict[str, Any]] = {
    "append": {"step": "append", "table": T, "ids": [50]},
    "overwrite": {"step": "overwrite", "table": T, "ids": [50]},
    "delete": {"step": "delete", "table": T, "where": pc.field("id") == 1},
    "compact": {"step": "compact", "table": T},
    "update_properties": {"step": "set_properties", "table": T, "updates": {"owner": "peer"}},
    "update_schema": {"step": "add_column", "table": T, "column": "score"},
}


@pytest.mark.parametrize("theirs_kind", sorted(PEER_WRITES))
def test_drop_rebases_over_any_write(me: catalog.Lakehouse, peer: Peer, theirs_kind: str) -> None:
    seed(me, range(3), range(10, 13))
    step = dict(PEER_WRITES[theirs_kind])
    theirs = peer(step.pop("step"), **step)
    ours = me.drop_table(T)
    assert ours > theirs
    me.refresh()
    assert not me.table_exists(T)
    # The drop removed what was there at its version, the peer's write included.
    live_before_drop = me.at(version=ours - 1).load_table(T).files()
    entry = next(e for e in me.history(limit=None) if e.version == ours)
    assert [op["kind"] for op in entry.operations] == ["drop_table"]
    assert entry.operations[0]["files_removed"] == len(live_before_drop)
    assert_no_orphans(me)


# -- names -------------------------------------------------------------------------------


def test_create_create_of_one_name_is_incompatible(me: catalog.Lakehouse, peer: Peer) -> None:
    me.create_namespace("db")
    theirs = peer("create_table", table=T)
    with pytest.raises(IncompatibleConflictError) as info:
        me.create_table(T, pa.schema([("other", pa.string())]))
    check_conflict(info.value, IncompatibleConflictError, ours="create_table", theirs="create_table", version=theirs)
    me.refresh()
    assert me.load_table(T).schema.names == SCHEMA.names  # the winner's table
    assert me.list_tables("db") == [T]


@pytest.mark.parametrize("what", ["table", "namespace"])
def test_create_in_a_dropped_namespace_is_incompatible(me: catalog.Lakehouse, peer: Peer, what: str) -> None:
    me.create_namespace("db")
    theirs = peer("drop_namespace", namespace="db")
    with pytest.raises(IncompatibleConflictError) as info:
        if what == "table":
            me.create_table("db.t2", SCHEMA)
        else:
            me.create_namespace("db.sub")
    ours = "create_table" if what == "table" else "create_namespace"
    obj = "db.t2" if what == "table" else "db.sub"
    check_conflict(info.value, IncompatibleConflictError, ours=ours, theirs="drop_namespace", version=theirs, obj=obj)
    me.refresh()
    assert me.list_namespaces() == []


def test_rename_and_append_both_commit(me: catalog.Lakehouse, peer: Peer) -> None:
    seed(me, range(3))
    theirs = peer("append", table=T, ids=[50])
    ours = me.rename_table(T, "db.renamed")
    assert ours > theirs
    assert content(me, "db.renamed") == sorted(tagged(range(3), "seed") + tagged([50], "peer"))
    assert not me.table_exists(T)


@pytest.mark.parametrize("ours", ["append", "delete", "update_properties"])
def test_write_after_rename_lands_in_the_renamed_table(me: catalog.Lakehouse, peer: Peer, ours: str) -> None:
    t = seed(me, range(3), range(10, 13))
    theirs = peer("rename_table", old=T, new="db.renamed")
    version = WRITES[ours](me, t)  # writes address the table by id, not by name
    assert isinstance(version, int) and version > theirs
    me.refresh()
    assert not me.table_exists(T)
    renamed = me.load_table("db.renamed")
    expected = {
        "append": tagged([0, 1, 2, 10, 11, 12], "seed") + tagged([50], "me"),
        "delete": tagged([0, 2, 10, 11, 12], "seed"),
        "update_properties": tagged([0, 1, 2, 10, 11, 12], "seed"),
    }[ours]
    assert content(me, "db.renamed") == sorted(expected)
    assert renamed.properties == ({"owner": "me"} if ours == "update_properties" else {})


# -- properties and schema ---------------------------------------------------------------


def test_properties_same_key_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me)
    theirs = peer("set_properties", table=T, updates={"owner": "peer"})
    with pytest.raises(RetryableConflictError) as info:
        t.update_properties(updates={"owner": "me"})
    check_conflict(
        info.value, RetryableConflictError, ours="update_properties", theirs="update_properties", version=theirs
    )
    me.refresh()
    assert me.load_table(T).properties == {"owner": "peer"}


def test_properties_different_keys_both_commit(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me)
    theirs = peer("set_properties", table=T, updates={"owner": "peer"})
    ours = t.update_properties(updates={"tier": "gold"})
    assert ours > theirs
    me.refresh()
    assert me.load_table(T).properties == {"owner": "peer", "tier": "gold"}


def test_schema_change_after_append_both_commit(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(3))
    theirs = peer("append", table=T, ids=[50])
    ours = t.update_schema().add_column("score", pa.float64()).commit()
    assert ours > theirs
    me.refresh()
    data = me.load_table(T).scan().to_arrow()
    assert data.schema.names == ["id", "tag", "score"]
    assert sorted(data.column("id").to_pylist()) == [0, 1, 2, 50]  # the peer's file reads under the new schema
    assert data.column("score").null_count == 4


@pytest.mark.parametrize(
    "change,column", [("add_column", "tag"), ("rename_column", "label")], ids=["add-column", "rename-column"]
)
def test_append_rebases_over_a_compatible_schema_change(
    me: catalog.Lakehouse, peer: Peer, change: str, column: str
) -> None:
    t = seed(me, range(3))
    if change == "add_column":
        theirs = peer("add_column", table=T, column="score")
    else:
        theirs = peer("rename_column", table=T, old="tag", new="label")
    ours = t.append(rows([50], "me"))
    assert ours > theirs
    assert content(me, column=column) == sorted(tagged(range(3), "seed") + tagged([50], "me"))
    assert table_history(me)[-2:] == [(theirs, ["update_schema"]), (ours, ["append"])]


def test_schema_change_after_schema_change_is_retryable(me: catalog.Lakehouse, peer: Peer) -> None:
    t = seed(me, range(3))
    theirs = peer("add_column", table=T, column="score")
    with pytest.raises(RetryableConflictError) as info:
        t.update_schema().add_column("weight", pa.float64()).commit()
    check_conflict(info.value, RetryableConflictError, ours="update_schema", theirs="update_schema", version=theirs)
    me.refresh()
    assert me.load_table(T).schema.names == ["id", "tag", "score"]


# -- multi-table transactions ------------------------------------------------------------


def _two_tables(me: catalog.Lakehouse) -> None:
    me.create_namespace("db")
    me.create_table("db.a", SCHEMA).append(rows(range(3), "seed"))
    me.create_table("db.b", SCHEMA)
    me.create_table("db.c", SCHEMA)


def test_serializable_read_a_write_b_conflicts_with_a_write_to_a(me: catalog.Lakehouse, peer: Peer) -> None:
    _two_tables(me)
    theirs = None
    with pytest.raises(RetryableConflictError) as info:
        with me.transaction(isolation="serializable") as tx:
            total = tx.load_table("db.a").scan().to_arrow().num_rows
            tx.load_table("db.b").append(rows([total], "me"))  # B computed from A
            theirs = peer("append", table="db.a", ids=[99])
    assert theirs is not None
    # No single object: the transaction's reads (of db.a) changed, not what it wrote.
    check_conflict(info.value, RetryableConflictError, ours="append", theirs="append", version=theirs, obj=None)
    assert content(me, "db.b") == []  # nothing of the transaction committed
    assert content(me, "db.a") == sorted(tagged(range(3), "seed") + tagged([99], "peer"))
    assert_no_orphans(me)


def test_serializable_read_a_write_b_commits_beside_a_write_to_c(me: catalog.Lakehouse, peer: Peer) -> None:
    _two_tables(me)
    with me.transaction(isolation="serializable") as tx:
        total = tx.load_table("db.a").scan().to_arrow().num_rows
        tx.load_table("db.b").append(rows([total], "me"))
        theirs = peer("append", table="db.c", ids=[99])
    assert tx.version is not None and tx.version > theirs
    assert content(me, "db.b") == sorted(tagged([3], "me"))


def test_snapshot_read_a_write_b_allows_the_write_skew(me: catalog.Lakehouse, peer: Peer) -> None:
    _two_tables(me)
    with me.transaction(isolation="snapshot") as tx:
        total = tx.load_table("db.a").scan().to_arrow().num_rows
        tx.load_table("db.b").append(rows([total], "me"))
        theirs = peer("append", table="db.a", ids=[99])
    assert tx.version is not None and tx.version > theirs
    assert content(me, "db.b") == sorted(tagged([3], "me"))  # computed from A before the peer's row


@pytest.mark.parametrize("read", ["listing", "scan"])
def test_transaction_whose_read_object_was_dropped_is_retryable(me: catalog.Lakehouse, peer: Peer, read: str) -> None:
    """A drop of something the transaction only *read* asks for a redo; it does not make its write incompatible."""
    _two_tables(me)
    theirs = None
    with pytest.raises(RetryableConflictError) as info:
        with me.transaction(isolation="serializable") as tx:
            if read == "listing":
                seen = len(tx.list_tables("db"))
            else:
                seen = tx.load_table("db.c").scan().to_arrow().num_rows
            tx.load_table("db.b").append(rows([seen], "me"))
            theirs = peer("drop_table", table="db.c")
    assert theirs is not None
    check_conflict(info.value, RetryableConflictError, ours="append", theirs="drop_table", version=theirs, obj=None)
    assert content(me, "db.b") == []
    assert me.list_tables("db") == ["db.a", "db.b"]
