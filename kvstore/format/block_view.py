"""A cached SST data block in its compact form: the Arrow batch as read.

The block cache holds one :data:`BlockView` per data block: the record batch
decoded over the bytes whose CRC was checked (zero-copy when the block is
uncompressed; a compressed block's buffers are decompressed once, when it is
loaded), so a block costs what its Arrow buffers hold (plus a fixed overhead),
never a list of Python row tuples. :func:`decoded_bytes` measures that. Reads
search the batch in place:

* ``find(key, snapshot_seq)``: index of the key's newest row with
  ``seq <= snapshot_seq``, or :data:`NOT_HERE` (no visible version here or in
  any later block), or :data:`NEXT_BLOCK` (the key's versions run past the
  block's end);
* ``lower_bound(key, lo=0, hi=None)``: ``bisect_left`` over the keys;
* ``key_at(i)``, ``row(i)``, ``rows(lo, hi, snapshot_seq=None)``,
  ``visible_value(i, now_ms)``.

:class:`PyBlockView` is the pure-Python reference; ``cython_ext._pointget``
has the compiled one, chosen here at import time (``BlockView``). The tests run
both against the same blocks.
"""

from __future__ import annotations

import warnings
from bisect import bisect_left
from typing import Any, Final

import pyarrow as pa

from kvstore.format.rows import PUT, Row

NOT_HERE: Final = -1
NEXT_BLOCK: Final = -2
# Python objects and Arrow's C++ array headers of one decoded batch, charged on
# top of its buffers (measured: ~1.5 KiB for a 5-column batch; rounded up).
BLOCK_OVERHEAD_BYTES: Final = 2048
# The compiled BlockView's search index (cython_ext/_keyindex.pxd, malloc'd):
# one 8-byte key head per row, plus the tree levels above them (an eighth
# more, and more again) and padding: 9.4 bytes a row in a 465-row block.
KEY_HEAD_BYTES: Final = 10


def decoded_bytes(batch: pa.RecordBatch, source: pa.Buffer) -> int:
    """Bytes of memory ``batch`` keeps alive: ``source`` if any buffer still
    points into it (an uncompressed block is a zero-copy view of what was
    read), plus every buffer decoded elsewhere (a compressed block's buffers
    are decompressed into new memory, and ``source`` is then freed).
    """
    start = source.address
    end = start + source.size
    shared = False
    elsewhere = 0
    for column in batch.columns:
        for buffer in column.buffers():
            if buffer is None:
                continue
            if start <= buffer.address < end:
                shared = True
            else:
                elsewhere += buffer.size
    return (source.size if shared else 0) + elsewhere


class _ArrowKeys:
    """The key column as a read-only sequence for ``bisect``: one scalar per probe."""

    __slots__ = ("_column",)

    def __init__(self, column: pa.Array) -> None:
        self._column = column

    def __len__(self) -> int:
        return len(self._column)

    def __getitem__(self, i: int) -> bytes:
        return self._column[i].as_py()  # type: ignore[no-any-return]


class PyBlockView:
    """Pure-Python twin of ``cython_ext._pointget.BlockView`` (see the module docstring).

    Args:
        batch: a ROW_SCHEMA batch that passed ``validate(full=True)``.
        nbytes: the bytes its buffers occupy.

    Raises:
        ValueError: a non-nullable column holds nulls.
    """

    __slots__ = ("_keys", "batch", "nbytes", "num_rows")

    def __init__(self, batch: pa.RecordBatch, nbytes: int) -> None:
        if batch.column(0).null_count or batch.column(1).null_count or batch.column(2).null_count:
            raise ValueError("key, seq and kind columns must not hold nulls")
        self.batch = batch
        self.nbytes = nbytes
        self.num_rows = batch.num_rows
        self._keys = _ArrowKeys(batch.column(0))

    def find(self, key: bytes, snapshot_seq: int) -> int:
        keys, seqs, n = self._keys, self.batch.column(1), self.num_rows
        i = bisect_left(keys, key)
        while i < n and keys[i] == key:
            if seqs[i].as_py() <= snapshot_seq:
                return i
            i += 1
        return NOT_HERE if i < n else NEXT_BLOCK

    def lower_bound(self, key: bytes, lo: int = 0, hi: int | None = None) -> int:
        stop = self.num_rows if hi is None else hi
        if lo < 0 or stop > self.num_rows or lo > stop:
            raise IndexError(f"bad range [{lo}, {stop}) for a block of {self.num_rows} rows")
        return bisect_left(self._keys, key, lo, stop)

    def key_at(self, i: int) -> bytes:
        self._check_index(i)
        return self._keys[i]

    def row(self, i: int) -> Row:
        self._check_index(i)
        return tuple(self.batch.column(c)[i].as_py() for c in range(5))

    def rows(self, lo: int, hi: int, snapshot_seq: int | None = None) -> list[Row]:
        if lo < 0 or hi > self.num_rows or lo > hi:
            raise IndexError(f"bad range [{lo}, {hi}) for a block of {self.num_rows} rows")
        part = self.batch.slice(lo, hi - lo)
        rows: list[Row] = list(zip(*(part.column(c).to_pylist() for c in range(5))))
        if snapshot_seq is None:
            return rows
        return [row for row in rows if row[1] <= snapshot_seq]

    def visible_value(self, i: int, now_ms: int) -> bytes | None:
        row = self.row(i)
        if row[2] != PUT or (row[4] is not None and row[4] <= now_ms):
            return None
        return row[3]

    def _check_index(self, i: int) -> None:
        if not 0 <= i < self.num_rows:
            raise IndexError(f"row {i} out of range for a block of {self.num_rows} rows")


compiled: Any
try:
    from cython_ext import _pointget as compiled  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(
        f"lakekv: compiled point-get path unavailable ({exc}); using the pure-Python reference", stacklevel=2
    )
    compiled = None

IMPLEMENTATION: Final[str] = "python" if compiled is None else "cython"
"""Which implementation :data:`BlockView` (and the point get) runs."""
BlockView: Final[Any] = PyBlockView if compiled is None else compiled.BlockView
