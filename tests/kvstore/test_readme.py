"""The README's Python API example runs as written on a fresh store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_api_block() -> str:
    text = README.read_text()
    section = text.split("## Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "README has no python block under '## Python API'"
    return match.group(1)


def test_python_api_example_runs_on_a_fresh_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = _python_api_block()
    assert "db.transaction(" in code and "txn.get(b\"acct:1\")" in code
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - our own README
    import kvstore

    with kvstore.open(str(tmp_path / "data" / "mystore")) as db:
        assert db.get(b"acct:1") == b"90"  # the transaction's withdrawal landed
        summaries = [c.get("summary") for info in db.history(limit=None) for c in info.commits]
        assert {"op": "withdraw", "amount": 10} in summaries
