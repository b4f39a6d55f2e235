"""Helpers shared by the maintenance tests (flush, compaction, GC, history)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kvstore.objstore.base import ObjectStore

# A handle that does nothing behind the test's back: no follower, no
# background flush/compaction/GC.
QUIET = {"poll_interval_s": 0, "background_maintenance": False}


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``condition`` until it holds.

    ``timeout`` is a liveness bound (the background threads must get there
    eventually), not a performance assertion.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.01)


def sst_paths(store: ObjectStore) -> set[str]:
    """Every object under ``sst/``."""
    return {meta.path for meta in store.list("sst/")}
