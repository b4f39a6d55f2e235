"""Views of a store's internals for tests, so that tests need no private attributes.

Each function answers one question a test asks about a store handle that the
public API does not (and should not) answer for users: whether the memtable
holds its own invariants, or which row a read at one commit seq sees. They
live with the engine, which may read its own parts; tests call them instead
of reaching into ``Store``'s private state (tests/test_private_access.py).
"""

from __future__ import annotations

from kvstore.format.rows import Row
from kvstore.reader import get_row
from kvstore.store import Store


def check_memtable(store: Store) -> None:
    """Check the memtable of ``store`` against its own invariants (sorted runs, index, sizes).

    Raises:
        AssertionError: an invariant does not hold.
    """
    store._state.layers.memtable.check_invariants()


def row_at(store: Store, key: bytes, seq: int) -> Row | None:
    """The newest row of ``key`` at or below commit seq ``seq`` in ``store``'s read layers
    (memtable and SSTs), as the read path sees it: ``(key, seq, kind, value, expire_ms)``."""
    return get_row(store._state.layers, key, seq)
