"""What ``lakekv serve`` reads at start does not grow with the store's history (issue 38).

The server's start is :func:`catalog.open` (the store, the lakehouse's
recorded retention window, the handle) plus objects that read nothing. On
two stores with the same data and unflushed tail, one with 20 versions of
history and one with 2,000 (all retained), the lakehouse handle the server
builds reads the same objects. ``tests/kvstore/test_open_cost.py`` builds
the stores and pins the engine's own open the same way.
"""

from __future__ import annotations

from collections import Counter

import catalog
import kvstore
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore
from test_open_cost import LONG, QUIET, SHORT, build  # tests/kvstore is on sys.path (tests/service/conftest.py)


def serve_start_calls(objects: MemoryStore) -> Counter[str]:
    """Object-store calls of building the lakehouse handle as the server does, once the window is recorded."""
    with catalog.Lakehouse(kvstore.open(objects, create=False, **QUIET)) as lake:
        assert lake.retention_window_s == QUIET["retention_window_s"]  # recorded now: later starts write nothing
    counting = CountingStore(objects)
    with catalog.Lakehouse(kvstore.open(counting, create=False, **QUIET)) as lake:
        calls = counting.counts
        assert lake.list_namespaces() == []
    return calls


def test_the_server_s_lakehouse_reads_the_same_objects_whatever_the_history() -> None:
    short, long = serve_start_calls(build(SHORT)), serve_start_calls(build(LONG))
    assert long == short
    assert long["list"] == 0 and long["put"] == long["put_if_absent"] == 0  # nothing listed, nothing written
