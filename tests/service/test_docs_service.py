"""docs/service.md's client examples run as written against a live server.

The server serves a lakehouse in a temporary directory, without a token;
the test puts its address in place of the page's ``http://127.0.0.1:8181``.
Each python block runs in its own process (tests/test_docs.py leaves this
page to this test: its blocks need a server).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from service.testing import ServerProcess

PAGE = Path(__file__).resolve().parents[2] / "docs" / "service.md"
PAGE_URL = "http://127.0.0.1:8181"


def test_the_client_examples_run_against_a_server(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 2 and all(PAGE_URL in block for block in blocks)
    server = ServerProcess(str(tmp_path / "lake"), tmp_path / "server.log").start()
    try:
        for number, block in enumerate(blocks, 1):
            result = subprocess.run(
                [sys.executable, "-c", block.replace(PAGE_URL, server.url)],
                capture_output=True, text=True, timeout=180, cwd=tmp_path,
            )
            assert result.returncode == 0, f"docs/service.md python block {number}:\n{result.stderr[-3000:]}"
    finally:
        server.stop()
