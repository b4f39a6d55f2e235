"""``make run``'s job (catalog.spark.pipeline): SQL through catalog ``lake``, run twice on one lakehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import catalog

pytestmark = pytest.mark.spark


def run_pipeline(url: str) -> str:
    result = subprocess.run([sys.executable, "-m", "catalog.spark.pipeline", url, "--scale", "0.002"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_pipeline_runs_in_sql_and_again_on_the_same_lakehouse(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    first = run_pipeline(url)
    for statement in ("DROP NAMESPACE IF EXISTS lake.tpch CASCADE", "CREATE TABLE lake.tpch.orders AS SELECT",
                      "INSERT INTO lake.tpch.lineitem", "SELECT * FROM lake.tpch.reports.top_nations",
                      "VERSION AS OF", "cancel 5 orders and their lines in one transaction"):
        assert statement in first
    assert "VERSION AS OF answer equals the earlier answer: True; current answer changed: True" in first
    assert "lineitem unchanged until the commit: True" in first and "cancelled orders left: 0" in first
    second = run_pipeline(url)  # replaces its namespace
    with catalog.open(url) as lake:
        assert sorted(lake.list_tables("tpch")) == ["tpch.customer", "tpch.lineitem", "tpch.nation", "tpch.orders"]
        assert lake.list_views("tpch.reports") == ["tpch.reports.top_nations"]
        assert lake.load_table("tpch.lineitem").partition_by == ["l_returnflag"]
    first_rows = [line for line in first.splitlines() if line.startswith("  rows now:")]
    assert first_rows and first_rows == [line for line in second.splitlines() if line.startswith("  rows now:")]
