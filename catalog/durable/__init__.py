"""Durable, long-running transactions and locks in the lakekv store (YTsaurus Cypress model).

See :mod:`catalog.durable.manager` for the entry points and docs/transactions.md
for the lock compatibility table.
"""

from typing import TYPE_CHECKING

from catalog.durable.errors import DurableTransactionExpiredError, LockConflictError, TransactionStateError
from catalog.durable.manager import DurableTransaction, Lock, TransactionManager
from catalog.durable.records import DurableConfig, LockRecord, TxnRecord
from catalog.errors import RENAMED
from kvstore.errors import deprecated_name

__all__ = [
    "TransactionManager",
    "DurableTransaction",
    "Lock",
    "DurableConfig",
    "TxnRecord",
    "LockRecord",
    "LockConflictError",
    "DurableTransactionExpiredError",
    "TransactionStateError",
]

# The old name this package exported before the rename (issue 24), kept one
# release; see kvstore.errors.deprecated_name and catalog.errors.RENAMED.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[BaseException]:
        return deprecated_name(__name__, name, frozenset({"TransactionExpiredError"}), RENAMED)
