"""The README's quick start for Python code runs as written on a fresh store.

The engine's full API example lives in docs/kv.md and runs in tests/test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Python code: transactions on durable storage, no server"


def _python_api_block() -> str:
    text = README.read_text()
    section = text.split(SECTION, 1)[1].split("\n### ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, f"README has no python block under {SECTION!r}"
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
