"""``DurableCatalogTransaction.require_unchanged``: a staged read check (ops.CheckRead) decided at the commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalog
from catalog.errors import NoSuchTableError, RetryableConflictError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
PARTITIONS = ["a", "b", "c"]


def new_lake(path: Path) -> catalog.Lakehouse:
    lake = catalog.open(str(path), background=False)
    lake.create_namespace("s")
    table = lake.create_table("s.t", SCHEMA, partition_by=["p"])
    for n, p in enumerate(PARTITIONS):
        table.append(pa.table({"id": [n], "p": [p]}, schema=SCHEMA))
    lake.create_table("s.out", SCHEMA)
    return lake


def rows(lake: catalog.Lakehouse, name: str) -> list[int]:
    return sorted(lake.load_table(name).scan().to_arrow().column("id").to_pylist())


@settings(max_examples=25, deadline=None)
@given(
    selected=st.lists(st.sampled_from(PARTITIONS), unique=True),
    appended=st.lists(st.sampled_from(PARTITIONS), max_size=3),
    deleted=st.lists(st.sampled_from(PARTITIONS), max_size=2, unique=True),
)
def test_the_commit_conflicts_exactly_when_a_selected_partition_changed(
    tmp_path_factory: pytest.TempPathFactory, selected: list[str], appended: list[str], deleted: list[str]
) -> None:
    lake = new_lake(tmp_path_factory.mktemp("lake"))
    try:
        version = lake.version
        tx = lake.begin_durable(timeout=600)
        scope = pc.field("p").isin(selected) if selected else pc.scalar(False)
        tx.require_unchanged("s.t", version, scope)
        tx.load_table("s.out").append(pa.table({"id": [99], "p": ["x"]}, schema=SCHEMA))
        other = lake.load_table("s.t")
        for n, p in enumerate(appended):
            other.append(pa.table({"id": [10 + n], "p": [p]}, schema=SCHEMA))
        for p in deleted:
            other.delete(pc.field("p") == p)
        changed = set(appended) | set(deleted)
        if changed & set(selected):
            with pytest.raises(RetryableConflictError, match="changed since it was read"):
                tx.commit()
            assert rows(lake, "s.out") == []  # nothing of the transaction applied
        else:
            tx.commit()
            assert rows(lake, "s.out") == [99]
    finally:
        lake.close()


def test_a_replaced_table_conflicts_and_bad_arguments_change_nothing(tmp_path: Path) -> None:
    with new_lake(tmp_path / "lake") as lake:
        version = lake.version
        tx = lake.begin_durable(timeout=600)
        for bad, error in ((True, TypeError), (-1, TypeError), ("3", TypeError)):
            with pytest.raises(error, match="version"):
                tx.require_unchanged("s.t", bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="filter"):
            tx.require_unchanged("s.t", version, "p = 'a'")  # type: ignore[arg-type]
        with pytest.raises(NoSuchTableError):
            tx.require_unchanged("s.nope", version)
        tx.require_unchanged("s.t", version)
        lake.drop_table("s.t")
        lake.create_table("s.t", SCHEMA)
        with pytest.raises(RetryableConflictError, match="dropped or replaced"):
            tx.commit()
        # Staging checks at once, against the transaction's view, too.
        later = lake.begin_durable(timeout=600)
        with pytest.raises(RetryableConflictError):
            later.require_unchanged("s.t", version - 1)


def test_every_operation_kind_has_a_conflict_rule() -> None:
    from catalog import ops
    from catalog.conflicts import classify

    def kinds(cls: type) -> set[str]:
        found = {cls.kind} if getattr(cls, "kind", "") else set()
        for sub in cls.__subclasses__():
            found |= kinds(sub)
        return found

    every = kinds(ops.Op)
    assert "check_read" in every
    for ours in every:
        for theirs in every:
            classify(ours, theirs)  # raises ValueError for a kind the matrix lacks


def test_a_transaction_losing_to_a_commit_with_a_read_check_gets_the_catalog_rule(tmp_path: Path) -> None:
    with new_lake(tmp_path / "lake") as lake:
        version = lake.version
        durable = lake.begin_durable(timeout=600)
        durable.require_unchanged("s.t", version)
        durable.load_table("s.out").append(pa.table({"id": [7], "p": ["x"]}, schema=SCHEMA))
        with pytest.raises(RetryableConflictError):
            with lake.transaction() as tx:
                tx.load_table("s.out").scan().to_arrow()  # read s.out, then write s.t
                durable.commit()  # meanwhile: the check and an append to s.out
                tx.load_table("s.t").append(pa.table({"id": [8], "p": ["a"]}, schema=SCHEMA))
        assert rows(lake, "s.out") == [7]


def test_a_read_check_is_about_others_commits_not_the_transactions_own_writes(tmp_path: Path) -> None:
    with new_lake(tmp_path / "lake") as lake:
        version = lake.version
        tx = lake.begin_durable(timeout=600)
        # The transaction replaces s.t with rows computed from s.t (CREATE OR REPLACE ... AS SELECT FROM itself).
        tx.drop_table("s.t")
        tx.create_table("s.t", SCHEMA).append(pa.table({"id": [100], "p": ["a"]}, schema=SCHEMA))
        tx.require_unchanged("s.t", version)
        tx.load_table("s.out").append(pa.table({"id": [1], "p": ["x"]}, schema=SCHEMA))
        tx.require_unchanged("s.out", version)  # a table it wrote itself
        tx.commit()
        assert rows(lake, "s.t") == [100] and rows(lake, "s.out") == [1]
