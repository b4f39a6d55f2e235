"""lakekv's ``catalog`` on a local directory (the same filesystem as the peers),
with default options.

- **append**: ``Table.append(arrow table)``, one lakehouse version per call;
  concurrent appends to one table are rebased by the catalog, so a conflict
  that reaches the caller here would be a bug.
- **add_files**: ``Table.write_files`` per file (writes the Parquet file and
  its statistics, no commit), then one ``Table.commit_files`` for the batch.
- **plan**: ``load_table(name).files(filter)`` (what ``scan(filter).files()``
  returns: the live files after partition and min/max pruning, without
  reading data); at a version, through ``lake.at(version=N)``.
- **own retries**: the catalog rebases a lost append by itself and does not
  count it anywhere public, so :func:`_count_rebases` wraps
  ``catalog.transactions.begin`` in this process and counts the fresh transactions
  it starts (one per rebase). It changes nothing about what runs.
- **create_tables**: ``create_table`` inside ``lake.transaction()``,
  ``per_commit`` tables per transaction (a 10,000-table transaction commits).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import catalog
import catalog.transactions as catalog_commit
import kvstore
from lakehouse.data import SCHEMA
from lakehouse.system import IdRange, System


_rebases = 0


def _count_rebases() -> bool:
    """Wrap ``catalog.transactions.begin`` once so each rebase is counted; False if
    the catalog has no such hook (then rebases are reported as unknown)."""
    begin = getattr(catalog_commit, "begin", None)
    if begin is None:
        return False
    if getattr(begin, "_bench_counting", False):
        return True

    def counting_begin(*args: Any, **kwargs: Any) -> Any:
        global _rebases
        if kwargs.get("fresh"):
            _rebases += 1
        return begin(*args, **kwargs)

    counting_begin._bench_counting = True  # type: ignore[attr-defined]
    catalog_commit.begin = counting_begin
    return True


class LakekvSystem(System):
    key = "lakekv"
    label = "lakekv"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._lake: catalog.Lakehouse | None = None
        self._tables: dict[str, catalog.Table] = {}
        self._counting = _count_rebases()

    @property
    def lake(self) -> catalog.Lakehouse:
        if self._lake is None:
            raise RuntimeError("LakekvSystem is not open")
        return self._lake

    def open(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._lake = catalog.open(str(self.root / "lake"))

    def close(self) -> None:
        if self._lake is not None:
            self._lake.close()
            self._lake = None
            self._tables.clear()

    def create_namespace(self, namespace: str) -> None:
        self.lake.create_namespace(namespace)

    def create_table(self, name: str) -> None:
        self._tables[name] = self.lake.create_table(name, SCHEMA)

    def _table(self, name: str) -> catalog.Table:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self.lake.load_table(name)
        return table

    def append(self, name: str, rows: pa.Table) -> None:
        try:
            self._table(name).append(rows)
        except BaseException:
            self._tables.pop(name, None)
            raise

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(error, kvstore.ConflictError)

    def row_count(self, name: str) -> int:
        self.lake.refresh()
        return self.lake.load_table(name).scan().to_arrow().num_rows

    def add_files(self, name: str, contents: Sequence[pa.Table], batch: int) -> int:
        table = self._table(name)
        files = [datafile for rows in contents for datafile in table.write_files(rows)]
        return table.commit_files(files)

    def plan(self, name: str, id_range: IdRange, version: int | None) -> int:
        row_filter = None
        if id_range is not None:
            row_filter = (pc.field("id") >= id_range[0]) & (pc.field("id") <= id_range[1])
        if version is None:
            return len(self.lake.load_table(name).files(row_filter))
        with self.lake.at(version=version) as past:
            return len(past.load_table(name).files(row_filter))

    def create_tables(self, names: Sequence[str], per_commit: int) -> None:
        for first in range(0, len(names), per_commit):
            with self.lake.transaction() as tx:
                for name in names[first:first + per_commit]:
                    tx.create_table(name, SCHEMA)

    def list_tables(self, namespace: str) -> int:
        return len(self.lake.list_tables(namespace))

    def internal_retries(self) -> int | None:
        return _rebases if self._counting else None

    def notes(self) -> dict[str, str]:
        return {
            "plan": "load_table(name).files(filter) (= scan(filter).files()); lake.at(version=N) for the old version",
            "add_files": "Table.write_files per file, one Table.commit_files per commit",
            "create_tables": "create_table in lake.transaction(), per_commit tables per transaction",
        }
