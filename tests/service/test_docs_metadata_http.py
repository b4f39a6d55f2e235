"""docs/metadata-store.md: the HTTP example runs as written against a live server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from service.testing import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "metadata-store.md"
DOC_URL = "http://127.0.0.1:8181"


def test_the_http_example_runs_against_a_server(server: ServerProcess) -> None:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL) if DOC_URL in b]
    assert len(blocks) == 1
    result = subprocess.run(
        [sys.executable, "-c", blocks[0].replace(DOC_URL, server.url)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
