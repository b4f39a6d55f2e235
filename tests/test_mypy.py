"""The type checker runs as part of the suite (STYLE.md: disallow_untyped_defs).

The configuration lives in pyproject.toml ``[tool.mypy]``: every package is
checked with ``disallow_untyped_defs``, and the engine and the service with
every per-module check of ``mypy --strict`` (an override for ``kvstore.*``
and ``service.*``; the catalog joins it when its remaining errors are fixed).
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
    strict = text.split('module = ["kvstore", "kvstore.*", "service", "service.*"]', 1)
    assert len(strict) == 2, "the engine and the service lost their strict override"
    for flag in ("disallow_any_generics", "warn_return_any", "warn_unused_ignores", "disallow_untyped_calls"):
        assert f"{flag} = true" in strict[1].split("[[tool.mypy.overrides]]", 1)[0], flag


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
