"""Lease-aware reads: a value whose row names a lease (:func:`kvstore.leases.marker`) is shown only while it lives.

A keepalive writes only the lease's record (:mod:`kvstore.leases`), so the
keys of a lease carry no deadline the engine could judge; the read entry
points that hand values to users (``Store.get``/``scan``/``snapshot``,
transactions) filter their results here instead. The engine's hot paths stay
as they are: a read whose view holds no lease record at all (the common case)
costs one comparison of the view's seq, and only results whose row carries a
marker are checked.

Why caching a deadline is safe (as in :mod:`service.etcd.lease_table`): a
lease's deadline only moves forward (a keepalive sets ``now + ttl``, and one
that lands late revokes instead), and a revoke deletes the keys in the same
commit as the record. So a cached deadline still in the future proves the
lease alive or its keys deleted; only once it has passed is the record read
again, from the reader's own view.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa

from kvstore import leases
from kvstore.format.rows import PUT
from kvstore.reader import get_row, get_value, scan_rows

_RECORDS_START: Final = leases.RECORDS_PREFIX
_RECORDS_END: Final = _RECORDS_START[:-1] + bytes([_RECORDS_START[-1] + 1])


class LeaseReads:
    """One store handle's lease filter: whether a view holds leases, and each lease's cached deadline."""

    __slots__ = ("seen", "_deadlines")

    def __init__(self) -> None:
        # (view seq, whether it holds a lease record): read without a call by Store.get's fast path.
        self.seen: tuple[int, bool] = (-1, False)
        self._deadlines: dict[int, int] = {}

    def active(self, layers: Any, seq: int) -> bool:
        """True when the view at ``seq`` holds a lease record (only then may a row carry a marker)."""
        seen = self.seen
        if seen[0] == seq:
            return seen[1]
        present = next(scan_rows(layers, seq, _RECORDS_START, _RECORDS_END), None) is not None
        self.seen = (seq, present)
        return present

    def alive(self, lease_id: int, layers: Any, seq: int) -> bool:
        """Whether lease ``lease_id`` lives now, by the cached deadline or else the record in the view."""
        now = leases.clock_ms()
        cached = self._deadlines.get(lease_id)
        if cached is not None and cached > now:
            return True
        raw = get_value(layers, leases.record_key(lease_id), seq)
        if raw is None:
            return False
        deadline = leases.deadline_of(raw)
        self._deadlines[lease_id] = deadline
        return deadline > now

    def shows(self, expire: int | None, layers: Any, seq: int) -> bool:
        """Whether a live row with engine expiry ``expire`` is shown (no lease, or a live one)."""
        lease_id = leases.lease_of_expiry(expire)
        return lease_id is None or self.alive(lease_id, layers, seq)

    def value(self, key: bytes, value: bytes | None, layers: Any, seq: int) -> bytes | None:
        """``value`` (read for ``key`` at ``seq``) unless its row names a lease that has ended."""
        if value is None or not self.active(layers, seq):
            return value
        row = get_row(layers, key, seq)
        return value if row is None or row[2] != PUT or self.shows(row[4], layers, seq) else None

    def pairs(self, rows: Iterator[Any], layers: Any, seq: int, limit: int | None) -> Iterator[Any]:
        """Scan results (tuples starting with the key, read with no limit) without those of ended
        leases, at most ``limit``. Call only when :meth:`active`."""
        shown = 0
        for item in rows:
            if limit is not None and shown >= limit:
                return
            row = get_row(layers, item[0], seq)
            if row is None or self.shows(row[4], layers, seq):
                shown += 1
                yield item

    def batches(self, batches: Iterator[pa.RecordBatch], layers: Any, seq: int) -> Iterator[pa.RecordBatch]:
        """Arrow scan batches (a ``key`` column) without the rows of ended leases. Call only when :meth:`active`."""
        for batch in batches:
            keys = batch.column("key").to_pylist()
            keep = [row is None or self.shows(row[4], layers, seq) for row in (get_row(layers, k, seq) for k in keys)]
            yield batch if all(keep) else batch.filter(pa.array(keep, pa.bool_()))
