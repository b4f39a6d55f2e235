"""Data files of native tables: Parquet writing with statistics, the file entry, reading.

A :class:`DataFile` is what a ``tbl/<id>/file/<file id>`` key holds: where
the file is, its size and row count, its partition values and, per column,
min / max / null count. Statistics and partition values are keyed by field id
(:mod:`catalog.schema`), so renames never rewrite entries, and are JSON-safe
through :func:`encode_value` / :func:`decode_values`, which keep the exact
Arrow type (dates, timestamps, decimals, binary) for pruning.
"""

from __future__ import annotations

import base64
import decimal
import io
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Final, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from catalog.errors import CorruptDataFileError
from catalog.schema import FIELD_ID, PARQUET_FIELD_ID, field_id, project
from kvstore.format.checksum import crc32c
from kvstore.objstore.base import ObjectStore

log = logging.getLogger(__name__)

DEFAULT_TARGET_FILE_BYTES: Final = 128 << 20
# How data files are written. zstd: the smallest files at about snappy's
# decode cost. Decimals of precision <= 18 as INT32/INT64 rather than 16-byte
# FIXED_LEN_BYTE_ARRAY: the layout Spark and the Iceberg spec use, 3.5x
# cheaper for pyarrow to decode (TPC-H lineitem's 4 decimal(15,2) columns:
# 92 -> 26 ms per 300k rows) and any reader still gets decimal128 back.
# Page checksums let any Parquet reader tell a damaged page (ours verify them).
PARQUET_WRITE_OPTIONS: Final = {
    "compression": "zstd",
    "store_schema": True,
    "store_decimal_as_integer": True,
    "write_page_checksum": True,
}
# Rows per batch when a file is streamed (read_file_batches): pyarrow's default.
READ_BATCH_ROWS: Final = 64 * 1024
# Strings longer than this keep no min/max: a truncated max is no upper bound.
_MAX_STAT_CHARS: Final = 256
# A Parquet file starts with the magic "PAR1" and ends with its footer, the
# footer's length (4 bytes, little endian) and "PAR1" again: a footer region
# (see footer_region_start) has at least those last 8 bytes.
_MAGIC: Final = b"PAR1"
_FOOTER_TRAILER: Final = 8


def _stat_kind(t: pa.DataType) -> str | None:
    """How values of ``t`` travel in JSON, or None if the type keeps no statistics."""
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return "num"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bin"
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return "int32"
    if pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        return "int64"
    if pa.types.is_decimal(t):
        return "dec"
    return None


def encode_value(value: pa.Scalar) -> Any:
    """One Arrow scalar as a JSON-safe value that :func:`decode_values` restores exactly.

    Raises:
        TypeError: the scalar's type has no statistics (see :func:`has_stats`).
    """
    if not value.is_valid:
        return None
    kind = _stat_kind(value.type)
    if kind == "num":
        return value.as_py()
    if kind == "str":
        return value.as_py()
    if kind == "bin":
        return base64.b64encode(value.as_py()).decode()
    if kind == "int32":
        return value.cast(pa.int32()).as_py()
    if kind == "int64":
        return value.cast(pa.int64()).as_py()
    if kind == "dec":
        return str(value.as_py())
    raise TypeError(f"no JSON form for {value.type}")


def decode_values(values: list[Any], t: pa.DataType) -> pa.Array:
    """The Arrow array of type ``t`` for values made by :func:`encode_value` (None = null).

    Raises:
        TypeError: ``t`` has no statistics (see :func:`has_stats`).
    """
    kind = _stat_kind(t)
    if kind in ("num", "str"):
        return pa.array(values, type=t)
    if kind == "bin":
        return pa.array([None if v is None else base64.b64decode(v) for v in values], type=t)
    if kind == "int32":
        return pa.array(values, type=pa.int32()).cast(t)
    if kind == "int64":
        return pa.array(values, type=pa.int64()).cast(t)
    if kind == "dec":
        return pa.array([None if v is None else decimal.Decimal(v) for v in values], type=t)
    raise TypeError(f"no statistics for {t}")


def has_stats(t: pa.DataType) -> bool:
    """Whether columns of type ``t`` keep min/max statistics."""
    return _stat_kind(t) is not None


@dataclass
class DataFile:
    """One immutable Parquet data file of a native table."""

    id: str
    path: str  # object path inside the lakehouse's object store
    size: int
    rows: int
    partition: dict[str, Any] = field(default_factory=dict)  # field id (str) -> encoded value
    stats: dict[str, list[Any]] = field(default_factory=dict)  # field id (str) -> [min, max, nulls]
    # CRC32C of the whole file, checked on every read, verify and export.
    # None: an entry written before checksums, checked by size only.
    crc32c: int | None = None
    # The Parquet schema carries each top-level column's field id (its
    # PARQUET:field_id), so readers other than ours (Spark's Parquet reader
    # in the catalog plugin) can match columns by id. False: written before
    # that; only the Arrow schema stored in the file has the ids.
    parquet_field_ids: bool = False
    # The file's footer region (see footer_region_start): its last
    # ``footer_size`` bytes and their CRC32C. Readers that skip bytes (the
    # Spark plugin's JVM reader) check these instead of ``crc32c``, then
    # Parquet's page checksums. None: an entry written before they were
    # recorded; such readers check the whole file.
    footer_size: int | None = None
    footer_crc32c: int | None = None
    # A file imported in place (catalog.import_files) whose Parquet schema has
    # no field ids: its column names -> the table's field ids, as they were
    # matched at import (so a later rename still reads them). Partition
    # columns a Hive-style file leaves out are filled from ``partition``.
    column_ids: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON-serialisable dict (optional fields only when set)."""
        out: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "size": self.size,
            "rows": self.rows,
            "partition": self.partition,
            "stats": self.stats,
        }
        if self.crc32c is not None:
            out["crc32c"] = self.crc32c
        if self.parquet_field_ids:
            out["parquet_field_ids"] = True
        if self.footer_size is not None:
            out["footer_size"] = self.footer_size
            out["footer_crc32c"] = self.footer_crc32c
        if self.column_ids is not None:
            out["column_ids"] = self.column_ids
        return out

    def encode(self) -> bytes:
        """The entry as stored: compact JSON bytes."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, d: Any) -> DataFile:
        """Rebuild from :meth:`to_json`; ``ValueError`` if ``d`` is not such a dict.

        Raises:
            TypeError: ``d`` is not a dict.
            ValueError: a field is missing or malformed, the size or row count is
                negative, a CRC32C is out of range, or the footer region is given
                without its checksum (or the other way round) or is not inside the
                file.
        """
        if not isinstance(d, dict):
            raise TypeError(f"a data file entry must be a dict, not {type(d).__name__}")
        try:
            entry = cls(
                id=str(d["id"]),
                path=str(d["path"]),
                size=int(d["size"]),
                rows=int(d["rows"]),
                partition=dict(d.get("partition") or {}),
                stats=dict(d.get("stats") or {}),
                crc32c=None if d.get("crc32c") is None else int(d["crc32c"]),
                parquet_field_ids=d.get("parquet_field_ids") is True,
                footer_size=None if d.get("footer_size") is None else int(d["footer_size"]),
                footer_crc32c=None if d.get("footer_crc32c") is None else int(d["footer_crc32c"]),
                column_ids=None if d.get("column_ids") is None else {str(k): str(v) for k, v in d["column_ids"].items()},
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"malformed data file entry {str(d)[:200]}: {exc!r}") from None
        if entry.size < 0 or entry.rows < 0:
            raise ValueError(f"malformed data file entry {entry.id}: negative size or rows")
        for name, crc in (("crc32c", entry.crc32c), ("footer_crc32c", entry.footer_crc32c)):
            if crc is not None and not 0 <= crc <= 0xFFFFFFFF:
                raise ValueError(f"malformed data file entry {entry.id}: {name} out of range")
        if (entry.footer_size is None) != (entry.footer_crc32c is None):
            raise ValueError(f"malformed data file entry {entry.id}: footer_size and footer_crc32c go together")
        if entry.footer_size is not None and not _FOOTER_TRAILER <= entry.footer_size <= entry.size:
            raise ValueError(f"malformed data file entry {entry.id}: footer_size {entry.footer_size} is not inside the file")
        return entry

    @classmethod
    def decode(cls, raw: bytes) -> DataFile:
        """The entry :meth:`encode` stored.

        Raises:
            ValueError: ``raw`` is not JSON, or not a valid entry (see :meth:`from_json`).
            TypeError: the JSON is not an object.
        """
        return cls.from_json(json.loads(raw))


def column_stats(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    """``[min, max, null_count]`` of one column (min/max None where unknown)."""
    nulls = col.null_count
    if not has_stats(col.type) or nulls == len(col):
        return [None, None, nulls]
    if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
        return [None, None, nulls]  # NaN has no place in an order: keep no bounds
    mm = pc.min_max(col)
    lo, hi = mm["min"], mm["max"]
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        if len(lo.as_py()) > _MAX_STAT_CHARS or len(hi.as_py()) > _MAX_STAT_CHARS:
            return [None, None, nulls]
    if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
        if len(lo.as_py()) > _MAX_STAT_CHARS or len(hi.as_py()) > _MAX_STAT_CHARS:
            return [None, None, nulls]
    return [encode_value(lo), encode_value(hi), nulls]


def new_file_id() -> str:
    # Time-ordered prefix so a table's file keys list in write order.
    """A fresh, random data file id (32 hex digits)."""
    return uuid.uuid4().hex


def partition_groups(data: pa.Table, partition_names: list[str]) -> Iterator[tuple[dict[str, pa.Scalar], pa.Table]]:
    """Split ``data`` into one table per distinct partition tuple (nulls are a value)."""
    if not partition_names or data.num_rows == 0:
        yield {}, data
        return
    keys = data.select(partition_names)
    # Dense group ids via a stable sort on the partition columns.
    order = pc.sort_indices(keys, sort_keys=[(n, "ascending") for n in partition_names])  # nulls last
    sorted_data = data.take(order)
    sorted_keys = sorted_data.select(partition_names)
    n = sorted_data.num_rows
    boundaries = [0]
    if n > 1:
        change = None
        for name in partition_names:
            col = sorted_keys.column(name).combine_chunks()
            a, b = col.slice(0, n - 1), col.slice(1)
            differs = pc.fill_null(pc.not_equal(a, b), True)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            differs = pc.and_(differs, pc.invert(both_null))
            change = differs if change is None else pc.or_(change, differs)
        idx = pc.indices_nonzero(change).to_pylist()
        boundaries.extend(i + 1 for i in idx)
    boundaries.append(n)
    for start, end in zip(boundaries, boundaries[1:]):
        part = sorted_data.slice(start, end - start)
        values = {name: part.column(name)[0] for name in partition_names}
        yield values, part


def discard_files(objects: ObjectStore, paths: Iterable[str], why: str) -> None:
    """Delete data files that no commit will reference, as far as storage lets us now.

    For clean-up after a failure (a refused or failed commit, an aborted
    write, a rolled-back staged operation): the caller is already handling an
    error, so a delete that fails is logged (with ``why``) rather than raised
    over it; ``gc()`` removes any file left, since nothing references it. A
    file already gone is not an error (``ObjectStore.delete``). Deletions that
    must succeed or say why (GC, purge) call ``objects.delete`` themselves.
    """
    for path in paths:
        try:
            objects.delete(path)
        except Exception as exc:  # noqa: BLE001 - best effort, see the docstring: gc() removes it later
            log.warning("could not delete %s (%s); gc will: %s", path, why, exc)


def write_files(
    objects: ObjectStore,
    location: str,
    data: pa.Table,
    schema: pa.Schema,
    partition_by: list[str],
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
) -> list[DataFile]:
    """Write ``data`` (already conformed to ``schema``) as Parquet files under ``location``.

    One or more files per partition, each at most about ``target_file_bytes``
    of Arrow data; returns their entries (nothing is committed here).
    """
    out: list[DataFile] = []
    ids = {f.name: str(field_id(f)) for f in schema}
    for values, part in partition_groups(data, partition_by):
        if part.num_rows == 0:
            continue
        rows_per_file = max(1, int(part.num_rows * target_file_bytes / max(1, part.nbytes)))
        for start in range(0, part.num_rows, rows_per_file):
            chunk = part.slice(start, rows_per_file)
            out.append(_write_one(objects, location, chunk, ids, values))
    return out


def _write_one(
    objects: ObjectStore, location: str, chunk: pa.Table, ids: dict[str, str], partition: dict[str, pa.Scalar]
) -> DataFile:
    fid = new_file_id()
    path = f"{location}/{fid}.parquet"
    sink = io.BytesIO()
    pq.write_table(with_parquet_field_ids(chunk, ids), sink, **PARQUET_WRITE_OPTIONS)
    body = sink.getvalue()
    checksum = crc32c(body)
    footer_start = footer_region_start(pq.read_metadata(pa.BufferReader(body)))
    objects.put(path, body)
    stats = {ids[name]: column_stats(chunk.column(name)) for name in chunk.column_names}
    return DataFile(
        id=fid,
        path=path,
        size=len(body),
        rows=chunk.num_rows,
        partition={ids[k]: encode_value(v) for k, v in partition.items()},
        stats=stats,
        crc32c=checksum,
        parquet_field_ids=True,
        footer_size=len(body) - footer_start,
        footer_crc32c=crc32c(body[footer_start:]),
    )


# -- the footer region: what a reader that skips bytes checks ------------------------
#
# A Parquet file is the magic "PAR1", its column chunks (pages, each behind
# its header; every writer here puts a CRC32 of the page in that header),
# then what writers put after the last chunk: page indexes (per-page
# min/max and offsets, which parquet-mr writes and Spark's reader skips
# pages by) and Bloom filters, if any, then the Thrift footer (schema,
# row groups, column statistics), its length (4 bytes) and "PAR1" again.
# Everything after the last column chunk is the *footer region*. A reader
# that skips row groups and pages trusts all of it and no page checksum
# covers it, so its size and CRC32C go in the entry: one small read at the
# end of the file checks it (the Spark plugin's reader: FileCheck.java).


def footer_region_start(metadata: pq.FileMetaData) -> int:
    """The offset where the footer region of a file with footer ``metadata`` begins.

    That is the end of its last column chunk; 4 (just after the leading
    magic) for a file of no row groups. Chunks are contiguous pages from the
    dictionary page (if any) on, ``total_compressed_size`` bytes with their
    headers, as the Parquet format defines.
    """
    end = len(_MAGIC)
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i in range(group.num_columns):
            chunk = group.column(i)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page:
                start = min(start, chunk.dictionary_page_offset)
            end = max(end, start + chunk.total_compressed_size)
    return end


def entry_from_footer(
    objects: ObjectStore, path: str, file_crc32c: int, schema: pa.Schema, partition_by: list[str]
) -> DataFile:
    """The entry of a Parquet file another writer (Spark's) put at ``path``, from its footer alone.

    Row count, column statistics and partition values come from the footer's
    row-group statistics, never from the data. Bounds are kept only where
    the footer's value converts exactly to the column's type (no float
    bounds: writers differ on NaN); a file holding more than one partition
    value is refused. ``file_crc32c`` is the whole file's CRC32C, which the
    writer computed; the footer region's size and CRC32C are computed here
    from the bytes read.

    Raises:
        CorruptDataFileError: the file is not Parquet, its footer is unreadable,
            or it places column chunks past itself.
        ValueError: the file holds more than one value of a partition column.
        FileNotFoundError / ObjectStoreError: the file is missing or the read failed.
    """
    size = objects.head(path).size
    tail = objects.get_range(path, max(0, size - _FOOTER_TRAILER), size)
    if len(tail) != _FOOTER_TRAILER or tail[4:] != _MAGIC:
        raise CorruptDataFileError(f"{path} is not a Parquet file (no footer)", path=path)
    start = max(0, size - _FOOTER_TRAILER - int.from_bytes(tail[:4], "little"))
    footer = objects.get_range(path, start, size)
    try:
        # pyarrow reads the metadata from the end of what it is given.
        metadata = pq.read_metadata(pa.BufferReader(_MAGIC + footer if start else footer))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptDataFileError(f"{path}: unreadable Parquet footer ({exc})", path=path) from exc
    region_start = footer_region_start(metadata)
    if not len(_MAGIC) <= region_start <= start:
        raise CorruptDataFileError(
            f"{path}: its footer places column chunks up to byte {region_start}, past the footer at {start}", path=path
        )
    # The bytes between the last column chunk and the footer (page indexes, Bloom filters), if any.
    region = objects.get_range(path, region_start, start) + footer if region_start < start else footer
    arrow = metadata.schema.to_arrow_schema()
    file_columns = {}
    for i, f in enumerate(arrow):
        fid = (f.metadata or {}).get(PARQUET_FIELD_ID)
        if fid is not None:
            file_columns[int(fid)] = i
    stats: dict[str, list[Any]] = {}
    partition: dict[str, Any] = {}
    for f in schema:
        fid = field_id(f)
        leaf = _leaf_index(metadata, file_columns.get(fid), arrow)
        bounds = [None, None, None] if leaf is None else _footer_bounds(metadata, leaf, f.type)
        stats[str(fid)] = bounds
        if f.name in partition_by:
            lo, hi, nulls = bounds
            if nulls == metadata.num_rows:
                partition[str(fid)] = None
            elif nulls == 0 and lo is not None and lo == hi:
                partition[str(fid)] = lo
            else:
                raise ValueError(f"{path}: holds more than one value of partition column {f.name!r}")
    name = path.rsplit("/", 1)[-1]
    return DataFile(
        id=name.removesuffix(".parquet"),
        path=path,
        size=size,
        rows=metadata.num_rows,
        partition=partition,
        stats=stats,
        crc32c=file_crc32c,
        parquet_field_ids=len(file_columns) == len(arrow),
        footer_size=len(region),
        footer_crc32c=crc32c(region),
    )


def _leaf_index(metadata: pq.FileMetaData, top: int | None, arrow: pa.Schema) -> int | None:
    """The Parquet leaf column of top-level column ``top`` if it is a primitive, else None."""
    if top is None or pa.types.is_nested(arrow.field(top).type):
        return None
    name = arrow.field(top).name
    for i in range(metadata.num_columns):
        if metadata.schema.column(i).path == name:
            return i
    return None


def _footer_bounds(metadata: pq.FileMetaData, leaf: int, t: pa.DataType) -> list[Any]:
    """``[min, max, null_count]`` of one column over every row group (None where not exactly known)."""
    lows, highs, nulls, exact = [], [], 0, has_stats(t) and not pa.types.is_floating(t)
    for g in range(metadata.num_row_groups):
        s = metadata.row_group(g).column(leaf).statistics
        if s is None or not s.has_null_count:
            return [None, None, None]
        nulls += s.null_count
        if metadata.row_group(g).num_rows == s.null_count:
            continue  # all null: no bounds to take
        if not (s.has_min_max and getattr(s, "is_min_value_exact", True) and getattr(s, "is_max_value_exact", True)):
            exact = False
            continue
        try:
            low, high = s.min, s.max
        except (OverflowError, ValueError):  # e.g. a timestamp past 9999-12-31 UTC, which Spark writes
            exact = False
            continue
        lows.append(low)
        highs.append(high)
    if not exact or not lows:
        return [None, None, nulls]
    try:
        # Footer values are Python values of one type (int, str, Decimal, date, ...),
        # whose order is the column's (str: code points, as UTF-8 bytes sort).
        column = pa.array([min(lows), max(highs)], type=t)
    except (pa.ArrowException, TypeError, ValueError):
        return [None, None, nulls]
    bounds = column_stats(column)
    return [bounds[0], bounds[1], nulls]


def with_parquet_field_ids(chunk: pa.Table, ids: dict[str, str]) -> pa.Table:
    """``chunk`` with each top-level column's catalog field id also set as its Parquet field id."""
    fields = []
    for f in chunk.schema:
        metadata = dict(f.metadata or {})
        metadata[PARQUET_FIELD_ID] = ids[f.name].encode()
        fields.append(f.with_metadata(metadata))
    return pa.Table.from_arrays(chunk.columns, schema=pa.schema(fields, metadata=chunk.schema.metadata))


# -- reading: every byte checked -----------------------------------------------------
#
# A data file is read whole (one GET), so its CRC32C is checked over exactly
# the bytes that are then decoded: a flipped byte is CorruptDataFileError
# before Parquet sees it, never a wrong answer. The footer region's CRC32C is
# checked too, so an entry whose footer checksum would fail the JVM reader
# fails here (verify, export) as well. Entries from before checksums
# (crc32c None) get the size check and Parquet's own page checksums, which
# every file written here carries; any decode failure of such a file is
# reported the same way, naming the file and the table.


def check_body(entry: DataFile, body: bytes, table: str | None = None) -> None:
    """Raise :class:`~catalog.errors.CorruptDataFileError` unless ``body`` is the file ``entry`` describes.

    Raises:
        CorruptDataFileError: ``body`` has another size than the entry's, or fails its
            CRC32C or its footer region's.
    """
    if len(body) != entry.size:
        raise CorruptDataFileError(
            f"data file {entry.path}{_of(table)} has {len(body)} bytes, its entry says {entry.size}",
            path=entry.path,
            table=table,
        )
    if entry.crc32c is not None:
        actual = crc32c(body)
        if actual != entry.crc32c:
            raise CorruptDataFileError(
                f"data file {entry.path}{_of(table)} failed its checksum "
                f"(crc32c {actual:#010x}, its entry says {entry.crc32c:#010x})",
                path=entry.path,
                table=table,
            )
    if entry.footer_size is not None:
        actual = crc32c(memoryview(body)[len(body) - entry.footer_size :])
        if actual != entry.footer_crc32c:
            raise CorruptDataFileError(
                f"data file {entry.path}{_of(table)} failed its footer checksum "
                f"(crc32c {actual:#010x} of its last {entry.footer_size} bytes, its entry says {entry.footer_crc32c:#010x})",
                path=entry.path,
                table=table,
            )


def read_body(objects: ObjectStore, entry: DataFile, table: str | None = None) -> bytes:
    """The bytes of the data file ``entry`` describes, checked (size and CRC32C).

    Raises:
        CorruptDataFileError: the bytes are not the file the entry describes.
        FileNotFoundError: the file is missing.
        ObjectStoreError: the GET failed.
    """
    body = objects.get(entry.path)
    check_body(entry, body, table)
    return body


def imported_view(data: pa.Table, entry: DataFile, schema: pa.Schema) -> pa.Table:
    """``data`` of an imported file (``entry.column_ids``) with the table's field ids, and the partition
    columns it leaves out (Hive style) filled from its entry; any other file's ``data`` as it is."""
    if entry.column_ids is None:
        return data
    fields, arrays = [], []
    for f, col in zip(data.schema, data.columns):
        fid = entry.column_ids.get(f.name)
        if fid is not None:
            fields.append(f.with_metadata({**(f.metadata or {}), FIELD_ID: fid.encode()}))
            arrays.append(col)
    present = {entry.column_ids[f.name] for f in data.schema if f.name in entry.column_ids}
    for f in schema:
        fid = str(field_id(f))
        if fid in entry.partition and fid not in present:
            value = decode_values([entry.partition[fid]], f.type)[0]
            fields.append(pa.field(f.name, f.type, metadata={FIELD_ID: fid.encode()}))
            arrays.append(pa.repeat(value, data.num_rows))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_file(
    objects: ObjectStore,
    entry: DataFile,
    schema: pa.Schema,
    columns: list[str] | None = None,
    table: str | None = None,
) -> pa.Table:
    """Read one data file as the table's current ``schema`` (matched by field id).

    ``table`` names the table in errors. Raises CorruptDataFileError (see :func:`read_body`).

    Raises:
        CorruptDataFileError: the bytes are not the file the entry describes, or
            do not decode as Parquet.
        FileNotFoundError: the file is missing.
        ObjectStoreError: the GET failed.
    """
    body = read_body(objects, entry, table)
    try:
        data = pq.read_table(pa.BufferReader(body), page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _undecodable(entry, table, exc) from exc
    return project(imported_view(data, entry, schema), schema, columns)


def read_file_batches(
    objects: ObjectStore,
    entry: DataFile,
    schema: pa.Schema,
    batch_size: int = READ_BATCH_ROWS,
    table: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream one data file as the table's current ``schema``, ``batch_size`` rows at a time.

    Decodes on the calling thread (no Arrow thread pool): meant for callers
    that already run one reader per core, such as Spark tasks, where the
    pool's hand-offs cost CPU that the other readers need. Raises
    CorruptDataFileError (see :func:`read_body`).

    Raises:
        CorruptDataFileError: the bytes are not the file the entry describes, or
            do not decode as Parquet.
        FileNotFoundError: the file is missing.
        ObjectStoreError: the GET failed.
    """
    body = read_body(objects, entry, table)
    try:
        parquet = pq.ParquetFile(pa.BufferReader(body), page_checksum_verification=True)
        batches = parquet.iter_batches(batch_size=batch_size, use_threads=False)
        for batch in batches:
            yield from project(imported_view(pa.Table.from_batches([batch]), entry, schema), schema).to_batches()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _undecodable(entry, table, exc) from exc


def read_files(
    objects: ObjectStore,
    entries: Iterable[DataFile],
    schema: pa.Schema,
    columns: list[str] | None = None,
    table: str | None = None,
) -> Iterator[pa.Table]:
    """Read each entry's data file as the table's ``schema``, one Arrow table per file, lazily.

    Raises:
        CorruptDataFileError, FileNotFoundError, ObjectStoreError: as for :func:`read_file`.
    """
    for entry in entries:
        yield read_file(objects, entry, schema, columns, table)


def _of(table: str | None) -> str:
    return "" if table is None else f" of table {table!r}"


def _undecodable(entry: DataFile, table: str | None, exc: BaseException) -> CorruptDataFileError:
    return CorruptDataFileError(
        f"data file {entry.path}{_of(table)} cannot be decoded as Parquet: {exc}", path=entry.path, table=table
    )
