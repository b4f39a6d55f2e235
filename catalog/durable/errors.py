"""The durable-transaction errors, re-exported from :mod:`catalog.errors` where they live."""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.errors import (
    CatalogError,
    DurableTransactionExpiredError,
    LockConflictError,
    RENAMED,
    TransactionStateError,
)
from kvstore.errors import deprecated_name

# Raised by operations that may still commit the expiry clean-ups they did (see work.run).
DEFERRABLE_ERRORS = (LockConflictError, DurableTransactionExpiredError, TransactionStateError)

__all__ = [
    "CatalogError",
    "DEFERRABLE_ERRORS",
    "DurableTransactionExpiredError",
    "LockConflictError",
    "TransactionStateError",
]

# The old name this module exported before the rename (issue 24), kept one
# release; see kvstore.errors.deprecated_name and catalog.errors.RENAMED.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[BaseException]:
        return deprecated_name(__name__, name, frozenset({"TransactionExpiredError"}), RENAMED)
