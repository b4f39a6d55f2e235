"""docs/metadata-store.md: its Python examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "metadata-store.md"


def test_python_examples_run() -> None:
    blocks = [
        b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
        if "import kvstore" in b and "http://" not in b  # the HTTP example: tests/service/test_docs_metadata_http.py
    ]
    assert blocks, "docs/metadata-store.md has no runnable example"
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
    assert len(blocks) == 2  # the config watch and the leader election
