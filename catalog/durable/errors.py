"""Errors of durable transactions and locks.

Temporary home until ``catalog/errors.py`` lands on ``main``; then these
classes move there (under ``CatalogError``) and this module re-exports them.
"""

from __future__ import annotations

from kvstore.errors import StoreError
from kvstore.errors import TransactionExpiredError as _KvTransactionExpiredError


class DurableTransactionError(StoreError):
    """Root of the durable-transaction errors (temporary, until ``CatalogError`` exists)."""


class LockConflictError(DurableTransactionError):
    """A lock cannot be taken: names the node, the requested mode and key, and the holding transaction."""

    def __init__(self, message: str, *, node: str, mode: str, key: str | None, holder: str | None) -> None:
        super().__init__(message)
        self.node = node
        self.mode = mode
        self.key = key
        self.holder = holder


class TransactionExpiredError(DurableTransactionError, _KvTransactionExpiredError):
    """The durable transaction (or an ancestor) passed its deadline without a ping; it counts as aborted."""


class TransactionStateError(DurableTransactionError):
    """The operation is not allowed in the transaction's state (commit after abort, open children, ...)."""
