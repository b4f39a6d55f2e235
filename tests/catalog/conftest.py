"""Fixtures for the catalog tests: fresh lakehouses on memory and on a local directory."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import catalog

_names = itertools.count()

@pytest.fixture
def lake() -> Iterator[catalog.Lakehouse]:
    """A lakehouse on a fresh named memory store, no follower thread."""
    lh = catalog.open(f"memory://catalog-test-{next(_names)}", poll_interval_s=0)
    try:
        yield lh
    finally:
        lh.close()


@pytest.fixture
def local_lake(tmp_path: Path) -> Iterator[catalog.Lakehouse]:
    lh = catalog.open(str(tmp_path / "lake"), poll_interval_s=0)
    try:
        yield lh
    finally:
        lh.close()
