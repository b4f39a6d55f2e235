"""How a Spark write commits its files: what an overwrite replaces, and what the query read.

Shared by the two writers of a Spark job, which commit the same way: the
Python source (catalog.spark.source, any storage) and Spark's own Parquet
writer, whose files the control plane commits (catalog.spark.control).

A write query that read lakehouse tables (``INSERT INTO t2 SELECT ... FROM
t1``, ``MERGE ... USING t1``) is serializable: the plugin records each scan
(table, id, version, pushed filters; see ``QueryReads.java``) and the commit
runs in one lakehouse transaction that first checks them
(:func:`reads_checked`). If a table read has, since the version read, gained
or lost a data file that may hold rows the scan selected, the write raises
``RetryableConflictError`` and nothing is committed; the transaction's own
reads of those tables make a commit racing the check conflict too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import catalog
from catalog.datafiles import DataFile, decode_values
from catalog.errors import RetryableConflictError
from catalog.planning import prune
from catalog.schema import field_id
from catalog.spark.conditions import exact_condition, spark_filters
from catalog.spark.filters import pruning_expression


def replaced_rows(table: catalog.Table, files: list[DataFile], condition: object, dynamic: bool) -> pc.Expression | None:
    """What an overwrite writing ``files`` replaces: the condition's rows, the written partitions', or every row (None).

    ``condition`` is the JSON condition of ``overwrite(condition)`` (or None);
    ``dynamic`` a dynamic partition overwrite (all of an unpartitioned table).
    """
    if condition is not None:
        return exact_condition(condition, table.schema)
    if dynamic and table.partition_by:
        return written_partitions(files, table.schema, list(table.partition_by))
    return None


def written_partitions(files: list[DataFile], schema: pa.Schema, partition_by: list[str]) -> pc.Expression:
    """The rows of the partitions ``files`` belong to: an OR over their distinct partition tuples."""
    ids = {name: str(field_id(schema.field(name))) for name in partition_by}
    tuples = {tuple(f.partition.get(ids[name]) for name in partition_by) for f in files}
    result: pc.Expression | None = None
    for values in sorted(tuples, key=repr):
        clause: pc.Expression | None = None
        for name, encoded in zip(partition_by, values):
            value = decode_values([encoded], schema.field(name).type)[0]
            term = pc.field(name) == value if value.is_valid else pc.field(name).is_null()
            clause = term if clause is None else clause & term
        assert clause is not None  # partition_by is not empty
        result = clause if result is None else result | clause
    assert result is not None  # files is not empty
    return result


def files_read_at(lake: catalog.Lakehouse, name: str, table_id: str, version: int) -> list[DataFile]:
    """The table's live files at ``version``: what a write that read the table there read.

    Raises:
        ValueError: ``name`` was not this table (``table_id``) at ``version``, or is malformed.
        SnapshotTooOldError: ``version`` is past retention.
    """
    with lake.at(version=version) as past:
        if not past.table_exists(name) or past.load_table(name).id != table_id:
            raise ValueError(
                f"table {name!r} did not exist as this table at lakehouse version {version}, so its data "
                "cannot have been read there; nothing was committed"
            )
        return past.load_table(name).files()


@contextmanager
def reads_checked(
    lake: catalog.Lakehouse, reads: object, ours: str, target: str, transaction: str | None = None
) -> Iterator[Any]:
    """The session a write into ``target`` commits in: the lakehouse, or, when the query read
    lakehouse tables (``reads``, as the plugin sends them), one transaction that checks them first.

    With ``transaction`` (a durable transaction id), the write is staged in
    it and each read becomes a check its commit makes atomically
    (``require_unchanged``): a staged CREATE TABLE AS SELECT, or a statement
    of a Spark session working in that transaction.

    Raises:
        ValueError: ``reads`` is not a list, a read is malformed or has a malformed
            filter, or (with ``transaction``) names another table than the one its
            name had at its version; or ``transaction`` is not a transaction id.
        RetryableConflictError: without ``transaction``, a table read was dropped or
            replaced, or gained or lost a data file that may hold rows its scan
            selected, since the version read (:func:`check_read`); with it, that
            already happened (``require_unchanged``). Also when the lakehouse
            transaction's commit loses to a concurrent commit.
        IncompatibleConflictError: the lakehouse transaction's commit lost to a
            concurrent commit that makes it meaningless.
        SnapshotTooOldError: a version read is past retention.
        TransactionStateError, DurableTransactionExpiredError: durable transaction
            ``transaction`` does not exist or is no longer active.
        LockConflictError: a durable transaction's lock forbids the lakehouse
            transaction's commit.
        Any exception raised inside the block: the lakehouse transaction then rolls
            back (a durable transaction keeps what was staged).
    """
    if reads is not None and not isinstance(reads, list):
        raise ValueError("reads must be a list of {'name', 'id', 'version', 'filters'}")
    if transaction is not None:
        staged = lake.attach(transaction)
        staged.ping(ancestors=True)  # a statement working in it keeps it alive
        for read in reads or []:
            stage_read_check(lake, staged, read)
        yield staged
        return
    lake.refresh()
    if not reads:
        yield lake
        return
    with lake.transaction() as tx:
        for read in reads:
            check_read(tx, lake, read, ours, target)
        yield tx


def stage_read_check(lake: catalog.Lakehouse, staged: Any, read: object) -> None:
    """Make durable transaction ``staged``'s commit check that the rows one scan selected are unchanged.

    Raises:
        ValueError: ``read`` is malformed or has a malformed filter, or names
            another table than the one its name had at its version.
        SnapshotTooOldError: the version read is past retention.
        RetryableConflictError: those rows already changed (``require_unchanged``).
        TransactionStateError, DurableTransactionExpiredError: ``staged`` is no
            longer active.
    """
    name, version = _name_and_version(read)
    assert isinstance(read, Mapping)
    with lake.at(version=version) as past:
        if not past.table_exists(name) or past.load_table(name).id != read.get("id"):
            raise ValueError(f"a read of table {name!r} at lakehouse version {version} names another table; nothing was committed")
        schema = past.load_table(name).schema
    staged.require_unchanged(name, version, pruning_expression(spark_filters(read.get("filters") or []), schema))


def _name_and_version(read: object) -> tuple[str, int]:
    if not isinstance(read, Mapping) or not isinstance(read.get("version"), int) or not isinstance(read.get("name"), list):
        raise ValueError(f"a read must be {{'name': [...], 'id': str, 'version': int, 'filters': [...]}}, not {read!r}")
    return ".".join(read["name"]), read["version"]


def check_read(tx: Any, lake: catalog.Lakehouse, read: object, ours: str, target: str) -> None:
    """Raise ``RetryableConflictError`` unless the rows one scan selected are as they were when it read them.

    Reads the table through lakehouse transaction ``tx``, so a commit racing
    the check conflicts with ``tx``.

    Raises:
        RetryableConflictError: since the version read, the table was dropped or
            replaced, or gained or lost a data file that may hold rows the scan
            selected (``ours`` is the writing operation, ``object`` the table read).
        ValueError: ``read`` is malformed or has a malformed filter.
        SnapshotTooOldError: the version read is past retention.
    """
    name, version = _name_and_version(read)
    assert isinstance(read, Mapping)
    if not tx.table_exists(name) or tx.load_table(name).id != read.get("id"):
        raise RetryableConflictError(
            f"the query writing {target!r} read table {name!r} at lakehouse version {version}, and that table "
            "was dropped or replaced since; nothing was committed: run the query again",
            ours=ours,
            object=name,
        )
    now = tx.load_table(name)
    if now.format == "iceberg":  # its files are in its own manifests: any commit since (a moved pointer) conflicts
        with lake.at(version=version) as past:
            if past.load_table(name).metadata_location != now.metadata_location:
                raise RetryableConflictError(
                    f"the query writing {target!r} read iceberg table {name!r} at lakehouse version {version}, and "
                    "it got a commit since, so what it wrote may depend on rows it never saw; nothing was "
                    "committed: run the query again",
                    ours=ours,
                    object=name,
                )
        return
    before = files_read_at(lake, name, now.id, version)
    live = now.files()  # read inside the transaction: a commit racing this check conflicts with it
    before_ids, live_ids = {f.id for f in before}, {f.id for f in live}
    changed = [f for f in live if f.id not in before_ids] + [f for f in before if f.id not in live_ids]
    scope = pruning_expression(spark_filters(read.get("filters") or []), now.schema)
    relevant = prune(changed, now.schema, scope)
    if relevant:
        raise RetryableConflictError(
            f"the query writing {target!r} read table {name!r} at lakehouse version {version}; since then "
            f"{len(relevant)} data file(s) that may hold rows it selected were committed or removed, so what it "
            "wrote may depend on rows it never saw; nothing was committed: run the query again",
            ours=ours,
            object=name,
        )
