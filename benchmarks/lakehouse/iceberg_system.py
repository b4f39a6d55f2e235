"""pyiceberg 0.12's ``SqlCatalog`` on SQLite, with a local ``file://`` warehouse.

pyiceberg retries a commit that loses the compare-and-set on the catalog row
itself (4 retries with exponential back-off, its defaults), then raises
``CommitFailedException``; the caller reloads the table and tries again (the
writer loop in ``lakehouse.writers`` does). Its own retries are counted from
the warning it logs for each.

Fairest equivalents chosen here:

- **append**: ``Table.append(arrow table)``, one snapshot per call.
- **add_files**: the Parquet files are written with pyarrow, then one
  ``Table.add_files`` registers them in one snapshot (it reads each footer for
  statistics; duplicate-file checking stays at its default, on).
- **plan**: ``load_table(name).scan(row_filter, snapshot_id).plan_files()``,
  which prunes manifests and data files by min/max metrics without reading data.
- **create_tables**: ``create_table`` costs one metadata write, one SQLite
  commit and one reload per table (~60 ms here, over 10 minutes for 10,000
  tables), so only the first :data:`CREATED_WITH_API` tables go through it
  (their rate is reported); the rest take the same steps without the per-table
  commit and reload: a real metadata file per table from pyiceberg's own
  ``new_table_metadata``, then the catalog rows inserted ``per_commit`` at a
  time through pyiceberg's own ORM model. Every table stays loadable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from sqlalchemy import insert
from sqlalchemy.orm import Session

from lakehouse.data import SCHEMA, split
from lakehouse.system import IdRange, System

CREATED_WITH_API = 100
# pyiceberg retries a failed append commit itself (4 times by default) and says
# so only in this warning, from the logger "pyiceberg.table".
RETRY_WARNING = "Commit failed due to a concurrent update"


class _RetryCounter(logging.Handler):
    """Counts pyiceberg's own commit retries (and keeps their warnings off stderr)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith(RETRY_WARNING):
            self.retries += 1


class IcebergSystem(System):
    key = "pyiceberg"
    label = "pyiceberg SqlCatalog"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._catalog: SqlCatalog | None = None
        self._tables: dict[str, Table] = {}
        self._create_table_ms: float | None = None
        self._retry_counter = _RetryCounter()

    @property
    def catalog(self) -> SqlCatalog:
        if self._catalog is None:
            raise RuntimeError("IcebergSystem is not open")
        return self._catalog

    def open(self) -> None:
        (self.root / "warehouse").mkdir(parents=True, exist_ok=True)
        self._catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{self.root / 'catalog.db'}", warehouse=f"file://{self.root / 'warehouse'}"
        )
        logging.getLogger("pyiceberg.table").addHandler(self._retry_counter)

    def close(self) -> None:
        logging.getLogger("pyiceberg.table").removeHandler(self._retry_counter)
        if self._catalog is not None:
            self._catalog.engine.dispose()
            self._catalog = None
            self._tables.clear()

    def create_namespace(self, namespace: str) -> None:
        self.catalog.create_namespace(namespace)

    def create_table(self, name: str) -> None:
        self._tables[name] = self.catalog.create_table(name, schema=SCHEMA)

    def _table(self, name: str) -> Table:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self.catalog.load_table(name)
        return table

    def append(self, name: str, rows: pa.Table) -> None:
        try:
            self._table(name).append(rows)
        except BaseException:
            self._tables.pop(name, None)  # the retry reloads the latest metadata
            raise

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(error, CommitFailedException)

    def row_count(self, name: str) -> int:
        return self.catalog.load_table(name).scan().to_arrow().num_rows

    def add_files(self, name: str, contents: Sequence[pa.Table], batch: int) -> int:
        _, table_name = split(name)
        folder = self.root / "added" / table_name / f"batch{batch:05d}"
        folder.mkdir(parents=True)
        paths = []
        for index, rows in enumerate(contents):
            path = folder / f"part{index:06d}.parquet"
            pq.write_table(rows, path)
            paths.append(f"file://{path}")
        table = self._table(name)
        table.add_files(paths)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    def plan(self, name: str, id_range: IdRange, version: int | None) -> int:
        row_filter: BooleanExpression = AlwaysTrue()
        if id_range is not None:
            row_filter = And(GreaterThanOrEqual("id", id_range[0]), LessThanOrEqual("id", id_range[1]))
        scan = self.catalog.load_table(name).scan(row_filter=row_filter, snapshot_id=version)
        return len(list(scan.plan_files()))

    def create_tables(self, names: Sequence[str], per_commit: int) -> None:
        api, bulk = names[:CREATED_WITH_API], names[CREATED_WITH_API:]
        start = time.perf_counter()
        for name in api:
            self.catalog.create_table(name, schema=SCHEMA)
        self._create_table_ms = (time.perf_counter() - start) * 1000 / max(1, len(api))
        for first in range(0, len(bulk), per_commit):
            self._bulk_create(bulk[first:first + per_commit])

    def _bulk_create(self, names: Sequence[str]) -> None:
        catalog = self.catalog
        schema = catalog._convert_schema_if_needed(SCHEMA)  # what create_table does first
        rows = []
        # The default location is "<namespace location>/<table>"; resolving it
        # costs two SQLite queries, so it is resolved once per namespace here.
        parents: dict[str, str] = {}
        for name in names:
            namespace, table_name = split(name)
            if namespace not in parents:
                parents[namespace] = catalog._resolve_table_location(None, namespace, table_name).rsplit("/", 1)[0]
            location = f"{parents[namespace]}/{table_name}"
            metadata_location = load_location_provider(location, {}).new_table_metadata_file_location()
            metadata = new_table_metadata(
                schema=schema, partition_spec=UNPARTITIONED_PARTITION_SPEC, sort_order=UNSORTED_SORT_ORDER, location=location
            )
            catalog._write_metadata(metadata, load_file_io(catalog.properties, metadata_location), metadata_location)
            rows.append(catalog._create_table_row(namespace, table_name, metadata_location))
        with Session(catalog.engine) as session:
            session.execute(insert(IcebergTables), rows)
            session.commit()

    def list_tables(self, namespace: str) -> int:
        return len(self.catalog.list_tables(namespace))

    def internal_retries(self) -> int | None:
        return self._retry_counter.retries

    def notes(self) -> dict[str, str]:
        notes = {
            "plan": "load_table + scan(row_filter, snapshot_id).plan_files()",
            "add_files": "pyarrow writes the Parquet files; one Table.add_files per commit",
        }
        if self._create_table_ms is not None:
            notes["create_tables"] = (
                f"create_table: {self._create_table_ms:.1f} ms per table over the first {CREATED_WITH_API}; "
                "the rest: pyiceberg's own metadata writer + one catalog-row insert per commit"
            )
        return notes
