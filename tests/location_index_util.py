"""Shared by the location-index tests (catalog and service): a lakehouse made to look older than the index."""

from __future__ import annotations

from typing import Any

import catalog
from catalog import keys


def forget_index(lake: catalog.Lakehouse) -> None:
    """Make ``lake`` look like one made before the index: no entries, no marker."""

    def forget(txn: Any) -> None:
        for key, _ in list(txn.scan(prefix=keys.TABLE_LOCATIONS)):
            txn.delete(key)
        txn.delete(keys.TABLE_LOCATIONS_COMPLETE)
        txn.commit()

    lake.store.run(forget)
    lake.refresh()
