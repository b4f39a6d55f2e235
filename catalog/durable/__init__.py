"""Durable, long-running transactions and locks in the lakekv store (YTsaurus Cypress model).

See :mod:`catalog.durable.manager` for the entry points and docs/transactions.md
for the lock compatibility table.
"""

from catalog.durable.errors import LockConflictError, TransactionExpiredError, TransactionStateError
from catalog.durable.manager import DurableTransaction, Lock, TransactionManager
from catalog.durable.records import DurableConfig, LockRecord, TxnRecord

__all__ = [
    "TransactionManager",
    "DurableTransaction",
    "Lock",
    "DurableConfig",
    "TxnRecord",
    "LockRecord",
    "LockConflictError",
    "TransactionExpiredError",
    "TransactionStateError",
]
