"""docs/spark.md: its Python examples run as written (in a fresh process: they start their own Spark),
and so does the README's Spark quick start."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def test_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks, "docs/spark.md has no python example"
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]


def test_readme_spark_example_runs(tmp_path: Path) -> None:
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("\n### Spark pipelines: lakekv as the catalog\n", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None and "catalogs=" in block.group(1)
    result = subprocess.run(
        [sys.executable, "-c", block.group(1)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "|    eu|   9.5|" in result.stdout
