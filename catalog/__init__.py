"""lakekv's lakehouse catalog: namespaces, tables and views in one lakekv store.

>>> import catalog
>>> lake = catalog.open("memory://catalog-init-doctest", poll_interval_s=0)
>>> _ = lake.create_namespace("sales.eu", parents=True)
>>> lake.list_namespaces("sales")
['sales.eu']
>>> lake.close()
"""

from catalog import errors
from catalog.datafiles import DataFile
from catalog.errors import (
    CatalogError,
    IncompatibleConflictError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    ReadOnlyError,
    RetryableConflictError,
    SchemaMismatchError,
    StaleDataFileError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from catalog.lakehouse import HistoryEntry, Lakehouse, LakeTransaction, PastLakehouse, open
from catalog.tree import View
from catalog.table import Scan, Table

__all__ = [
    "open",
    "Lakehouse",
    "LakeTransaction",
    "PastLakehouse",
    "HistoryEntry",
    "Table",
    "Scan",
    "View",
    "DataFile",
    "errors",
    "CatalogError",
    "NoSuchNamespaceError",
    "NoSuchTableError",
    "NoSuchViewError",
    "NamespaceAlreadyExistsError",
    "TableAlreadyExistsError",
    "ViewAlreadyExistsError",
    "NamespaceNotEmptyError",
    "SchemaMismatchError",
    "StaleDataFileError",
    "ReadOnlyError",
    "RetryableConflictError",
    "IncompatibleConflictError",
]
