"""Every runnable example in docs/*.md runs as written.

For each page, each ```python block runs on its own in a fresh subprocess
(this venv's interpreter, ``sys.executable``) whose working directory is a
new temporary directory, and each ```bash block runs the same way under
``bash -euo pipefail`` with the venv's ``bin`` (so ``lakekv`` and
``python``) first on ``PATH``. Blocks never share state: every block makes
its own data (``tempfile.mkdtemp()`` or relative paths in its temporary
working directory). A failure names the page and the block number (1-based,
counting python and bash blocks separately).

Blocks tagged ``text`` or ``console`` are illustrations (output listings,
configuration snippets, commands and clients that need a running server or
Spark) and are not run; no other tag is allowed on the pages checked here.

Four pages are skipped because other tests run them. docs/service.md: its
client examples run against a live server in tests/service/test_docs_service.py.
docs/engines.md: tests/engines/test_docs_engines.py runs its blocks in order
against a live server (one on the JVM Iceberg engine's Spark 4.1).
docs/spark.md: its python
blocks run in tests/spark/test_docs_spark.py (slow: each starts Spark), its
SQL transaction block in tests/spark/test_catalog_transactions.py.
docs/metadata-store.md: tests/kvstore/test_docs_metadata_store.py, and
tests/service/test_docs_metadata_http.py runs its HTTP example against a live
server. The README's quick starts run in tests/kvstore/test_readme.py,
tests/catalog/test_readme_lakehouse.py, tests/service/test_readme_service.py
and tests/spark/test_docs_spark.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
COVERED_ELSEWHERE = {"spark.md", "metadata-store.md", "service.md", "engines.md"}
RUNNABLE = ("python", "bash")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(page: Path) -> list[tuple[str, int, str]]:
    """(language, number within that language, code) for every runnable block of ``page``."""
    counts = dict.fromkeys(RUNNABLE, 0)
    found = []
    for lang, code in BLOCK.findall(page.read_text()):
        if lang in counts:
            counts[lang] += 1
            found.append((lang, counts[lang], code))
    return found


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if p.name not in COVERED_ELSEWHERE)


CASES = [(page, lang, n, code) for page in _pages() for lang, n, code in _blocks(page)]


def test_every_page_is_checked() -> None:
    pages = {p.name for p in DOCS.glob("*.md")}
    assert {"kv.md", "catalog.md", "transactions.md", "cli.md", "operations.md"} <= pages
    for page in _pages():
        tags = {lang for lang, _ in BLOCK.findall(page.read_text())}
        allowed = {*RUNNABLE, "text", "console"}
        assert tags <= allowed, f"{page.name}: tags {sorted(tags)}; python/bash run, text/console do not"


@pytest.mark.parametrize(
    ("page", "lang", "number", "code"),
    CASES,
    ids=[f"{page.name}-{lang}{n}" for page, lang, n, _ in CASES],
)
def test_block_runs(page: Path, lang: str, number: int, code: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-euo", "pipefail", "-c", code]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"docs/{page.name}, {lang} block {number} failed (exit {result.returncode}):\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )
