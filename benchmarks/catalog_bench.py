"""Lakehouse-catalog benchmark: lakekv's ``catalog`` against DuckLake (SQLite
metadata) and pyiceberg's SqlCatalog (SQLite), side by side in one run.

Run: ``.venv/bin/python benchmarks/catalog_bench.py [--quick] [--out DIR]
[--systems lakekv,ducklake,pyiceberg] [--profile DIR]``. Prints the table
(with ratios lakekv ÷ best peer, date and machine) and writes
``catalog_bench.{json,md}`` (``catalog_bench-quick.*`` with ``--quick``)
under ``--out`` (default ``benchmarks/results/``). The full run takes about
10 minutes on 2 cores. What is measured and how each system does it:
``benchmarks/lakehouse/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The helpers are packages next to this file, not part of the installed lakekv.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lakehouse.run import main  # noqa: E402 - needs the path set above

if __name__ == "__main__":
    sys.exit(main())
