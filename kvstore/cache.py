"""The shared block cache: parsed SST blocks and footers, LRU, bounded in bytes.

One :class:`BlockCache` serves every SST reader of a store handle, so the
budget is global: a hot file's blocks push out a cold file's. Entries are
immutable decoded objects (SST files never change once written), so a hit
needs no I/O and no re-parsing. Blocks are cached in their compact form
(:mod:`kvstore.format.block_view`) and charged the bytes their decoded
Arrow buffers hold (a compressed block's decompressed size, not its size on
disk) plus a small fixed overhead, so the budget means what it says.

Key conventions used by :mod:`kvstore.format.sst_reader` (any hashable works):

* ``(store_url, path)``: the decoded footer/metadata of one SST;
* ``(store_url, path, block_no)``: one decoded data block.

The store URL is part of the key because SST paths (``sst/<uuid>.sst``) are
unique only inside one store.

>>> cache = BlockCache(100)
>>> cache.put("a", b"A" * 60, 60)
>>> cache.put("b", b"B" * 60, 60)   # evicts "a": 120 bytes exceed the budget
>>> cache.get("a") is None, cache.get("b") == b"B" * 60
(True, True)
>>> cache.stats().evictions
1
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any, Final


@dataclass(frozen=True)
class CacheStats:
    """Counters of one :class:`BlockCache` since it was created.

    Attributes:
        hits: ``get`` calls that found their key.
        misses: ``get`` calls that did not.
        evictions: entries dropped to stay within the byte budget.
        rejected: ``put`` calls ignored because the entry alone exceeds the budget.
        entries: entries held now.
        bytes: bytes charged for the entries held now.
        capacity_bytes: the budget.
    """

    hits: int
    misses: int
    evictions: int
    rejected: int
    entries: int
    bytes: int
    capacity_bytes: int

    def to_dict(self) -> dict[str, int]:
        """The counters as a JSON-able dict."""
        return asdict(self)


class PyLruCore:
    """Least-recently-used map whose entries are charged a caller-given size.

    The pure-Python twin of ``cython_ext._lru.LruCore`` (same results; the
    tests run both). Thread-safe: one lock guards every operation, each of
    which is O(1) (amortised; an insertion may evict several entries).

    Args:
        capacity_bytes: the budget; entries are evicted, least recently used
            first, until the charged sizes sum to at most this. 0 disables
            caching (every ``put`` is rejected).

    Raises:
        TypeError: ``capacity_bytes`` is not an int.
        ValueError: ``capacity_bytes`` is negative.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if not isinstance(capacity_bytes, int) or isinstance(capacity_bytes, bool):
            raise TypeError(f"capacity_bytes must be int, not {type(capacity_bytes).__name__}")
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self._capacity = capacity_bytes
        self._lock = threading.Lock()
        # key -> (value, charged bytes); order = recency, most recent last.
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._rejected = 0

    @property
    def capacity_bytes(self) -> int:
        """The byte budget."""
        return self._capacity

    def get(self, key: Hashable) -> Any | None:
        """Return the value cached under ``key`` (marking it most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Cache ``value`` under ``key``, charged ``nbytes``; replaces an existing entry.

        An entry larger than the whole budget is not cached (it would evict
        everything and then itself).

        Raises:
            TypeError: ``nbytes`` is not an int.
            ValueError: ``nbytes`` is negative or ``value`` is None (None means "missing").
        """
        if not isinstance(nbytes, int) or isinstance(nbytes, bool):
            raise TypeError(f"nbytes must be int, not {type(nbytes).__name__}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if value is None:
            raise ValueError("value must not be None: get() returns None for a missing key")
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if nbytes > self._capacity:
                self._rejected += 1
                return
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self._capacity:
                _evicted_key, (_value, size) = self._entries.popitem(last=False)
                self._bytes -= size
                self._evictions += 1

    def clear(self) -> None:
        """Drop every entry; the counters keep running."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def counters(self) -> tuple[int, int, int, int, int, int, int]:
        """``(hits, misses, evictions, rejected, entries, bytes, capacity_bytes)``, taken together."""
        with self._lock:
            return (self._hits, self._misses, self._evictions, self._rejected, len(self._entries), self._bytes,
                    self._capacity)


_LruCore: Any
try:
    from cython_ext._lru import LruCore as _LruCore  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled block cache unavailable ({exc}); using the pure-Python reference", stacklevel=2)
    _LruCore = PyLruCore

IMPLEMENTATION: Final[str] = "python" if _LruCore is PyLruCore else "cython"
"""Which LRU core :class:`BlockCache` is built on: ``"cython"`` or ``"python"``."""


class BlockCache(_LruCore):  # type: ignore[misc]  # a compiled class: Any to the type checker
    """Least-recently-used cache whose entries are charged a caller-given size.

    Thread-safe. ``get`` (the hot path: one call per point read) and ``put``
    are O(1) (amortised; an insertion may evict several entries); with the
    compiled core a hit takes no lock (see ``cython_ext/_lru.pyx``). Values
    are shared between threads, so they must be immutable; keys must be
    tuples of ``str``/``int``/``bytes`` (or other types hashed in C).

    Args:
        capacity_bytes: the budget; entries are evicted, least recently used
            first, until the charged sizes sum to at most this. 0 disables
            caching (every ``put`` is rejected).

    Raises:
        TypeError: ``capacity_bytes`` is not an int.
        ValueError: ``capacity_bytes`` is negative.
    """

    def stats(self) -> CacheStats:
        """A consistent snapshot of the counters."""
        hits, misses, evictions, rejected, entries, nbytes, capacity = self.counters()
        return CacheStats(hits=hits, misses=misses, evictions=evictions, rejected=rejected, entries=entries,
                          bytes=nbytes, capacity_bytes=capacity)
