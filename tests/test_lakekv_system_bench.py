"""The lakekv system of the catalog benchmark (benchmarks/lakehouse/lakekv_system.py).

``create_tables`` once split a transaction at 400 creates because of a 64 KiB
commit-summary limit; the catalog commits far larger transactions now, so the
benchmark passes ``per_commit`` through unchanged.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from lakehouse.lakekv_system import LakekvSystem  # noqa: E402 - needs the path above


def test_ten_thousand_tables_commit_in_one_transaction(tmp_path: Path) -> None:
    system = LakekvSystem(tmp_path)
    system.open()
    try:
        system.create_namespace("ns")
        before = system.lake.version
        system.create_tables([f"ns.t{i:05d}" for i in range(10_000)], per_commit=10_000)
        assert system.lake.version == before + 1  # one lakehouse version: one transaction
        assert system.list_tables("ns") == 10_000
    finally:
        system.close()
