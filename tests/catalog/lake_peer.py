"""The "other writer" of a catalog race, run in this process or in another one.

A conflict test makes the race deterministic with a *stale handle*: the test's
own handle (``poll_interval_s=0``) never looks for other writers' versions
until it commits, so an operation it starts after the peer committed still
begins on the old version and meets the peer's commit only at validation —
exactly the lost race, every time. The peer opens its own handle by URL, runs
one named step (a module-level function below, so a spawned process can run
it too) and closes it; :class:`LocalPeer` and :class:`RemotePeer` run the same
steps, which is what makes every conflict test a two-process test as well.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

import catalog

# No follower, no background maintenance and serializable (handle-view)
# reads: a handle sees other writers' versions only when it commits or
# refreshes, which is what keeps races exact (with the default linearizable
# reads, a peer's commit would be seen at the next read instead of raced).
QUIET: dict[str, Any] = {"poll_interval_s": 0, "background_maintenance": False, "read_consistency": "serializable"}
# Local-directory lakehouses in these tests skip fsync: they model process
# races and crashes (FaultyStore), not power loss, and fsync is 10x the cost.
LOCAL = dict(QUIET, fsync=False)

SCHEMA = pa.schema([("id", pa.int64()), ("tag", pa.string())])


def rows(ids: range | list[int], tag: str = "x") -> pa.Table:
    """A batch with the given ids (``tag`` marks which writer wrote it)."""
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "tag": pa.array([tag] * len(ids), pa.string())})


def open_lake(url: str) -> catalog.Lakehouse:
    """A quiet handle on the local-directory lakehouse at ``url``."""
    return catalog.open(url, **LOCAL)


# -- steps a peer can run (each returns the version it committed) -------------------


def append(lake: catalog.Lakehouse, table: str, ids: list[int], tag: str = "peer") -> int:
    return lake.load_table(table).append(rows(ids, tag))


def overwrite(lake: catalog.Lakehouse, table: str, ids: list[int], tag: str = "peer", where: pc.Expression | None = None) -> int:
    return lake.load_table(table).overwrite(rows(ids, tag), filter=where)


def delete(lake: catalog.Lakehouse, table: str, where: pc.Expression) -> int:
    return lake.load_table(table).delete(where)


def compact(lake: catalog.Lakehouse, table: str) -> int:
    report = lake.compact_table(table, target_file_bytes=1 << 20)
    assert report.version is not None, "the peer's compaction found nothing to compact"
    return report.version


def drop_table(lake: catalog.Lakehouse, table: str) -> int:
    return lake.drop_table(table)


def replace_table(lake: catalog.Lakehouse, table: str) -> int:
    """Drop the table and create one of the same name with another schema, in one commit."""
    with lake.transaction() as tx:
        tx.drop_table(table)
        tx.create_table(table, pa.schema([("id", pa.string())]))
    assert tx.version is not None
    return tx.version


def create_table(lake: catalog.Lakehouse, table: str) -> int:
    lake.create_table(table, SCHEMA)
    return lake.version


def drop_namespace(lake: catalog.Lakehouse, namespace: str) -> int:
    return lake.drop_namespace(namespace, cascade=True)


def rename_table(lake: catalog.Lakehouse, old: str, new: str) -> int:
    return lake.rename_table(old, new)


def set_properties(lake: catalog.Lakehouse, table: str, updates: dict[str, str]) -> int:
    return lake.load_table(table).update_properties(updates=updates)


def add_column(lake: catalog.Lakehouse, table: str, column: str) -> int:
    return lake.load_table(table).update_schema().add_column(column, pa.float64()).commit()


def rename_column(lake: catalog.Lakehouse, table: str, old: str, new: str) -> int:
    return lake.load_table(table).update_schema().rename_column(old, new).commit()


STEPS: dict[str, Callable[..., int]] = {
    fn.__name__: fn
    for fn in (
        append,
        overwrite,
        delete,
        compact,
        drop_table,
        replace_table,
        create_table,
        drop_namespace,
        rename_table,
        set_properties,
        add_column,
        rename_column,
    )
}


def run_step(url: str, step: str, kwargs: dict[str, Any]) -> int:
    """Open a handle on ``url``, run ``step`` and close the handle."""
    with open_lake(url) as lake:
        return STEPS[step](lake, **kwargs)


class PeerError(AssertionError):
    """The peer's step failed (its traceback is the message): the scenario is broken."""


class LocalPeer:
    """Runs steps through a second handle in this process."""

    where = "same process"

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, step: str, **kwargs: Any) -> int:
        return run_step(self.url, step, kwargs)


def _serve(conn: Connection) -> None:
    """The remote peer's loop: ``(url, step, kwargs)`` in, ``("ok", version)`` or ``("error", traceback)`` out."""
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        url, step, kwargs = request
        try:
            conn.send(("ok", run_step(url, step, kwargs)))
        except Exception:  # noqa: BLE001 - reported to the test, which fails on it
            conn.send(("error", traceback.format_exc()))


class RemoteProcess:
    """One spawned process serving steps for the whole test session."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()

    def call(self, url: str, step: str, kwargs: dict[str, Any]) -> int:
        self._conn.send((url, step, kwargs))
        if not self._conn.poll(120):
            raise PeerError(f"the peer process did not answer step {step!r} within 120 s")
        status, value = self._conn.recv()
        if status != "ok":
            raise PeerError(f"peer step {step!r} failed in the other process:\n{value}")
        return value

    def close(self) -> None:
        # A process that already died cannot take the request; join reaps it either way.
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


class RemotePeer:
    """Runs steps in another process (see :class:`RemoteProcess`)."""

    where = "two processes"

    def __init__(self, url: str, process: RemoteProcess) -> None:
        self.url = url
        self._process = process

    def __call__(self, step: str, **kwargs: Any) -> int:
        return self._process.call(self.url, step, kwargs)
