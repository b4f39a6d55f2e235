"""The row: one version of one key, shared by deltas, SSTs and iterators.

On storage, rows are Arrow record batches with :data:`ROW_SCHEMA`, ordered by
``key`` ascending, then ``seq`` descending (newest version of a key first).
In memory, a row is a plain tuple ``(key, seq, kind, value, expire_at_ms)``
(:data:`Row`): tuples are the cheapest object CPython can build and index,
and the merge iterator's hot loop works on them directly.
"""

from __future__ import annotations

from typing import Final, Optional, Sequence, Tuple

import pyarrow as pa

# Stored on disk: never renumber.
PUT: Final = 1
DELETE: Final = 2

ROW_SCHEMA: Final = pa.schema(
    [
        pa.field("key", pa.binary(), nullable=False),
        pa.field("seq", pa.uint64(), nullable=False),
        pa.field("kind", pa.uint8(), nullable=False),
        pa.field("value", pa.binary(), nullable=True),  # null for DELETE
        pa.field("expire_at_ms", pa.int64(), nullable=True),  # null = never expires
    ]
)

# Tuple positions, for readable indexing outside hot loops.
KEY: Final = 0
SEQ: Final = 1
KIND: Final = 2
VALUE: Final = 3
EXPIRE_AT_MS: Final = 4

Row = Tuple[bytes, int, int, Optional[bytes], Optional[int]]

MAX_SEQ: Final = 2**64 - 1

# Bytes a row costs besides its key and value, for size estimates (SST block
# fill, compaction output size, group-commit byte caps): seq 8 + kind 1 +
# expiry 8 + two 4-byte Arrow offsets. An estimate, never a limit on data.
ROW_OVERHEAD_BYTES: Final = 25


def rows_to_batch(rows: list[Row]) -> pa.RecordBatch:
    """Build a record batch with :data:`ROW_SCHEMA` from row tuples (already sorted)."""
    if not rows:
        return columns_to_batch((), (), (), (), ())
    keys, seqs, kinds, values, expires = zip(*rows)
    return columns_to_batch(keys, seqs, kinds, values, expires)


def columns_to_batch(
    keys: Sequence[bytes],
    seqs: Sequence[int],
    kinds: Sequence[int],
    values: Sequence[bytes | None],
    expires: Sequence[int | None],
) -> pa.RecordBatch:
    """Build a :data:`ROW_SCHEMA` batch from one Python sequence per column.

    Raises:
        pyarrow.ArrowInvalid / OverflowError: a value does not fit its column type.
    """
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(seqs, pa.uint64()),
            pa.array(kinds, pa.uint8()),
            pa.array(values, pa.binary()),
            pa.array(expires, pa.int64()),
        ],
        schema=ROW_SCHEMA,
    )


def batch_to_rows(batch: pa.RecordBatch) -> list[Row]:
    """Inverse of :func:`rows_to_batch`: row tuples in batch order."""
    cols = [batch.column(i).to_pylist() for i in range(5)]
    return list(zip(*cols))
