"""The type checker runs as part of the suite (STYLE.md: disallow_untyped_defs).

The configuration lives in pyproject.toml ``[tool.mypy]``; extend ``PACKAGES``
when another package (catalog/) is held to the same bar.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["kvstore", "catalog", "service"]


def test_mypy_is_configured_strictly() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.mypy]" in text and "disallow_untyped_defs = true" in text


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
