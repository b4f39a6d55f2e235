"""benchmarks/iceberg_bench.py end to end at toy sizes: every goal of issue 34's cost line is measured and
printed beside its goal (never a speed assertion: the machine is shared, the numbers are the output)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_goal_is_printed_with_a_number_and_a_verdict() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "iceberg_bench.py"), "--files", "20", "--appends", "4",
         "--rounds", "3", "--scan-rows", "2000", "--skip-compare"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    goals = {
        "REST loadTable, first load of the never-loaded": r"\d+ ms \(server CPU \d+ ms; 5 snapshots\)  goal <= 2000 ms  (MET|NOT MET)$",
        "REST loadTable right after one more append": r"p50 [\d.]+ ms, max [\d.]+ ms over 3  goal p50 <= 50 ms  (MET|NOT MET)",
        "first derivation of the never-derived table": r"\d+ ms \(CPU \d+ ms\)  goal <= 2000 ms  (MET|NOT MET)$",
        "full scan of 2000 rows": r"DuckDB (MET|NOT MET), pyiceberg (MET|NOT MET)$",
    }
    for prefix, pattern in goals.items():
        (line,) = [line for line in lines if line.startswith(prefix)]
        assert re.search(pattern, line), line
