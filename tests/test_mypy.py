"""The type checker runs as part of the suite (STYLE.md: disallow_untyped_defs).

The configuration lives in pyproject.toml ``[tool.mypy]``: every package is
checked with ``strict = true`` (everything ``mypy --strict`` checks).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["kvstore", "kvclient", "catalog", "service"]


def test_mypy_is_configured_strictly() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.mypy]" in text and "disallow_untyped_defs = true" in text
    assert "strict = true" in text.split("[tool.mypy]", 1)[1].split("[[tool.mypy.overrides]]", 1)[0]


@pytest.mark.slow
def test_packages_type_check() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
