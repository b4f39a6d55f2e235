"""The results file of a scale benchmark: a header saying when, where and at which commit it ran, written as JSON.

Shared by ``scale_bench.py``, ``scale_tables.py`` and ``store_scale_bench.py``
so their JSON files (under ``benchmarks/results``) start alike and a reader of
one knows the others.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def run_header(**fields: Any) -> dict[str, Any]:
    """``date``, ``machine`` and ``commit`` of this run, then ``fields``."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "commit": commit.stdout.strip(),
        **fields,
    }


def write_results(out: str | Path, name: str, results: dict[str, Any]) -> Path:
    """Write ``results`` as ``<out>/<name>.json`` (``out`` made if missing); return its path."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(results, indent=1))
    return path
