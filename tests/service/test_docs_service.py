"""docs/service.md's client examples run as written against a live server.

The server serves a lakehouse in a temporary directory, without a token;
the test puts its address in place of the page's ``http://127.0.0.1:8181``.
Each python block runs in its own process (tests/test_docs.py leaves this
page to this test: its blocks need a server). The SQL block runs in DuckDB,
offline, with the page's ``<extensions>`` replaced by the directory of the
``duckdb-ext-*`` wheels' extensions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import duckdb_ext

from service.testing import ServerProcess

PAGE = Path(__file__).resolve().parents[2] / "docs" / "service.md"
PAGE_URL = "http://127.0.0.1:8181"
EXTENSIONS = "<extensions>"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.MULTILINE)


def test_the_client_examples_run_against_a_server(tmp_path: Path) -> None:
    python, sql = blocks("python"), blocks("sql")
    assert len(python) == 3 and all(PAGE_URL in block for block in python)
    assert len(sql) == 1 and EXTENSIONS in sql[0] and PAGE_URL in sql[0]
    server = ServerProcess(str(tmp_path / "lake"), tmp_path / "server.log").start()
    try:
        for number, block in enumerate(python, 1):
            result = subprocess.run(
                [sys.executable, "-c", block.replace(PAGE_URL, server.url)],
                capture_output=True, text=True, timeout=180, cwd=tmp_path,
            )
            assert result.returncode == 0, f"docs/service.md python block {number}:\n{result.stderr[-3000:]}"
        # A fresh DuckDB with no configuration: the block's own SET lines make it work offline.
        extensions = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
        con = duckdb.connect()
        try:
            script = sql[0].replace(PAGE_URL, server.url).replace(EXTENSIONS, extensions)
            assert con.execute(script).fetchone() == (1,)
        finally:
            con.close()
    finally:
        server.stop()
