"""The README's lakehouse quick start runs as written on a fresh directory.

The catalog's full example lives in docs/catalog.md and runs in tests/test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Python code: transactions on durable storage, no server"


def test_lakehouse_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = README.read_text().split(SECTION, 1)[1].split("\n### ", 1)[0]
    match = next((b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "import catalog" in b), None)
    assert match is not None, f"README has no catalog example under {SECTION!r}"
    monkeypatch.chdir(tmp_path)
    exec(compile(match, str(README), "exec"), {})  # noqa: S102 - our own README
    import catalog

    with catalog.open(str(tmp_path / "backup"), create=False) as copy:
        assert copy.load_table("sales.eu.orders").scan().count() == 2  # the export at version v
