"""What each catalog under test implements, and how to build one by key.

A :class:`System` owns one directory and wraps one catalog. A handle is opened
per process (the concurrent writers each open their own), so every method
here is what one client of that catalog would call. Every method does the
same logical work on every system; where a system has no exact equivalent,
its module says what it does instead and why that is the fairest match.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

# key -> "module:class", imported on demand so a missing peer costs only its own figures.
SYSTEMS: dict[str, str] = {
    "lakekv": "lakehouse.lakekv_system:LakekvSystem",
    "ducklake": "lakehouse.ducklake_system:DuckLakeSystem",
    "pyiceberg": "lakehouse.iceberg_system:IcebergSystem",
}
PEERS = ("ducklake", "pyiceberg")

# An inclusive range on the ``id`` column; None means no filter.
IdRange = tuple[int, int] | None


class System(ABC):
    key: ClassVar[str]
    label: ClassVar[str]

    def __init__(self, root: Path) -> None:
        self.root = root

    @abstractmethod
    def open(self) -> None:
        """Open a handle in this process, creating the catalog if absent."""

    @abstractmethod
    def close(self) -> None:
        """Release the handle (idempotent)."""

    @abstractmethod
    def create_namespace(self, namespace: str) -> None: ...

    @abstractmethod
    def create_table(self, name: str) -> None:
        """Create ``name`` with :data:`lakehouse.data.SCHEMA`, unpartitioned."""

    @abstractmethod
    def append(self, name: str, rows: pa.Table) -> None:
        """Append ``rows`` as one commit. On failure the handle drops whatever
        table state it cached, so the caller's retry starts from the latest
        version."""

    @abstractmethod
    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is this catalog's commit-conflict error (as opposed
        to any other failure, such as a locked metadata database)."""

    @abstractmethod
    def row_count(self, name: str) -> int:
        """Rows in the latest version of ``name`` (reads the data)."""

    @abstractmethod
    def add_files(self, name: str, contents: Sequence[pa.Table], batch: int) -> int:
        """Write one data file per table in ``contents`` and add them all to
        ``name`` in one commit, by the cheapest path the catalog offers.
        ``batch`` numbers the call (for file names). Returns the version id
        that time travel takes (lakekv version, Iceberg snapshot id, DuckLake
        snapshot id) right after the commit."""

    @abstractmethod
    def plan(self, name: str, id_range: IdRange, version: int | None) -> int:
        """List the data files a scan of ``name`` (at ``version``, or the
        latest) filtered to ``id_range`` would read, without reading data;
        returns how many. Includes looking the table up, as a query would."""

    @abstractmethod
    def create_tables(self, names: Sequence[str], per_commit: int) -> None:
        """Create every table in ``names`` by the cheapest path the catalog offers."""

    @abstractmethod
    def list_tables(self, namespace: str) -> int:
        """List the tables of ``namespace``; returns how many."""

    def internal_retries(self) -> int | None:
        """Commit retries the catalog made by itself since this handle opened,
        where the catalog makes them observable; None where it does not."""
        return None

    def notes(self) -> dict[str, str]:
        """What this system does differently from the plain reading of a
        workload (shown in the report)."""
        return {}


def make_system(key: str, root: Path) -> System:
    """Build the system registered under ``key`` (imports its module)."""
    try:
        target = SYSTEMS[key]
    except KeyError:
        raise ValueError(f"unknown system {key!r}; known: {', '.join(SYSTEMS)}") from None
    module_name, _, class_name = target.partition(":")
    system_class = getattr(importlib.import_module(module_name), class_name)
    return system_class(root)
