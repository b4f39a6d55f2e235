"""The README's quick start for other services runs as written against a live server.

The server serves a lakehouse in a temporary directory (so the Iceberg REST
catalog is there, not only the KV API); the test puts its address in place of
the README's ``http://127.0.0.1:8181``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from service.testing import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Other services: a metadata store over HTTP"
README_URL = "http://127.0.0.1:8181"


def test_the_service_quick_start_runs_against_a_server(tmp_path: Path) -> None:
    section = README.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1 and README_URL in blocks[0]
    server = ServerProcess(str(tmp_path / "lake"), tmp_path / "server.log").start()
    try:
        result = subprocess.run(
            [sys.executable, "-c", blocks[0].replace(README_URL, server.url)],
            capture_output=True, text=True, timeout=180, cwd=tmp_path,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("2")
