"""docs/spark.md, section "Operating tables": every ``sql`` block runs as written, in order, in the
shared Spark session, and the answers the text states hold.

The examples name lakehouse versions of a fresh lakehouse (``VERSION AS OF 4``), so they run
against a fresh one: catalog ``lake`` of the text is served here as ``opsdoc`` (the session's
``lake`` is shared by every test)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

import catalog
from catalog.spark.plugin import catalog_conf

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def section() -> str:
    text = DOC.read_text()
    start = text.index("\n## Operating tables\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def statements(block: str) -> list[str]:
    """A block's statements: split at a ``;`` that ends a line, ``--`` comments dropped."""
    lines = [re.sub(r"\s*--.*$", "", line) for line in block.splitlines()]
    return [s.strip().rstrip(";") for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]


def test_operating_tables_examples_run(spark: SparkSession, tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    for key, value in catalog_conf("opsdoc", url, python=sys.executable).items():
        spark.conf.set(key, value)
    blocks = re.findall(r"```sql\n(.*?)```", section(), flags=re.DOTALL)
    assert len(blocks) >= 4, "the section lost its examples"
    answers = {}
    for block in blocks:
        for statement in statements(block):
            answers[statement] = spark.sql(re.sub(r"\blake\.", "opsdoc.", statement)).collect()
    # What the text says of them.
    with catalog.open(url, background=False) as lake:
        table = lake.load_table("ops.events_v2")
        assert {r[0] for r in answers["SHOW PARTITIONS lake.ops.events"]} == {
            f"day={f.partition['2']}" for f in table.scan().files()
        } == {"day=2026-11-01"}
        renamed_at_4 = lake.at(version=4).load_table_by_id(table.id)
        assert renamed_at_4.name == "ops.events"
        assert answers["SELECT count(*) FROM lake.ops.events_v2 VERSION AS OF 4"] == [(renamed_at_4.scan().count(),)] == [(3,)]
        assert lake.load_table("ops.clicks").scan().count() == 1
    history = answers["SELECT version, made_current_at, operation, summary FROM lake.ops.events.history"]
    assert [r.operation for r in history] == ["create_table", "append", "append", "delete"]
    assert "LOCATION" not in answers["SHOW CREATE TABLE lake.ops.events_v2"][0][0]
