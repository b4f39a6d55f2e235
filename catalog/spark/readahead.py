"""Read-ahead: compute the next item of an iterator on a background thread while the caller handles the current one.

Why the Spark source needs it: PySpark's read worker writes each batch
``read()`` yields into a buffered socket and only then asks for the next one,
without flushing (``ArrowStreamSerializer`` flushes per batch only in its
pipelined UDF mode). The end of every batch therefore waits in the worker's
buffer until the next batch has been decoded and is being written, and the
JVM cannot convert a batch it has not fully received: decoding and the JVM's
work take turns instead of overlapping. With the next batch decoded in the
background, it is ready by the time the worker asks, so the JVM gets each
batch whole right away and converts it while the following one decodes
(pyarrow's Parquet decoding releases the GIL).

At most one item is computed ahead, so memory stays at about two batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")

_END: Final = object()


def read_ahead(items: Iterator[T], thread_name: str = "read-ahead") -> Iterator[T]:
    """Yield the items of ``items`` in order, each next one computed while the caller holds the current.

    ``items`` is only ever advanced by one background thread, one step at a
    time, so it need not be thread-safe. An exception raised by ``items``
    comes out of this generator at the position it happened. Closing this
    generator early waits for the one step in flight, then closes ``items``
    (if it is a generator) on the caller's thread.

    >>> list(read_ahead(iter(range(5))))
    [0, 1, 2, 3, 4]
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name) as pool:
        try:
            pending = pool.submit(next, items, _END)
            while True:
                item = pending.result()
                if item is _END:
                    return
                pending = pool.submit(next, items, _END)
                yield item  # type: ignore[misc]
        finally:
            # Let the step in flight finish before closing what it runs on.
            pool.shutdown(wait=True)
            close = getattr(items, "close", None)
            if close is not None:
                close()
