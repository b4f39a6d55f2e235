"""A module imported at its first attribute access, for imports that are slow and often unneeded.

pyiceberg takes about 1 s to import. Only Iceberg-format tables and the
Iceberg REST handlers need it, but importing it with the modules that
mention those would make every ``import catalog`` and every ``lakekv serve``
start pay for it. Type checkers see the real module (import it under
``TYPE_CHECKING``); at run time this stand-in imports it when first used::

    if TYPE_CHECKING:
        from catalog import iceberg_tables
    else:
        iceberg_tables = LazyModule("catalog.iceberg_tables")
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name``; the first attribute read imports it (thread-safe: Python's import lock)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
