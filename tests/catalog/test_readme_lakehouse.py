"""The README's Lakehouse example runs as written on a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_lakehouse_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = README.read_text().split("## Lakehouse catalog (`catalog`)", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "README has no python block under the Lakehouse section"
    monkeypatch.chdir(tmp_path)
    exec(compile(match.group(1), str(README), "exec"), {})  # noqa: S102 - our own README
    import catalog

    with catalog.open(str(tmp_path / "backup"), create=False) as copy:
        assert copy.load_table("sales.eu.orders").scan().count() == 2  # the export at version v
