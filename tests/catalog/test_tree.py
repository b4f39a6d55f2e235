"""catalog/tree.py: ``LakeTree`` over each kind of host, and ``TreeMethods``.

The tree's methods are written once; what a call does depends only on the
host the tree reads and writes through:

* the live lakehouse (``lake``, ``lake.tree``): a write commits at once and
  returns the new version;
* ``lake.transaction()`` and a durable transaction: a write returns None, is
  seen inside at once and outside only after the commit;
* ``lake.at(version)``: every write raises ``ReadOnlyError``, reads show the
  old state.

A small host written here, over the live host, shows the ``TableHost``
protocol is all a tree needs.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa
import pytest

import catalog
from catalog import ReadOnlyError, Table
from catalog.access import CatalogReader
from catalog.durable.session import DurableCatalogTransaction
from catalog.lakehouse import Lakehouse, LakeTransaction
from catalog.ops import Op
from catalog.table import TableHost
from catalog.timetravel import PastLakehouse
from catalog.transactions import commit_ops
from catalog.tree import LakeTree, TreeMethods, View, tree_method

INTS = pa.schema([("x", pa.int64())])
SESSIONS = (Lakehouse, LakeTransaction, PastLakehouse, DurableCatalogTransaction)


def public_tree_methods() -> set[str]:
    return {name for name, _ in inspect.getmembers(LakeTree, inspect.isfunction) if not name.startswith("_")}


def build(lake: catalog.Lakehouse) -> None:
    """The state every test starts from."""
    lake.create_namespace("db", properties={"k": "1"})
    lake.create_namespace("db.sub")
    lake.create_table("db.t", INTS, properties={"p": "q"})
    lake.create_table("db.ice", format="iceberg", location="s3://b/ice", metadata_location="s3://b/ice/m1")
    lake.create_view("db.v", "select 1", properties={"owner": "ana"})


# Each write method: (call, probe). The probe reads what the write changes.
WRITES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "create_namespace": (lambda s: s.create_namespace("new", properties={"a": "b"}), lambda s: s.namespace_exists("new")),
    "update_namespace_properties": (
        lambda s: s.update_namespace_properties("db", updates={"k": "2"}, removals=["gone"]),
        lambda s: s.namespace_properties("db"),
    ),
    "drop_namespace": (lambda s: s.drop_namespace("db.sub"), lambda s: s.list_namespaces("db")),
    "create_table": (lambda s: s.create_table("db.t2", INTS), lambda s: s.list_tables("db")),
    "rename_table": (lambda s: s.rename_table("db.t", "db.t3"), lambda s: s.list_tables("db")),
    "drop_table": (lambda s: s.drop_table("db.t"), lambda s: s.table_exists("db.t")),
    "commit_metadata_location": (
        lambda s: s.commit_metadata_location("db.ice", "s3://b/ice/m2", "s3://b/ice/m1"),
        lambda s: s.load_table("db.ice").metadata_location,
    ),
    "create_view": (lambda s: s.create_view("db.v2", "select 2"), lambda s: s.list_views("db")),
    "replace_view": (lambda s: s.replace_view("db.v", sql="select 3"), lambda s: s.load_view("db.v").sql),
    "drop_view": (lambda s: s.drop_view("db.v"), lambda s: s.view_exists("db.v")),
}

# Each read method: (call, what it returns on the state ``build`` makes).
READS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "list_namespaces": (lambda s: (s.list_namespaces(), s.list_namespaces("db", recursive=True)), (["db"], ["db.sub"])),
    "namespace_exists": (lambda s: (s.namespace_exists("db.sub"), s.namespace_exists("nope")), (True, False)),
    "namespace_properties": (lambda s: s.namespace_properties("db"), {"k": "1"}),
    "load_table": (lambda s: (s.load_table("db.t").name, s.load_table("db.t").properties), ("db.t", {"p": "q"})),
    "table_exists": (lambda s: (s.table_exists("db.t"), s.table_exists("db.v"), s.table_exists("db.x")), (True, False, False)),
    "list_tables": (lambda s: s.list_tables("db"), ["db.ice", "db.t"]),
    "load_view": (lambda s: (s.load_view("db.v").sql, s.load_view("db.v").properties), ("select 1", {"owner": "ana"})),
    "view_exists": (lambda s: (s.view_exists("db.v"), s.view_exists("db.t")), (True, False)),
    "list_views": (lambda s: s.list_views("db"), ["db.v"]),
}


def test_every_public_tree_method_is_classified_here() -> None:
    """A new tree method must be added to WRITES or READS, so every host is tested with it."""
    assert set(WRITES) | set(READS) == public_tree_methods()
    assert not set(WRITES) & set(READS)


@pytest.fixture
def built(lake: catalog.Lakehouse) -> catalog.Lakehouse:
    build(lake)
    return lake


def version_of(result: Any) -> Any:
    """What a write returned, as a version: a created table stands for none, a property update's dict carries it."""
    if isinstance(result, Table):
        return "table"
    if isinstance(result, dict):
        return result["version"]
    return result


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("host", ["lake", "tree"])
def test_a_live_write_commits_at_once_and_returns_its_version(built: catalog.Lakehouse, host: str, write: str) -> None:
    call, probe = WRITES[write]
    session = built if host == "lake" else built.tree
    before_version, before = built.version, probe(built)
    result = call(session)
    assert built.version == before_version + 1
    assert version_of(result) == ("table" if write == "create_table" else built.version)
    assert probe(built) != before
    assert probe(session) == probe(built)
    [summary] = built.history(limit=1)[0].operations
    assert summary["kind"] == ("commit_metadata" if write == "commit_metadata_location" else write)


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_transaction_write_returns_none_and_shows_outside_only_after_commit(built: catalog.Lakehouse, write: str) -> None:
    call, probe = WRITES[write]
    before_version, before = built.version, probe(built)
    with built.transaction() as tx:
        result = call(tx)
        assert version_of(result) == ("table" if write == "create_table" else None)
        assert probe(tx) != before
        assert probe(tx.tree) == probe(tx)
        assert (built.version, probe(built)) == (before_version, before)
        after = probe(tx)
    assert built.version == before_version + 1 == tx.version
    assert probe(built) == after


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_durable_write_is_staged_and_shows_outside_only_after_commit(built: catalog.Lakehouse, write: str) -> None:
    call, probe = WRITES[write]
    before = probe(built)
    history = built.history(limit=None)
    d = built.durable.begin()
    result = call(d)
    assert version_of(result) == ("table" if write == "create_table" else None)
    after = probe(d)
    assert after != before
    assert probe(built) == before and built.history(limit=None) == history
    version = d.commit()
    assert version == built.version
    assert probe(built) == after
    assert [entry.version for entry in built.history(limit=None)] == [version] + [e.version for e in history]


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_past_version_refuses_every_write_and_keeps_its_state(built: catalog.Lakehouse, write: str) -> None:
    call, probe = WRITES[write]
    before_version, before = built.version, probe(built)
    with built.at(version=before_version) as past:
        assert past.version == before_version
        with pytest.raises(ReadOnlyError, match=f"version {before_version} is read-only"):
            call(past)
        with pytest.raises(ReadOnlyError):
            call(past.tree)
        assert (built.version, probe(built), probe(past)) == (before_version, before, before)
        call(built)  # the same write on the live lakehouse
        assert probe(built) != before
        assert probe(past) == before


@contextlib.contextmanager
def session_of(lake: catalog.Lakehouse, host: str) -> Iterator[Any]:
    if host == "lake":
        yield lake
    elif host == "tree":
        yield lake.tree
    elif host == "transaction":
        with lake.transaction() as tx:
            yield tx
    elif host == "durable":
        d = lake.durable.begin()
        try:
            yield d
        finally:
            d.abort()
    else:
        with lake.at(version=lake.version) as past:
            # change everything the reads look at: the past version still shows the old state
            lake.drop_view("db.v")
            lake.drop_table("db.t")
            lake.drop_namespace("db.sub")
            lake.update_namespace_properties("db", {"k": "changed"})
            lake.create_namespace("later")
            yield past


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("host", ["lake", "tree", "transaction", "durable", "past"])
def test_reads_show_the_host_view(built: catalog.Lakehouse, host: str, read: str) -> None:
    call, expected = READS[read]
    with session_of(built, host) as session:
        assert call(session) == expected


def test_reads_inside_a_transaction_see_its_own_writes(built: catalog.Lakehouse) -> None:
    with built.transaction() as tx:
        tx.create_namespace("db.more")
        tx.create_table("db.more.t", INTS)
        tx.create_view("db.more.v", "select 9")
        assert tx.list_namespaces("db") == ["db.more", "db.sub"]
        assert tx.list_tables("db.more") == ["db.more.t"]
        assert tx.load_view("db.more.v").sql == "select 9"
        assert not built.namespace_exists("db.more")
    assert built.list_tables("db.more") == ["db.more.t"]


def test_a_table_created_in_a_transaction_takes_writes_inside_it(built: catalog.Lakehouse) -> None:
    with built.transaction() as tx:
        t = tx.create_table("db.fresh", INTS)
        assert t.append(pa.table({"x": pa.array([1, 2], pa.int64())})) is None
        assert t.scan().count() == 2
    assert built.load_table("db.fresh").scan().count() == 2


def test_load_view_returns_a_view(built: catalog.Lakehouse) -> None:
    view = built.load_view("db.v")
    assert isinstance(view, View)
    assert (view.name, view.sql, view.dialect, view.properties) == ("db.v", "select 1", "spark", {"owner": "ana"})
    assert repr(view) == "View('db.v', dialect='spark')"


# -- TreeMethods ---------------------------------------------------------------------------


def test_tree_methods_lists_every_public_tree_method() -> None:
    forwarded = {name for name, value in vars(TreeMethods).items() if isinstance(value, tree_method)}
    assert forwarded == public_tree_methods()


@pytest.mark.parametrize("session", SESSIONS, ids=lambda c: c.__name__)
def test_every_session_offers_every_tree_method_as_the_tree_s_own(session: type) -> None:
    assert issubclass(session, TreeMethods)
    for name in sorted(public_tree_methods()):
        assert getattr(session, name) is getattr(LakeTree, name), f"{session.__name__}.{name} is not LakeTree.{name}"


def test_a_session_s_method_is_its_tree_s_method(built: catalog.Lakehouse) -> None:
    bound = built.create_namespace
    assert inspect.signature(bound) == inspect.signature(built.tree.create_namespace)
    bound("via.lake", parents=True)
    assert built.tree.namespace_exists("via.lake")
    with pytest.raises(TypeError):
        built.create_namespace(42)  # type: ignore[arg-type]  # the tree's argument checks


def test_a_session_s_method_keeps_the_tree_s_docstring_and_name(built: catalog.Lakehouse) -> None:
    assert built.create_table.__doc__ == LakeTree.create_table.__doc__
    assert built.create_table.__name__ == "create_table"


def test_no_session_inherits_from_another() -> None:
    for a in SESSIONS:
        for b in SESSIONS:
            if a is not b:
                assert not issubclass(a, b), f"{a.__name__} is a subclass of {b.__name__}"


# -- a host written here -------------------------------------------------------------------


class RecordingHost:
    """A TableHost over another one: records each op it is given; ``batch`` keeps them instead of committing."""

    def __init__(self, inner: TableHost, batch: bool = False) -> None:
        self.inner = inner
        self.objects = inner.objects
        self.target_file_bytes = inner.target_file_bytes
        self.batch = batch
        self.writable = True
        self.submitted: list[Op] = []

    def reading(self) -> AbstractContextManager[CatalogReader]:
        return self.inner.reading()

    def resolving(self) -> AbstractContextManager[CatalogReader]:
        return self.inner.resolving()

    def submit(self, op: Op) -> int | None:
        self.submitted.append(op)
        return None if self.batch else self.inner.submit(op)

    def check_writable(self) -> None:
        if not self.writable:
            raise ReadOnlyError("this host is frozen by the test")


def test_a_host_written_here_carries_a_tree_and_its_tables(lake: catalog.Lakehouse) -> None:
    host = RecordingHost(lake.tree.host)
    tree = LakeTree(host)
    assert tree.create_namespace("a") == lake.version
    table = tree.create_table("a.t", INTS)
    assert table.append(pa.table({"x": pa.array([1, 2], pa.int64())})) == lake.version
    assert tree.load_table("a.t").scan().count() == 2
    assert [(op.kind, op.object_name) for op in host.submitted] == [
        ("create_namespace", "a"), ("create_table", "a.t"), ("append", "a.t")
    ]
    assert lake.load_table("a.t").scan().count() == 2

    host.writable = False
    version = lake.version
    with pytest.raises(ReadOnlyError, match="frozen by the test"):
        tree.drop_table("a.t")
    with pytest.raises(ReadOnlyError, match="frozen by the test"):
        tree.load_table("a.t").append(pa.table({"x": pa.array([3], pa.int64())}))
    assert len(host.submitted) == 3 and lake.version == version
    assert tree.list_tables("a") == ["a.t"]  # reads still work


def test_a_host_written_here_decides_when_its_ops_commit(lake: catalog.Lakehouse) -> None:
    host = RecordingHost(lake.tree.host, batch=True)
    tree = LakeTree(host)
    version = lake.version
    assert tree.create_namespace("x") is None
    assert tree.create_namespace("y", properties={"k": "v"}) is None
    assert lake.version == version and not lake.namespace_exists("x")
    outcome = commit_ops(lake.context, host.submitted)  # one version for both
    assert outcome.version == version + 1 == lake.version
    assert lake.list_namespaces() == ["x", "y"]
    assert lake.namespace_properties("y") == {"k": "v"}
