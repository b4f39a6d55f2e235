"""Snapshot: a consistent read-only view of the store at one version.

Thread-safety: a snapshot may be read from many threads at once.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterator

import pyarrow as pa

from kvstore.batch import check_key, check_limit, scan_bounds
from kvstore.errors import StoreClosedError
from kvstore.format.rows import Row
from kvstore.lease_reads import LeaseReads
from kvstore.iterators.arrow_scan import scan_kv_batches, scan_kv_pairs
from kvstore.reader import get_row, get_value, now_ms, scan_rows
from kvstore.state import Layers
from kvstore.watermark import Watermark


class Snapshot:
    """A consistent read-only view of the store at one ``(version, seq)``.

    Cheap to create; reads never block writers. Use as a context manager or
    call :meth:`close` when done: while open, a snapshot pins its seq in the
    store's watermark so retention keeps what it can see.
    """

    def __init__(
        self,
        version: int,
        seq: int,
        layers: Layers,
        *,
        check_open: Callable[[], None],
        watermark: Watermark | None = None,
        lease_reads: LeaseReads | None = None,
    ) -> None:
        """Made by the store. ``check_open`` raises once the store is closed;
        with ``watermark`` the snapshot pins ``seq`` there until closed; with
        ``lease_reads`` it hides the keys of ended leases (a view of the present;
        a read at an old revision shows them as they were, as etcd's does)."""
        self._lease_reads = lease_reads
        self.version = version
        self.seq = seq
        self._layers = layers
        self._store_check_open = check_open
        self._closed = False
        self._watermark = watermark
        self._release: weakref.finalize[Any, Any] | None = None
        if watermark is not None:
            watermark.pin(seq)
            # Dropped without close(): release the pin when garbage-collected.
            self._release = weakref.finalize(self, watermark.release_later, seq)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("snapshot is closed")
        self._store_check_open()

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` at this snapshot, or None."""
        self._check_open()
        key = check_key(key)
        value = get_value(self._layers, key, self.seq)
        if self._lease_reads is None:
            return value
        return self._lease_reads.value(key, value, self._layers, self.seq)

    def get_row(self, key: bytes) -> Row | None:
        """The raw newest row of ``key`` at this snapshot (DELETEs and expired rows included)."""
        self._check_open()
        return get_row(self._layers, check_key(key), self.seq)

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for live keys in ``[start, end)`` and ``prefix``, in key order."""
        self._check_open()
        if self._lease_reads is not None and self._lease_reads.active(self._layers, self.seq):
            pairs = scan_view(self._layers, self.seq, start, end, prefix, reverse, None)
            return self._lease_reads.pairs(pairs, self._layers, self.seq, check_limit(limit))
        return scan_view(self._layers, self.seq, start, end, prefix, reverse, limit)

    def scan_with_revision(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes, int]]:
        """Like :meth:`scan`, yielding ``(key, value, revision)``: the revision is the
        seq of the commit that wrote the value (as ``Store.get_with_revision``)."""
        self._check_open()
        if self._lease_reads is not None and self._lease_reads.active(self._layers, self.seq):
            triples = scan_revision_view(self._layers, self.seq, start, end, prefix, reverse, None)
            return self._lease_reads.pairs(triples, self._layers, self.seq, check_limit(limit))
        return scan_revision_view(self._layers, self.seq, start, end, prefix, reverse, limit)

    def scan_batches(
        self, start: bytes | None = None, end: bytes | None = None, prefix: bytes | None = None,
        batch_rows: int = 4096,
    ) -> Iterator[pa.RecordBatch]:
        """Forward scan as Arrow record batches (columns ``key``, ``value``)."""
        self._check_open()
        batches = scan_view_batches(self._layers, self.seq, start, end, prefix, batch_rows)
        if self._lease_reads is not None and self._lease_reads.active(self._layers, self.seq):
            return self._lease_reads.batches(batches, self._layers, self.seq)
        return batches

    def close(self) -> None:
        """Release the snapshot (and its pin). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._release is not None and self._release.detach() is not None:
                assert self._watermark is not None
                self._watermark.unpin(self.seq)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan_view(
    layers: Layers, seq: int, start: bytes | None, end: bytes | None, prefix: bytes | None, reverse: bool,
    limit: int | None,
) -> Iterator[tuple[bytes, bytes]]:
    """``Snapshot.scan`` of ``layers`` at ``seq`` (``Store.scan`` calls it without building a Snapshot)."""
    lo, hi = scan_bounds(start, end, prefix)
    check_limit(limit)
    if reverse:
        return _kv_pairs(scan_rows(layers, seq, lo, hi, True), limit)
    # Forward scans merge cached blocks in place (kvstore.iterators.arrow_scan).
    first_window = 256 if limit is None else min(limit, 4096)
    return scan_kv_pairs(layers, seq, lo, hi, now_ms(), first_window, limit)


def scan_revision_view(
    layers: Layers, seq: int, start: bytes | None, end: bytes | None, prefix: bytes | None, reverse: bool,
    limit: int | None,
) -> Iterator[tuple[bytes, bytes, int]]:
    """``Snapshot.scan_with_revision`` of ``layers`` at ``seq`` (``Store.scan_with_revision`` calls it directly)."""
    lo, hi = scan_bounds(start, end, prefix)
    check_limit(limit)
    rows = scan_rows(layers, seq, lo, hi, reverse)
    return _revision_triples(rows, limit)


def _revision_triples(rows: Iterator[Row], limit: int | None) -> Iterator[tuple[bytes, bytes, int]]:
    for count, row in enumerate(rows):
        if limit is not None and count >= limit:
            return
        yield row[0], row[3], int(row[1])  # type: ignore[misc]


def scan_view_batches(
    layers: Layers, seq: int, start: bytes | None, end: bytes | None, prefix: bytes | None, batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """``Snapshot.scan_batches`` of ``layers`` at ``seq`` (``Store.scan_batches`` calls it directly)."""
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")
    lo, hi = scan_bounds(start, end, prefix)
    return scan_kv_batches(layers, seq, lo, hi, batch_rows, now_ms())


def _kv_pairs(rows: Iterator[Row], limit: int | None) -> Iterator[tuple[bytes, bytes]]:
    if limit is None:
        for row in rows:
            yield row[0], row[3]  # type: ignore[misc]
        return
    for count, row in enumerate(rows):
        if count >= limit:
            return
        yield row[0], row[3]  # type: ignore[misc]
