"""The durable-transaction errors, re-exported from :mod:`catalog.errors` where they live."""

from __future__ import annotations

from catalog.errors import CatalogError, LockConflictError, TransactionExpiredError, TransactionStateError

# Raised by operations that may still commit the expiry clean-ups they did (see work.run).
DEFERRABLE_ERRORS = (LockConflictError, TransactionExpiredError, TransactionStateError)

__all__ = ["CatalogError", "DEFERRABLE_ERRORS", "LockConflictError", "TransactionExpiredError", "TransactionStateError"]
