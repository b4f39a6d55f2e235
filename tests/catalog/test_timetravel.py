"""catalog/timetravel.py: ``lake.at(...).load_table_by_id`` follows a table through renames."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.errors import NoSuchTableError


def test_load_table_by_id_reads_the_past_of_a_renamed_table(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), background=False) as lake:
        lake.create_namespace("ns")
        lake.create_namespace("other")
        t = lake.create_table("ns.ev", pa.schema([("id", pa.int64())]))
        before = t.append(pa.table({"id": [1, 2]}))
        t.append(pa.table({"id": [3]}))
        lake.rename_table("ns.ev", "other.ev2")
        lake.create_table("ns.ev", pa.schema([("x", pa.string())]))  # the old name, another table now
        table_id = lake.load_table("other.ev2").id
        with lake.at(version=before) as past:
            same = past.load_table_by_id(table_id)
            assert same.name == "ns.ev" and same.id == table_id
            assert sorted(same.scan().to_arrow().column("id").to_pylist()) == [1, 2]
            with pytest.raises(NoSuchTableError, match="no table with id"):
                past.load_table_by_id(lake.load_table("ns.ev").id)  # created after that version
            with pytest.raises(TypeError):
                past.load_table_by_id(42)  # type: ignore[arg-type]
