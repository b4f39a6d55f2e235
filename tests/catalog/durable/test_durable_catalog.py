"""Catalog operations in durable transactions: staging, implicit locks, snapshot
freezing, nested commit, one-version topmost commit, gc of staged files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.durable import lifecycle
from catalog.errors import LockConflictError, TransactionStateError

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "day": ["mon"] * n})


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[catalog.Lakehouse]:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, background_maintenance=False) as lake:
        lake.create_namespace("sales")
        for name in ("t1", "t2", "t3"):
            lake.create_table(f"sales.{name}", SCHEMA)
        yield lake


def _commit_summary(lake: catalog.Lakehouse, version: int) -> dict:
    """The summary the commit at ``version`` recorded in its root file (what lake.history() reads)."""
    from kvstore.chain import VersionChain

    commits = VersionChain(lake.store.objects).read_root(version).commits
    summaries = [c["summary"] for c in commits if c.get("summary")]
    assert len(summaries) == 1, commits
    return summaries[0]


def count(lake: catalog.Lakehouse, name: str) -> int:
    lake.refresh()
    return lake.load_table(name).scan().count()


def test_staged_appends_commit_as_one_version(lake: catalog.Lakehouse) -> None:
    tx = lake.begin_durable(timeout=600, title="nightly load")
    tx.load_table("sales.t1").append(rows(3))
    tx.load_table("sales.t2").append(rows(2))
    tx.load_table("sales.t1").append(rows(1, 10))
    assert count(lake, "sales.t1") == 0 and count(lake, "sales.t2") == 0
    assert tx.load_table("sales.t1").scan().count() == 4  # the transaction sees its own work
    tx.commit()
    assert (count(lake, "sales.t1"), count(lake, "sales.t2")) == (4, 2)
    version = lake.version  # the commit was the last thing written
    with lake.at(version=version) as now, lake.at(version=version - 1) as past:
        assert [now.load_table(t).scan().count() for t in ("sales.t1", "sales.t2")] == [4, 2]
        assert [past.load_table(t).scan().count() for t in ("sales.t1", "sales.t2")] == [0, 0]
    summary = _commit_summary(lake, version)
    assert summary["durable_transaction"] == tx.id and summary["title"] == "nightly load"
    assert sorted(op["object"] for op in summary["ops"]) == ["sales.t1", "sales.t1", "sales.t2"]
    assert lake.locks("sales.t1") == [] and tx.state == "committed"


def test_the_deprecated_lake_begin_warns_and_still_begins_a_durable_transaction(lake: catalog.Lakehouse) -> None:
    with pytest.warns(DeprecationWarning, match=r"Lakehouse\.begin\(\) is deprecated.*begin_durable") as caught:
        tx = lake.begin(timeout=600, title="old name")
    assert caught[0].filename == __file__  # the warning points at the caller
    assert (tx.state, tx.record().title) == ("active", "old name")
    assert [r.id for r in lake.transactions()] == [tx.id]
    tx.load_table("sales.t1").append(rows(2))
    assert count(lake, "sales.t1") == 0  # staged, not visible
    tx.commit()
    assert count(lake, "sales.t1") == 2 and tx.state == "committed"
    with pytest.raises(TypeError, match=r"Lakehouse\.begin\(\): timeout"):  # checked like the new name
        lake.begin(timeout="soon")  # type: ignore[arg-type]


def test_implicit_locks(lake: catalog.Lakehouse) -> None:
    tx1, tx2 = lake.begin_durable(), lake.begin_durable()
    tx1.load_table("sales.t1").append(rows(1))
    tx1.load_table("sales.t1").append(rows(1))  # no second lock
    assert [(lock.txn, lock.mode, lock.implicit) for lock in lake.locks("sales.t1")] == [(tx1.id, "shared", True)]
    tx2.load_table("sales.t1").append(rows(1))  # appends share
    with pytest.raises(LockConflictError, match="exclusive"):
        tx2.load_table("sales.t1").overwrite(rows(1))
    with pytest.raises(TransactionStateError, match="staged change"):
        tx1.unlock("sales.t1")
    tx1.commit()
    tx2.commit()
    assert count(lake, "sales.t1") == 3


def test_rejected_operation_deletes_its_files(lake: catalog.Lakehouse) -> None:
    holder, other = lake.begin_durable(), lake.begin_durable()
    holder.lock("sales.t1", "exclusive")
    before = {meta.path for meta in lake.objects.list("data/")}
    with pytest.raises(LockConflictError):
        other.load_table("sales.t1").append(rows(5))
    assert {meta.path for meta in lake.objects.list("data/")} == before
    assert lake.durable.manager.run(lambda work: lifecycle.staged_ops(work, other.id)) == []


def test_create_table_locks_name_in_namespace(lake: catalog.Lakehouse) -> None:
    tx1, tx2 = lake.begin_durable(), lake.begin_durable()
    tx1.create_table("sales.new", SCHEMA)
    locks = {(lock.node, lock.mode, lock.child_key) for lock in lake.durable.manager.attach(tx1.id).locks()}
    assert locks == {("sales.new", "exclusive", None), ("sales", "shared", "new")}
    with pytest.raises(LockConflictError, match=tx1.id):
        tx2.create_table("sales.new", SCHEMA)
    tx2.create_table("sales.other", SCHEMA)
    assert not lake.table_exists("sales.new")
    assert tx1.table_exists("sales.new")
    tx1.commit()
    tx2.commit()
    lake.refresh()
    assert lake.table_exists("sales.new") and lake.table_exists("sales.other")


def test_property_keys(lake: catalog.Lakehouse) -> None:
    tx1, tx2 = lake.begin_durable(), lake.begin_durable()
    tx1.update_properties("sales.t1", {"owner": "ann"})
    with pytest.raises(LockConflictError, match="attribute_key='owner'"):
        tx2.update_properties("sales.t1", {"owner": "bob"})
    tx2.update_properties("sales.t1", {"comment": "hi"})
    tx1.commit()
    tx2.commit()
    lake.refresh()
    assert lake.load_table("sales.t1").properties == {"owner": "ann", "comment": "hi"}


def test_snapshot_lock_sees_old_value_and_cannot_write(lake: catalog.Lakehouse) -> None:
    lake.load_table("sales.t1").append(rows(2))
    tx = lake.begin_durable()
    tx.lock("sales.t1", "snapshot")
    lake.load_table("sales.t1").append(rows(5, 100))  # an outside write
    assert count(lake, "sales.t1") == 7
    frozen = tx.load_table("sales.t1")
    assert frozen.scan().count() == 2
    with pytest.raises(LockConflictError, match="snapshot"):
        frozen.append(rows(1))
    assert tx.load_table("sales.t2").scan().count() == 0  # other tables are live


def test_nested_child_commits_into_parent(lake: catalog.Lakehouse) -> None:
    outer = lake.begin_durable()
    inner = lake.begin_durable(parent=outer)
    inner.load_table("sales.t1").append(rows(2))
    assert outer.load_table("sales.t1").scan().count() == 0
    inner.commit()
    assert outer.load_table("sales.t1").scan().count() == 2
    assert count(lake, "sales.t1") == 0
    dropped = lake.begin_durable(parent=outer)
    dropped.load_table("sales.t2").append(rows(9))
    dropped.abort()
    outer.commit()
    assert (count(lake, "sales.t1"), count(lake, "sales.t2")) == (2, 0)


def test_gc_removes_staged_files_of_aborted_transactions_only(lake: catalog.Lakehouse) -> None:
    kept, aborted = lake.begin_durable(), lake.begin_durable()
    kept.load_table("sales.t1").append(rows(2))
    aborted.load_table("sales.t2").append(rows(2))
    paths = lambda table: {m.path for m in lake.objects.list(f"data/{lake.load_table(table).id}/")}  # noqa: E731
    assert paths("sales.t1") and paths("sales.t2")
    aborted.abort()
    report = lake.gc(grace_s=0)
    assert paths("sales.t2") == set()
    assert paths("sales.t1")  # staged by an active transaction: referenced, kept even with zero grace
    assert all(p.startswith("data/") for p in report.orphan_files)
    kept.commit()
    assert count(lake, "sales.t1") == 2


def test_pending_lock_on_dropped_table_is_dropped(lake: catalog.Lakehouse) -> None:
    dropper, waiter = lake.begin_durable(), lake.begin_durable()
    dropper.drop_table("sales.t3")
    waiting = waiter.lock("sales.t3", "exclusive", waitable=True)
    assert waiting.state == "pending"
    dropper.commit()
    assert waiting.state == "released"
    with pytest.raises(LockConflictError, match="gone while pending"):
        waiting.wait(timeout=5)
    lake.refresh()
    assert not lake.table_exists("sales.t3")


def test_commit_of_expired_transaction_shows_nothing(lake: catalog.Lakehouse) -> None:
    tx = lake.begin_durable(timeout=600)
    tx.load_table("sales.t1").append(rows(3))
    lake.durable.manager.clock = lambda: 10**15  # far in the future: every deadline passed
    with pytest.raises(catalog.errors.DurableTransactionExpiredError):
        tx.commit()
    assert count(lake, "sales.t1") == 0


def test_parent_cannot_write_where_child_locked(lake: catalog.Lakehouse) -> None:
    outer = lake.begin_durable()
    inner = lake.begin_durable(parent=outer)
    inner.load_table("sales.t1").overwrite(rows(1))  # exclusive, held by the child
    with pytest.raises(LockConflictError, match=inner.id):
        outer.load_table("sales.t1").append(rows(1))
    inner.commit()  # the exclusive lock moves up: now the parent may write
    outer.load_table("sales.t1").append(rows(2))
    outer.commit()
    assert count(lake, "sales.t1") == 3


def test_plain_commits_respect_durable_locks(lake: catalog.Lakehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    tx = lake.begin_durable()
    tx.lock("sales.t1", "exclusive")
    with pytest.raises(LockConflictError, match=tx.id):
        lake.load_table("sales.t1").append(rows(1))
    with pytest.raises(LockConflictError):
        with lake.transaction() as plain:
            plain.load_table("sales.t2").append(rows(1))
            plain.load_table("sales.t1").append(rows(1))
    assert (count(lake, "sales.t1"), count(lake, "sales.t2")) == (0, 0)
    assert [p for p in lake.objects.list("data/")] == []  # the refused commits' files are gone
    shared = lake.begin_durable()
    shared.lock("sales.t2", "shared")
    lake.load_table("sales.t2").append(rows(1))  # append is shared: compatible
    with pytest.raises(LockConflictError):
        lake.load_table("sales.t2").overwrite(rows(1))
    tx.commit()
    lake.load_table("sales.t1").append(rows(2))
    assert count(lake, "sales.t1") == 2
    expired = lake.begin_durable(timeout=1)
    expired.lock("sales.t3", "exclusive")
    import catalog.durable.guard as guard

    monkeypatch.setattr(guard, "wall_clock_ms", lambda: 10**15)  # the holder's deadline passed for this writer
    lake.load_table("sales.t3").append(rows(1))
