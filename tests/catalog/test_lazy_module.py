"""catalog.lazy_module: a stand-in that imports its module at first use, and the start-up it keeps light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from catalog.lazy_module import LazyModule


def test_the_first_attribute_read_imports_the_module() -> None:
    stand_in = LazyModule("json")
    assert stand_in.dumps([1]) == "[1]"
    assert stand_in.JSONDecodeError is __import__("json").JSONDecodeError
    with pytest.raises(AttributeError):
        stand_in.no_such_attribute  # noqa: B018 - the read is the test
    with pytest.raises(ModuleNotFoundError):
        LazyModule("no_such_module_here").anything  # noqa: B018


@pytest.mark.parametrize("module", ["catalog", "service.app", "service.cli"])
def test_starting_does_not_import_pyiceberg(module: str) -> None:
    # pyiceberg's import takes about 1 s: `lakekv serve` (its etcd and KV APIs)
    # and `import catalog` must not wait for it; Iceberg tables load it on use.
    probe = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyiceberg'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
