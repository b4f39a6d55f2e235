"""Every module's doctests run (the examples in docstrings are tests too)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("kvstore", "kvclient", "catalog", "service")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith(".__main__"):
                continue  # a program (python -m ...): importing it runs it
            names.append(info.name)
    return sorted(names)


def test_every_package_is_walked() -> None:
    modules = _modules()
    assert "kvstore.store" in modules and "catalog.lakehouse" in modules and "service.app" in modules


@pytest.mark.parametrize("name", _modules())
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"
