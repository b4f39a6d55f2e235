"""catalog/transactions.py: direct commits, multi-table transactions and durable staging.

* ``commit_ops``: one lakehouse version per call, its summary in
  ``lake.history()``; a lost race is rebased or raised by the pair of
  operations (catalog/conflicts.py); the files of a commit that fails are
  deleted.
* ``LiveHost``: the live lakehouse as a host.
* ``OpenTransaction`` (``lake.transaction()``): one version at the commit;
  a rollback deletes the files written for it.
* ``bounded``: op summaries cut to the root file's budget.
* the durable path (``lake.durable.begin()``): staging touches no catalog
  key, the topmost commit is one version, a refused staging deletes its files.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from catalog import (
    IncompatibleConflictError,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    RetryableConflictError,
    Table,
)
from catalog.access import CatalogReader
from catalog.errors import LockConflictError
from catalog.ops import Append, CreateNamespace, Delete, Overwrite
from catalog.transactions import (
    SUMMARY_BUDGET,
    LiveHost,
    OpenTransaction,
    Outcome,
    apply_all,
    begin,
    bounded,
    commit_ops,
)
from kvstore.errors import TransactionClosedError

INTS = pa.schema([("x", pa.int64())])


def ints(values: list[int]) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())}, schema=INTS)


def xs(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("x").to_pylist())


def paths(lake: catalog.Lakehouse, table: Table) -> set[str]:
    """The objects under the table's location in the lakehouse's object store."""
    return {meta.path for meta in lake.objects.list(table.location + "/")}


@pytest.fixture
def table(lake: catalog.Lakehouse) -> Table:
    lake.create_namespace("db")
    t = lake.create_table("db.t", INTS)
    t.append(ints([1, 2]))
    return t


def append_op(table: Table, values: list[int]) -> Append:
    return Append(table=table.name, table_id=table.id, files=table.write_files(ints(values)), schema=table.schema)


def started_with(lake: catalog.Lakehouse, ops: list) -> tuple:  # type: ignore[type-arg]
    """A serializable transaction with ``ops`` applied, not yet committed (as a multi-table transaction holds it)."""
    txn, writer = begin(lake.store, "serializable")
    summaries = apply_all(ops, writer, lake.context, rebase=False)
    return (txn, writer), summaries


# -- commit_ops ----------------------------------------------------------------------------


def test_commit_ops_makes_one_version_whose_history_lists_the_ops(lake: catalog.Lakehouse) -> None:
    before = lake.version
    outcome = commit_ops(lake.context, [CreateNamespace(ns=("a",)), CreateNamespace(ns=("b",), properties={"k": "v"})])
    assert isinstance(outcome, Outcome)
    assert outcome.version == before + 1 == lake.version
    assert lake.list_namespaces() == ["a", "b"] and lake.namespace_properties("b") == {"k": "v"}
    [entry] = lake.history(limit=1)
    assert entry.version == outcome.version
    assert entry.operations == outcome.summaries
    assert [(s["kind"], s["object"]) for s in entry.operations] == [("create_namespace", "a"), ("create_namespace", "b")]


def test_commit_ops_of_an_op_that_does_not_apply_commits_nothing_and_deletes_its_files(
    lake: catalog.Lakehouse, table: Table
) -> None:
    op = append_op(table, [3])
    assert set(op.new_paths()) <= paths(lake, table)
    before = lake.version
    with pytest.raises(NamespaceAlreadyExistsError):
        commit_ops(lake.context, [op, CreateNamespace(ns=("db",))])
    assert lake.version == before
    assert xs(table) == [1, 2]
    assert not set(op.new_paths()) & paths(lake, table)


def test_a_started_commit_that_lost_is_rebased(lake: catalog.Lakehouse, table: Table) -> None:
    ops = [Delete(table=table.name, table_id=table.id, filter=pc.field("x") == 1)]
    started, summaries = started_with(lake, ops)
    theirs = table.append(ints([5]))
    outcome = commit_ops(lake.context, ops, started=started, summaries=summaries)
    assert theirs is not None and outcome.version == theirs + 1 == lake.version
    assert xs(table) == [2, 5]
    assert [s["kind"] for s in lake.history(limit=1)[0].operations] == ["delete"]


def test_a_started_commit_out_of_rebases_is_retryable(lake: catalog.Lakehouse, table: Table) -> None:
    ops = [Delete(table=table.name, table_id=table.id, filter=pc.field("x") == 1)]
    started, summaries = started_with(lake, ops)
    table.append(ints([5]))
    with pytest.raises(RetryableConflictError, match="lost 1 races in a row") as caught:
        commit_ops(lake.context, ops, started=started, summaries=summaries, max_rebases=0)
    assert caught.value.ours == "delete"
    assert xs(table) == [1, 2, 5]
    assert not set(ops[0].new_paths()) & paths(lake, table)  # the delete's rewritten file is gone


def test_an_append_losing_to_a_drop_is_incompatible(lake: catalog.Lakehouse, table: Table) -> None:
    op = append_op(table, [3])
    started, summaries = started_with(lake, [op])
    dropped = lake.drop_table("db.t")
    with pytest.raises(IncompatibleConflictError) as caught:
        commit_ops(lake.context, [op], started=started, summaries=summaries)
    error = caught.value
    assert (error.ours, error.theirs, error.object, error.version) == ("append", "drop_table", "db.t", dropped)
    assert lake.version == dropped
    assert not set(op.new_paths()) & paths(lake, table)


def test_an_overwrite_losing_to_an_append_is_retryable(lake: catalog.Lakehouse, table: Table) -> None:
    op = Overwrite(table=table.name, table_id=table.id, files=table.write_files(ints([9])), files_schema=table.schema)
    started, summaries = started_with(lake, [op])
    appended = table.append(ints([3]))
    with pytest.raises(RetryableConflictError, match="redo it on the new data") as caught:
        commit_ops(lake.context, [op], started=started, summaries=summaries)
    assert (caught.value.ours, caught.value.theirs, caught.value.version) == ("overwrite", "append", appended)
    assert xs(table) == [1, 2, 3]
    assert not set(op.new_paths()) & paths(lake, table)


def test_appends_from_two_handles_racing_in_threads_all_land(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, poll_interval_s=0) as first, catalog.open(url, poll_interval_s=0) as second:
        first.create_namespace("db")
        first.create_table("db.t", INTS)
        second.refresh()
        tables = [first.load_table("db.t"), second.load_table("db.t")]
        start = threading.Barrier(2)
        versions: list[list[int]] = [[], []]
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                start.wait()
                for k in range(4):
                    versions[i].append(tables[i].append(ints([10 * i + k])))  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        first.refresh()
        assert xs(first.load_table("db.t")) == [0, 1, 2, 3, 10, 11, 12, 13]
        every = versions[0] + versions[1]
        assert len(set(every)) == 8  # each append is its own version
        appends = [e.version for e in first.history(limit=None) if e.operations[0]["kind"] == "append"]
        assert sorted(appends) == sorted(every)


# -- LiveHost ------------------------------------------------------------------------------


def test_live_host_submit_commits_and_returns_the_version(lake: catalog.Lakehouse) -> None:
    host = LiveHost(lake.context)
    host.check_writable()  # the live lakehouse takes writes: no error
    assert (host.objects, host.target_file_bytes) == (lake.objects, lake.target_file_bytes)
    version = host.submit(CreateNamespace(ns=("a",)))
    assert version == lake.version
    with host.reading() as reader:
        assert isinstance(reader, CatalogReader)
        assert reader.namespace(("a",)) is not None
    with host.resolving() as reader:
        assert reader.child_namespaces(()) == [("a",)]
    assert host.submit(CreateNamespace(ns=("b",))) == version + 1


# -- OpenTransaction ----------------------------------------------------------------------


def test_an_open_transaction_commits_its_ops_as_one_version(lake: catalog.Lakehouse, table: Table) -> None:
    tx = OpenTransaction(lake.context, "serializable")
    assert tx.state == "active" and tx.version is None
    before = lake.version
    assert tx.submit(append_op(table, [3])) is None
    assert tx.submit(CreateNamespace(ns=("other",))) is None
    with tx.reading() as reader:
        assert reader.namespace(("other",)) is not None
    assert not lake.namespace_exists("other")
    assert [op.kind for op in tx.operations] == ["append", "create_namespace"]
    tx.operations.clear()  # a copy
    assert len(tx.operations) == 2
    version = tx.commit()
    assert version == before + 1 == lake.version == tx.version
    assert tx.state == "committed"
    assert xs(table) == [1, 2, 3] and lake.namespace_exists("other")
    assert [s["kind"] for s in lake.history(limit=1)[0].operations] == ["append", "create_namespace"]
    tx.rollback()  # after the commit: nothing to discard
    assert tx.state == "committed" and xs(table) == [1, 2, 3]


def test_a_rollback_discards_the_changes_and_deletes_their_files(lake: catalog.Lakehouse, table: Table) -> None:
    before_version, before_paths = lake.version, paths(lake, table)
    with pytest.raises(TransactionClosedError, match="rolled back"):  # the commit at the block's end
        with lake.transaction() as tx:
            inside = tx.load_table("db.t")
            inside.append(ints([3]))
            inside.delete(pc.field("x") == 1)  # rewrites a file: the kept row goes in a new one
            assert [op.kind for op in tx.operations] == ["append", "delete"]
            assert len(paths(lake, table) - before_paths) == 2
            tx.rollback()
            assert tx.state == "rolled back"
            assert paths(lake, table) == before_paths
            with pytest.raises(TransactionClosedError):
                inside.append(ints([4]))
            with pytest.raises(TransactionClosedError):
                tx.create_namespace("late")
            with pytest.raises(TransactionClosedError):
                tx.list_namespaces()
            tx.rollback()  # again: a no-op
    assert tx.state == "rolled back"
    assert paths(lake, table) == before_paths
    assert lake.version == before_version and xs(table) == [1, 2]


def test_an_op_that_fails_in_a_transaction_is_not_kept_and_its_files_go(lake: catalog.Lakehouse, table: Table) -> None:
    with lake.transaction() as tx:
        tx.create_namespace("inside")
        with pytest.raises(NamespaceAlreadyExistsError):
            tx.create_namespace("db")
        tx.drop_table("db.t")
        op = append_op(table, [3])
        with pytest.raises(NoSuchTableError):
            tx.submit(op)
        assert not set(op.new_paths()) & paths(lake, table)
        assert [o.kind for o in tx.operations] == ["create_namespace", "drop_table"]
    assert lake.namespace_exists("inside") and not lake.table_exists("db.t")


def test_a_transaction_that_read_a_table_another_commit_changed_is_retryable(
    lake: catalog.Lakehouse, table: Table
) -> None:
    lake.create_table("db.u", INTS)
    before_paths = paths(lake, table)
    with pytest.raises(RetryableConflictError, match="read data that a concurrent commit changed"):
        with lake.transaction() as tx:
            total = sum(tx.load_table("db.t").scan().to_arrow().column("x").to_pylist())
            tx.load_table("db.u").append(ints([total]))
            table.append(ints([100]))  # changes what the transaction read
    assert tx.state == "aborted"
    assert lake.load_table("db.u").scan().count() == 0
    assert paths(lake, table) - before_paths != set()  # the concurrent append's file stays


def test_a_transaction_whose_reads_still_hold_commits_after_another_commit(lake: catalog.Lakehouse, table: Table) -> None:
    lake.create_table("db.u", INTS)
    lake.create_table("db.other", INTS)
    with lake.transaction() as tx:
        total = sum(tx.load_table("db.t").scan().to_arrow().column("x").to_pylist())
        tx.load_table("db.u").append(ints([total]))
        theirs = lake.load_table("db.other").append(ints([7]))  # touches nothing it read
    assert theirs is not None and tx.version == theirs + 1
    assert xs(lake.load_table("db.u")) == [3]


# -- bounded -------------------------------------------------------------------------------


def summaries(n: int, kind: str = "append") -> list[dict[str, object]]:
    return [
        {"kind": kind, "object": f"ns.table_{i:05d}", "files_added": 1, "rows_added": i, "files_removed": 0,
         "rows_removed": 2}
        for i in range(n)
    ]


def test_bounded_keeps_summaries_that_fit() -> None:
    few = summaries(10)
    assert bounded(few) == few


def test_bounded_cuts_many_summaries_to_a_more_entry_with_totals() -> None:
    many = summaries(3000) + summaries(100, kind="delete")
    out = bounded(many)
    assert len(json.dumps(out, separators=(",", ":"))) <= SUMMARY_BUDGET
    kept, more = out[:-1], out[-1]
    assert kept == many[: len(kept)] and 0 < len(kept) < len(many)
    rest = many[len(kept) :]
    assert more["kind"] == "more" and more["object"] is None
    assert more["operations"] == len(rest)
    assert more["rows_added"] == sum(int(s["rows_added"]) for s in rest)  # type: ignore[call-overload]
    assert more["rows_removed"] == 2 * len(rest)
    assert more["files_added"] == len(rest) and more["files_removed"] == 0
    assert more["kinds"] == ["append", "delete"]


@pytest.mark.parametrize("budget", [600, 2000, 10_000])
def test_bounded_stays_under_any_budget(budget: int) -> None:
    out = bounded(summaries(500), budget=budget)
    assert len(json.dumps(out, separators=(",", ":"))) <= budget
    assert sum(int(s.get("operations", 1)) for s in out) == 500


def test_a_huge_transaction_s_history_ends_in_a_more_entry(lake: catalog.Lakehouse) -> None:
    with lake.transaction() as tx:
        for i in range(1200):
            tx.create_namespace(f"ns{i:04d}")
    [entry] = lake.history(limit=1)
    more = entry.operations[-1]
    assert more["kind"] == "more" and more["kinds"] == ["create_namespace"]
    assert len(entry.operations) - 1 + more["operations"] == 1200
    assert len(lake.list_namespaces()) == 1200


# -- durable -------------------------------------------------------------------------------


def test_durable_staging_touches_no_catalog_key_until_the_topmost_commit(lake: catalog.Lakehouse, table: Table) -> None:
    history = lake.history(limit=None)
    d = lake.durable.begin(title="nightly")
    d.create_namespace("staged")
    d.create_table("staged.t", INTS)
    d.load_table("staged.t").append(ints([1]))
    d.load_table("db.t").append(ints([3]))
    assert d.list_tables("staged") == ["staged.t"]
    assert xs(d.load_table("db.t")) == [1, 2, 3]
    # the catalog, outside: unchanged
    assert not lake.namespace_exists("staged")
    assert xs(table) == [1, 2]
    assert lake.history(limit=None) == history

    version = d.commit()
    assert d.state == "committed"
    assert version == lake.version
    new = lake.history(limit=None)
    assert len(new) == len(history) + 1 and new[1:] == history
    assert new[0].version == version
    assert [(s["kind"], s["object"]) for s in new[0].operations] == [
        ("create_namespace", "staged"), ("create_table", "staged.t"), ("append", "staged.t"), ("append", "db.t")
    ]
    assert xs(lake.load_table("staged.t")) == [1] and xs(table) == [1, 2, 3]


def test_a_nested_durable_commit_moves_into_its_parent(lake: catalog.Lakehouse, table: Table) -> None:
    history = lake.history(limit=None)
    parent = lake.durable.begin()
    child = lake.durable.begin(parent=parent)
    child.create_namespace("from_child")
    assert child.commit() is None
    assert parent.namespace_exists("from_child") and not lake.namespace_exists("from_child")
    assert lake.history(limit=None) == history
    version = parent.commit()
    assert lake.namespace_exists("from_child")
    assert [e.version for e in lake.history(limit=None)] == [version] + [e.version for e in history]


def test_a_refused_staging_deletes_its_files_and_stages_nothing(lake: catalog.Lakehouse, table: Table) -> None:
    holder = lake.durable.begin()
    holder.lock("db.t", "exclusive")
    other = lake.durable.begin()
    before = paths(lake, table)
    with pytest.raises(LockConflictError) as caught:
        other.load_table("db.t").append(ints([3]))
    assert (caught.value.node, caught.value.mode, caught.value.holder) == ("db.t", "shared", holder.id)
    assert paths(lake, table) == before
    assert xs(other.load_table("db.t")) == [1, 2]
    holder.abort()
    history = lake.history(limit=None)
    other.commit()  # nothing staged: nothing applied
    assert xs(table) == [1, 2]
    assert lake.history(limit=None) == history


def test_a_plain_commit_refused_by_a_durable_lock_deletes_its_files(lake: catalog.Lakehouse, table: Table) -> None:
    d = lake.durable.begin()
    d.load_table("db.t").append(ints([3]))  # a shared lock on db.t
    before = (lake.version, paths(lake, table))
    with pytest.raises(LockConflictError, match="needs exclusive"):
        table.overwrite(ints([9]))
    assert (lake.version, paths(lake, table)) == before
    table.append(ints([4]))  # shared is compatible with shared
    d.commit()
    assert xs(table) == [1, 2, 3, 4]


def test_gc_deletes_the_staged_files_of_an_aborted_durable_transaction(lake: catalog.Lakehouse, table: Table) -> None:
    d = lake.durable.begin()
    before = paths(lake, table)
    d.load_table("db.t").append(ints([3]))
    staged = paths(lake, table) - before
    assert len(staged) == 1
    kept = lake.gc(grace_s=0)
    assert not staged & set(kept.orphan_files) and staged <= paths(lake, table)  # a live transaction's files stay
    d.abort()
    report = lake.gc(grace_s=0)
    assert staged <= set(report.orphan_files)
    assert paths(lake, table) == before
    assert xs(table) == [1, 2]


def test_gc_after_an_aborted_durable_replace_view(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("db")
    lake.create_view("db.v", "select 1")
    d = lake.durable.begin()
    d.replace_view("db.v", sql="select 2")
    d.abort()
    report = lake.gc(grace_s=0)
    assert report.orphan_files == []
    assert lake.load_view("db.v").sql == "select 1"


def test_a_durable_replace_view_keeps_what_it_does_not_change(lake: catalog.Lakehouse) -> None:
    # The staged record's None fields mean "keep": they must survive being staged as JSON.
    lake.create_namespace("db")
    lake.create_view("db.v", "select 1", properties={"owner": "ann"})
    d = lake.durable.begin()
    d.replace_view("db.v", sql="select 2")
    assert d.load_view("db.v").sql == "select 2"
    d.commit()
    view = lake.load_view("db.v")
    assert (view.sql, view.dialect, view.properties, view.version) == ("select 2", "spark", {"owner": "ann"}, 2)
