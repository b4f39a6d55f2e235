"""Native tables served as Iceberg v2 tables: metadata derived from the catalog keys.

DESIGN.md §7 ("Every table is an Iceberg table to every engine"). The
catalog keys stay the source of truth; for a native (``"parquet"``) table at
a lakehouse version, :func:`derive` writes, with pyiceberg's own writers,
the Iceberg v2 metadata any engine reads with no lakekv code, under
``<table location>/metadata/`` in the lakehouse's object store (a local
directory or S3: :class:`LakeFileIO` adapts pyiceberg to it), every path in
it an absolute ``file://`` or ``s3://`` URI.

What is derived, per table:

* one **snapshot per retained version where the table changed** (any
  operation naming its id in ``lake.history()``: appends, overwrites,
  deletes, compactions, schema and property changes, its creation), from
  the lakehouse's data floor on (:mod:`catalog.retention`; the last change
  at or below the floor is kept too, since ``lake.at(version=floor)`` reads
  it). Its id is :func:`snapshot_id` (a pure function of table id and
  version), its sequence number is the lakehouse version, its timestamp
  the version's commit timestamp (the storage's, as ``lake.at(timestamp=)``
  uses, rounded up to the millisecond: :func:`timestamp_ms`), its schema
  the table's schema at that version;
* per snapshot, **one manifest list** ``snap-<version>-<snapshot id>.avro``
  and the manifests it names. A version that adds N files writes one
  manifest ``<version>-<base>-m0.avro`` of N entries (``<base>``: the
  previous change it was derived on); the manifests of the previous
  snapshot are reused. A version that removes files rewrites only the
  manifests that held them (``<version>-<base>-m<k>.avro``, the kept files as
  EXISTING entries with their original snapshot and sequence numbers); a
  manifest whose every file went is dropped. A change of a column's type
  (widening) rewrites every manifest, since bounds are serialised per type;
* one ``metadata.json`` per (last change version, data floor), written for
  the versions asked for (a first derivation goes through every retained
  change but writes only the one asked for):
  ``<version>-<floor>.metadata.json``: every retained snapshot,
  ``snapshot-log``, ``refs.main``, ``current-snapshot-id``, every schema a
  retained snapshot uses (id = the table's schema version; native field ids
  kept, so renamed, added and dropped columns read right), an identity
  partition spec over the native partition columns, the table's properties.
  Data file entries carry value and null counts and lower/upper bounds
  (Iceberg's single-value serialisation) from the native file entries
  (float bounds are left out, as native footers do: NaN).

File names are a pure function of (table location, version[, base,
group, floor]) and say what the file holds, and so are the bytes (the Avro
sync marker is derived from the path, not random), so any process derives
identical metadata and builds on what another already published. Every
object is one atomic put, manifests before the list naming them, lists
before the ``metadata.json``, so a crash of the process or a write fault
leaves files the next derivation reuses or writes again. The derived files
are a cache: losing any of them loses nothing (a state whose
``metadata.json`` is gone is derived again); GC (:func:`collect`) removes
those of versions below the data floor and of dropped tables.

Being a cache, derived files are put **without fsync** on a local store
(two fsyncs a file were most of a derivation's time), so a crash of the
machine may leave any of them torn, in any order. None is ever served
torn: each ``metadata.json`` records, in the property
``lakekv.derived.digests``, a digest of every manifest list and manifest
its snapshots name; a state read back from the files (a new process: the
crash ended every old one) is used only if its ``metadata.json`` parses
and every file matches its digest, else it is derived again and its files
are written anew. A derivation writes every list and manifest it makes
(it never adopts one no verified ``metadata.json`` vouches for).

Not served yet: nested columns (their children carry no field ids in
native Parquet files) and ``timestamp[ns]`` columns (no Iceberg v2 type)
raise ``ValueError``.

When derivation runs: **lazily, at the first load of a version** (this
module is called by ``Table.metadata_location``, ``lakekv lake URL iceberg``
and the REST service's ``loadTable``), never on the commit path, so native
appends cost exactly what they did. A load derives for the version it reads
(the handle's newest unless told otherwise), so the first load after a
commit sees it. Each derivation builds on the newest earlier derived state
(this process's cache, else the derived files themselves): right after an
append that is one manifest, one manifest list and one ``metadata.json``,
and the files the append added are found through the planning index
(:func:`files_added`: the group its commit wrote), so the cost is the
table's group summaries and the files added, not every file key (a
removal likewise, on a table whose every group has its pack:
:func:`files_changed`). Where the index cannot tell (an older layout, a
commit between the two changes whose history summaries were cut and so may
not name the table, counts that differ from the summaries') the live file
keys of both versions are compared, as before. A first derivation goes through
every retained change, but scans the file keys once for the newest run of
changes that removed no file (the keys' revisions say which change added
each file; see :class:`_Appended`), and once per change before it.
"""

from __future__ import annotations

import decimal
import hashlib
import io
import json
import math
import threading
import uuid
from collections import OrderedDict
from contextlib import contextmanager
from copy import copy
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterable, Iterator, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException, pyarrow_to_schema
from pyiceberg.manifest import (
    UNASSIGNED_SEQ,
    DataFile as IcebergDataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.conversions import to_bytes
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, TableMetadataV2
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import PrimitiveType

from catalog import file_index, keys, names, retention
from catalog.access import FILE_CACHE, CatalogReader
from catalog.context import LakeContext
from catalog.datafiles import DataFile
from catalog.errors import NoSuchTableError
from catalog.records import TableDef
from catalog.schema import FIELD_ID, PARQUET_FIELD_ID, field_id
from kvstore.objstore.base import ObjectStore
from kvstore.objstore import LocalStore



class LakeHandle(Protocol):
    """What :func:`derive` needs of a :class:`catalog.Lakehouse` (named so, not imported: the lakehouse imports tables, which import this)."""

    context: LakeContext

__all__ = ["Derived", "LakeFileIO", "METADATA_DIR", "collect", "derive", "derive_table", "is_derived_path", "snapshot_id"]

# Derived files live here under the table's location (``data/<table id>``).
METADATA_DIR: Final = "metadata"
# Iceberg numbers partition fields from 1000 (the spec's convention).
_PARTITION_FIELD_START: Final = 1000
# Avro compression of manifests and manifest lists: what pyiceberg and Java write by default.
_AVRO_CODEC: Final = "deflate"
# History pages: small first (the last change is usually the head), then larger.
_FIRST_PAGE: Final = 8
_PAGE: Final = 256
# Derived states kept in memory per process (each holds a table's live file ids).
_CACHE_ENTRIES: Final = 64


def snapshot_id(table_id: str, version: int) -> int:
    """The Iceberg snapshot id of native table ``table_id`` at lakehouse version ``version``.

    A positive int63, a pure function of its arguments (BLAKE2b of both), so
    every process derives the same ids.

    Raises:
        TypeError: ``table_id`` is not a str or ``version`` not an int.
        ValueError: ``version`` is negative.
    """
    if not isinstance(table_id, str):
        raise TypeError(f"table_id must be a str, not {type(table_id).__name__}")
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int, not {type(version).__name__}")
    if version < 0:
        raise ValueError(f"version must be >= 0, got {version}")
    digest = hashlib.blake2b(f"{table_id}\x00{version}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") & (2**63 - 1)) or 1


@dataclass(frozen=True)
class Derived:
    """A native table's derived Iceberg metadata at one lakehouse version."""

    metadata_location: str  # absolute URI of the metadata.json
    metadata: TableMetadata
    table_id: str
    version: int  # the lakehouse version asked for
    snapshot_version: int  # the version of its current snapshot: the table's last change at or before ``version``


# -- pyiceberg over the lakehouse's object store ---------------------------------------


def base_uri(objects: ObjectStore) -> str:
    """The absolute URI of the object store's root (``file:///...`` or ``s3://bucket/prefix``), no trailing ``/``."""
    return str(objects.url).split("?", 1)[0].rstrip("/")


class _Input(InputFile):
    def __init__(self, io_: LakeFileIO, location: str) -> None:
        super().__init__(location)
        self._io = io_

    def __len__(self) -> int:
        return self._io.objects.head(self._io.path_of(self.location)).size

    def exists(self) -> bool:
        return self._io.exists(self.location)

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._io.objects.get(self._io.path_of(self.location)))


# Avro's sync marker: the 16 bytes ending the header and every block.
_SYNC_SIZE: Final = 16


def content_digest(data: bytes) -> str:
    """The digest a derived ``metadata.json`` records of each Avro file it names (torn-file detection, not security)."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


class _Sink(io.BytesIO):
    """Bytes written through pyiceberg, put as one object when closed (a put is atomic).

    An Avro file's random sync marker is replaced by one derived from its
    path, so a derived file's bytes are a pure function of what it holds
    (two processes write the same bytes, and the digests recorded of it stay
    true whoever wrote it last).
    """

    def __init__(self, fileio: LakeFileIO, path: str) -> None:
        super().__init__()
        self._fileio = fileio
        self._path = path
        self._put = False

    def close(self) -> None:
        if not self.closed and not self._put:
            self._put = True
            data = self.getvalue()
            if self._path.endswith(".avro") and len(data) >= _SYNC_SIZE:
                # pyiceberg's writer ends the header and every block with its marker.
                marker = hashlib.blake2b(self._path.encode(), digest_size=_SYNC_SIZE).digest()
                data = data.replace(data[-_SYNC_SIZE:], marker)
            self._fileio.writes.put(self._path, data)
            self._fileio.digests[self._path] = content_digest(data)
        super().close()


class _Output(OutputFile):
    def __init__(self, io_: LakeFileIO, location: str) -> None:
        super().__init__(location)
        self._io = io_
        self._sink: _Sink | None = None

    def __len__(self) -> int:
        if self._sink is not None:
            return len(self._sink.getbuffer()) if not self._sink.closed else self._io.objects.head(self._io.path_of(self.location)).size
        return self._io.objects.head(self._io.path_of(self.location)).size

    def exists(self) -> bool:
        return self._io.exists(self.location)

    def to_input_file(self) -> InputFile:
        return _Input(self._io, self.location)

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"{self.location} already exists")
        self._sink = _Sink(self._io, self._io.path_of(self.location))
        return self._sink


_unsynced_stores: dict[str, LocalStore] = {}


def _unsynced(objects: ObjectStore) -> ObjectStore:
    """``objects`` without fsyncs where it is a local directory (puts stay atomic); any other store as it is."""
    if type(objects) is not LocalStore or not objects.fsync:
        return objects
    with _lock:
        store = _unsynced_stores.get(str(objects.root))
        if store is None:
            store = _unsynced_stores[str(objects.root)] = LocalStore(objects.root, fsync=False, create=False)
        return store


class LakeFileIO(FileIO):
    """pyiceberg's FileIO over a lakehouse's object store: locations are absolute URIs under its root.

    Args:
        objects: the lakehouse's object store.
        durable: False for derived files (a cache): on a local directory they
            are put without fsync, so a crash of the machine may leave one
            torn; a derived ``metadata.json`` records the digest of every
            Avro file it names, and a state read back is checked against
            them before it is served (:func:`_known_state`).
    """

    def __init__(self, objects: ObjectStore, durable: bool = True) -> None:
        super().__init__()
        self.objects = objects
        self.writes = objects if durable else _unsynced(objects)
        self.base = base_uri(objects)
        self.digests: dict[str, str] = {}  # object path -> content_digest of each file put through it

    def uri(self, path: str) -> str:
        """The absolute URI of object ``path``."""
        return f"{self.base}/{path}"

    def path_of(self, location: str) -> str:
        """The object path of absolute URI ``location``.

        Raises:
            ValueError: ``location`` is not under the store's root.
        """
        prefix = self.base + "/"
        if not location.startswith(prefix):
            raise ValueError(f"{location!r} is not under the lakehouse's root {self.base!r}")
        return location[len(prefix) :]

    def exists(self, location: str) -> bool:
        """Whether an object is at ``location``."""
        try:
            self.objects.head(self.path_of(location))
        except FileNotFoundError:
            return False
        return True

    def new_input(self, location: str) -> InputFile:
        """A reader of the object at absolute URI ``location`` (read whole on open)."""
        return _Input(self, location)

    def new_output(self, location: str) -> OutputFile:
        """A writer of the object at absolute URI ``location`` (put as one object when closed)."""
        return _Output(self, location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        """Delete the object at ``location``.

        Raises:
            ValueError: ``location`` is not under the store's root.
        """
        where = location if isinstance(location, str) else location.location
        self.objects.delete(self.path_of(where))


# -- naming: a pure function of (table location, version[, group, floor]) -------------------


def metadata_dir(definition: TableDef) -> str:
    """The object path under which a native table's derived files live."""
    return f"{definition.location}/{METADATA_DIR}"


def _manifest_list_path(definition: TableDef, version: int) -> str:
    return f"{metadata_dir(definition)}/snap-{version:020d}-{snapshot_id(definition.id, version)}.avro"


def _manifest_path(definition: TableDef, version: int, base: int | None, group: int) -> str:
    # The base (the previous change it was derived on, "x" for none) is in the
    # name because it decides the content: a file's name alone says what it
    # holds, so a manifest that exists can always be reused.
    on = "x" if base is None else f"{base:020d}"
    return f"{metadata_dir(definition)}/{version:020d}-{on}-m{group}.avro"


def _metadata_path(definition: TableDef, version: int, floor: int) -> str:
    return f"{metadata_dir(definition)}/{version:020d}-{floor:020d}.metadata.json"


def _version_of(name: str) -> int | None:
    """The version a derived file's name says it belongs to, or None for a name not made here."""
    stem = name.removeprefix("snap-")
    head = stem.split("-", 1)[0].split(".", 1)[0]
    return int(head) if len(head) == 20 and head.isdigit() else None


# -- schema, partition spec, file entries --------------------------------------------------


def iceberg_schema(schema: pa.Schema, schema_id: int) -> IcebergSchema:
    """The Iceberg schema of a native Arrow schema: same names, types and field ids.

    Raises:
        ValueError: a column's type has no Iceberg equivalent (or is nested: its
            children carry no field ids in native tables).
    """
    fields = []
    for f in schema:
        if pa.types.is_nested(f.type):
            raise ValueError(f"column {f.name!r} has nested type {f.type}: not yet served as Iceberg")
        if pa.types.is_uint32(f.type) or pa.types.is_uint64(f.type):
            # pyiceberg maps uint32 to Iceberg int, which its values overflow; uint64 has no Iceberg type.
            raise ValueError(f"column {f.name!r} has type {f.type}, which no Iceberg type holds exactly")
        metadata = dict(f.metadata or {})
        metadata[PARQUET_FIELD_ID] = metadata[FIELD_ID]
        fields.append(f.with_metadata(metadata))
    try:
        converted = pyarrow_to_schema(pa.schema(fields), format_version=2)
    except (TypeError, ValueError, UnsupportedPyArrowTypeException) as exc:
        raise ValueError(f"schema has no Iceberg v2 equivalent: {exc}") from exc
    return IcebergSchema(*converted.fields, schema_id=schema_id)


def _partition_spec(definition: TableDef) -> PartitionSpec:
    assert definition.schema is not None
    columns = {field_id(f): f.name for f in definition.schema}
    return PartitionSpec(
        *[
            PartitionField(source_id=fid, field_id=_PARTITION_FIELD_START + i, transform=IdentityTransform(), name=columns[fid])
            for i, fid in enumerate(definition.partition_ids)
        ],
        spec_id=0,
    )


_MICROS: Final = {"s": 1_000_000, "ms": 1_000, "us": 1}
_TIME_MICROS: Final = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _none(encoded: Any) -> Any:
    return None


def _same(encoded: Any) -> Any:
    return encoded


def _scaled(scale: int) -> Callable[[Any], Any]:
    return lambda encoded: None if encoded is None else int(encoded) * scale


def _converter(t: pa.DataType) -> Callable[[Any], Any]:
    """How an encoded native statistic or partition value (``catalog.datafiles.encode_value``) of Arrow type
    ``t`` becomes Iceberg's Python value of the column's type (None where it has no exact one), resolved once
    per column: a first derivation converts every bound of every file."""
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return _same
    if pa.types.is_floating(t):
        return _none  # NaN makes float bounds unsafe; native footers keep none either
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        import base64

        return lambda encoded: None if encoded is None else base64.b64decode(encoded)
    if pa.types.is_date32(t):
        return _scaled(1)
    if pa.types.is_date64(t):
        return lambda encoded: None if encoded is None else int(encoded) // 86_400_000
    if pa.types.is_timestamp(t):
        scale = _MICROS.get(t.unit)
        return _none if scale is None else _scaled(scale)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        scale = _TIME_MICROS.get(t.unit)
        return _none if scale is None else _scaled(scale)
    if pa.types.is_decimal(t):
        return lambda encoded: None if encoded is None else decimal.Decimal(encoded)
    return _none


class _EntryMaker:
    """Turns native file entries into Iceberg data files for one schema (its per-column work done once)."""

    def __init__(self, base: str, schema: pa.Schema, iceberg: IcebergSchema, partition_ids: list[int]) -> None:
        self.base = base
        # field id (as the entries key it) -> (field id, value converter, bound serialiser and Iceberg
        # type, or None for no bounds); to_bytes's dispatch resolved once per column.
        self.columns: dict[str, tuple[int, Callable[[Any], Any], tuple[Callable[..., bytes], PrimitiveType] | None]] = {}
        for f in schema:
            fid = field_id(f)
            kind = iceberg.find_field(fid).field_type
            serialise = (to_bytes.dispatch(type(kind)), kind) if isinstance(kind, PrimitiveType) else None
            self.columns[str(fid)] = (fid, _converter(f.type), serialise)
        self.partition = [(str(fid), self.columns[str(fid)][1]) for fid in partition_ids]

    def __call__(self, entry: DataFile) -> IcebergDataFile:
        """``entry`` as an Iceberg data file: absolute path, partition, value and null counts, bounds."""
        value_counts: dict[int, int] = {}
        null_counts: dict[int, int] = {}
        lower: dict[int, bytes] = {}
        upper: dict[int, bytes] = {}
        for key, (low, high, nulls) in entry.stats.items():
            column = self.columns.get(key)
            if column is None:
                continue  # a column dropped since the file was written
            fid, convert, serialise = column
            value_counts[fid] = entry.rows
            if nulls is not None:
                null_counts[fid] = int(nulls)
            if serialise is None:
                continue  # nested columns keep no statistics
            lo, hi = convert(low), convert(high)
            if lo is not None and hi is not None:
                write, kind = serialise
                lower[fid] = write(kind, lo)
                upper[fid] = write(kind, hi)
        partition = Record(*[convert(entry.partition.get(key)) for key, convert in self.partition])
        return IcebergDataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"{self.base}/{entry.path}",
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=entry.rows,
            file_size_in_bytes=entry.size,
            value_counts=value_counts,
            null_value_counts=null_counts,
            lower_bounds=lower,
            upper_bounds=upper,
            sort_order_id=0,
        )


def _type_signature(schema: pa.Schema) -> dict[int, str]:
    return {field_id(f): str(f.type) for f in schema}


# -- derivation ------------------------------------------------------------------------------


@dataclass
class _Manifest:
    """One manifest of a derived snapshot and the object paths of the data files it holds (None: not read yet)."""

    file: ManifestFile
    paths: frozenset[str] | None = None


@dataclass
class _State:
    """A table's derived state at one change version: what the next version builds on."""

    derived: Derived
    manifests: list[_Manifest]
    files: _FileKeys | None  # the live files' keys and entries (None: not scanned yet)
    total_records: int
    types: dict[int, str]  # the column types the manifests' bounds were written for
    digests: dict[str, str]  # file name -> content_digest of every Avro file its retained snapshots name
    published: bool = True  # whether its metadata.json is written (intermediate states need not be)


@dataclass(frozen=True)
class _FileKeys:
    """A table's live file keys and their stored entries at one version, as Arrow arrays.

    Two versions are compared with Arrow's ``is_in`` and only the entries
    that differ are decoded: what keeps a derivation after one append cheap
    on a table of 10,000 files.
    """

    keys: pa.Array
    values: pa.Array | pa.ChunkedArray

    def entries(self, mask: pa.Array | None = None) -> list[DataFile]:
        """The decoded entries (those where ``mask`` is true), through the process's entry cache."""
        keys_, values = (self.keys, self.values) if mask is None else (self.keys.filter(mask), self.values.filter(mask))
        return [FILE_CACHE.get(k, v) for k, v in zip(keys_.to_pylist(), values.to_pylist())]

    def not_in(self, other: _FileKeys) -> pa.Array:
        """A mask of this version's keys that ``other`` lacks."""
        return pc.invert(pc.is_in(self.keys, value_set=other.keys))


def _total_files(state: _State | None) -> int:
    """The data files a derived state's snapshot says its table holds (every derived summary says so)."""
    snapshot = None if state is None else state.derived.metadata.current_snapshot()
    summary = None if snapshot is None else snapshot.summary
    return 0 if summary is None else int(str(summary.get("total-data-files", "0")))


def _total_records(snapshot: Snapshot) -> int:
    """The rows a derived snapshot says its table holds (every derived summary says so)."""
    summary = snapshot.summary
    return 0 if summary is None else int(str(summary.get("total-records", "0")))


def _file_keys(ctx: LakeContext, table_id: str, version: int) -> _FileKeys:
    with ctx.store.at(version=version) as snap:
        return _file_keys_in(snap, table_id)


def _file_keys_in(snap: Any, table_id: str) -> _FileKeys:
    batches = list(snap.scan_batches(prefix=keys.table_files(table_id)))
    if not batches:
        return _FileKeys(pa.array([], pa.binary()), pa.chunked_array([], pa.binary()))
    table = pa.Table.from_batches(batches)
    # Keys are compared whole (is_in's value set); the values, only filtered,
    # stay in their scan batches: no copy of every entry.
    return _FileKeys(table.column("key").combine_chunks(), table.column("value"))


@dataclass(frozen=True)
class _Change:
    """A version that changed the table, and what its operations' summaries say it did to the table's files."""

    version: int
    timestamp_ms: int
    changes_files: bool
    # The seqs of the version's commits that name the table (a file key's
    # revision is the seq of the commit that wrote it), and the files those
    # commits' summaries say they added (None: some operation gave no count,
    # or said it removed files).
    seqs: frozenset[int] = frozenset()
    files_added: int | None = None
    # The files those summaries say were added and removed (None: some
    # operation that changes files gave no count).
    counts: tuple[int, int] | None = None
    # Whether a commit after this change, up to and including the next
    # newer change the walk yielded, had its summaries cut to fit the root
    # file (transactions.bounded): that commit may have changed the table's
    # files without naming it, so the newer change's summaries do not tell
    # all that changed since this one.
    cut_above: bool = False


def _files_added(ops: list[dict[str, Any]]) -> int | None:
    """How many files ``ops`` added, if their summaries say so and say none was removed."""
    added = 0
    for op in ops:
        if "files_added" in op or "files_removed" in op:
            if op.get("files_removed"):
                return None
            added += int(op.get("files_added") or 0)
        elif op.get("kind") not in _NO_FILE_CHANGES:
            return None
    return added


def _file_counts(ops: list[dict[str, Any]]) -> tuple[int, int] | None:
    """How many files ``ops`` added and removed, if their summaries say so."""
    added = removed = 0
    for op in ops:
        if "files_added" in op or "files_removed" in op:
            added += int(op.get("files_added") or 0)
            removed += int(op.get("files_removed") or 0)
        elif op.get("kind") not in _NO_FILE_CHANGES:
            return None
    return added, removed


# Operations whose history summaries carry no file counts because they change
# no data files. Any other operation without counts is treated as changing
# files (the live file keys are compared).
# The kind of the history entry that stands for the operations a commit's
# summaries were cut to (transactions.bounded): it names no table.
_CUT_SUMMARIES: Final = "more"
_NO_FILE_CHANGES: Final = frozenset({"create_table", "rename_table", "update_schema", "update_properties", "commit_metadata", "check_read"})


def changes_files(ops: list[dict[str, Any]]) -> bool:
    """Whether a version's history operations (for one table) added or removed data files."""
    for op in ops:
        if "files_added" in op or "files_removed" in op:
            if op.get("files_added") or op.get("files_removed"):
                return True
        elif op.get("kind") not in _NO_FILE_CHANGES:
            return True
    return False


_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str, int, int], _State] = OrderedDict()


def _cached(key: tuple[str, str, int, int]) -> _State | None:
    with _lock:
        state = _cache.get(key)
        if state is not None:
            _cache.move_to_end(key)
        return state


def _remember(key: tuple[str, str, int, int], state: _State) -> None:
    with _lock:
        _cache[key] = state
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)


def _forget_table(base: str, table_id: str) -> None:
    with _lock:
        for key in [k for k in _cache if k[0] == base and k[1] == table_id]:
            del _cache[key]


def derive(lake: LakeHandle, name: str, version: int | None = None) -> Derived:
    """The Iceberg v2 metadata of native table ``name`` at lakehouse ``version`` (None: the handle's newest).

    Writes what is missing of it (see the module docstring) and returns
    where its ``metadata.json`` is and what it says.

    Raises:
        TypeError: ``name`` is not a str or ``version`` not an int.
        ValueError: a malformed name, a version past the newest, or a table that is not native.
        NoSuchTableError: no such table at that version.
        SnapshotTooOldError: ``version`` is below the lakehouse's data floor.
    """
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise TypeError(f"version must be an int or None, not {type(version).__name__}")
    ns, short = names.split_table_name(name)
    ctx = lake.context
    at = ctx.store.version if version is None else version
    if at < 0 or at > ctx.store.version:
        raise ValueError(f"version {at} is not a lakehouse version (the newest is {ctx.store.version})")
    retention.check_readable(ctx.store, at)
    with ctx.store.at(version=at) as snap:
        _, definition = CatalogReader(snap).require_table(ns, short)
    return derive_table(ctx, definition.id, at)


def derive_table(ctx: LakeContext, table_id: str, version: int) -> Derived:
    """As :func:`derive`, for the table of id ``table_id`` at ``version`` (what ``Table.metadata_location`` calls).

    Raises:
        ValueError: the table is not native.
        NoSuchTableError: no table of that id at ``version``.
        SnapshotTooOldError: ``version`` is below the lakehouse's data floor.
    """
    store = ctx.store
    retention.check_readable(store, version)
    floor = retention.floor(store)
    fileio = LakeFileIO(ctx.objects, durable=False)
    with store.at(version=version) as snap:
        definition = CatalogReader(snap).table_def(table_id)
    if definition is None:
        raise NoSuchTableError(f"no table of id {table_id!r} at lakehouse version {version}")
    if definition.format != "parquet":
        raise ValueError(
            f"table {table_id!r} has format {definition.format!r}: only native tables have derived Iceberg metadata"
        )
    # Newest first: the table's changes down to the newest one whose derived state is known.
    pending: list[_Change] = []
    base: _State | None = None
    base_change: _Change | None = None
    for change in _changes(ctx, table_id, version, floor):
        base = _known_state(ctx, fileio, definition, change.version, floor)
        if base is not None:
            base_change = change
            break
        pending.append(change)
    if base is not None and not pending:
        return _at_version(base, version, fileio)
    if not pending:
        raise NoSuchTableError(f"table {table_id!r} has no retained version at or before {version}")
    state = base
    appended = _Appended.scan(ctx, table_id, pending, base)
    older = base_change
    for change in reversed(pending):
        # Whether the change's summaries tell all that changed since the previous one.
        told = older is not None and not older.cut_above
        state = _derive_change(ctx, fileio, table_id, change, state, floor, appended, told)
        older = change
    assert state is not None
    return _at_version(state, version, fileio)


def _at_version(state: _State, version: int, fileio: LakeFileIO) -> Derived:
    """The derived metadata of ``state`` as asked for at ``version``, its metadata.json written if it is not yet."""
    d = state.derived
    if not state.published:
        # No existence check: the walk found no such file, and a racing
        # process can only have written the same bytes.
        ToOutputFile.table_metadata(d.metadata, fileio.new_output(d.metadata_location), overwrite=True)
        state.published = True
    return d if d.version == version else Derived(d.metadata_location, d.metadata, d.table_id, version, d.snapshot_version)


def timestamp_ms(timestamp: float) -> int:
    """A version's Iceberg timestamp: the least whole millisecond ``M`` with ``timestamp <= M / 1000``.

    So for every millisecond ``T``, Iceberg's ``TIMESTAMP AS OF T`` (the
    newest snapshot stamped at or before ``T``) and ``lake.at(timestamp=T /
    1000)`` (the newest version committed at or before it) agree. Rounding
    down instead would stamp a version before the instant it committed.
    """
    m = math.ceil(timestamp * 1000)
    while (m - 1) / 1000 >= timestamp:  # the float product may round up past it
        m -= 1
    while m / 1000 < timestamp:
        m += 1
    return m


def _changes(ctx: LakeContext, table_id: str, version: int, floor: int) -> Iterator[_Change]:
    """The table's changes at or before ``version``, newest first, down to its creation or the floor.

    The table's state at the floor is kept (``lake.at(version=floor)`` reads
    it): the walk ends at the first change at or below the floor, and if
    the floor itself changed nothing of the table, the floor stands in for
    the older change that made that state (so the walk never goes below
    the floor). Likewise the oldest version the store still has stands in
    when the walk runs out of versions (the engine's own retention).
    """
    start: int | None = version
    page = _FIRST_PAGE
    oldest: Any = None
    cut = False  # a cut summary since (and at) the last change yielded
    while start is not None and start >= 0:
        infos = ctx.store.history(limit=page, start=start)
        if not infos:
            break
        for info in infos:
            ops, seqs, cut_here = [], set(), False
            for commit in info.commits:
                every = (commit.get("summary") or {}).get("ops") or []
                cut_here = cut_here or any(op.get("kind") == _CUT_SUMMARIES for op in every)
                mine = [op for op in every if op.get("table_id") == table_id]
                if mine and isinstance(commit.get("seq"), int):
                    seqs.add(commit["seq"])
                ops.extend(mine)
            if ops:
                yield _Change(
                    info.version, timestamp_ms(info.timestamp), changes_files(ops), frozenset(seqs), _files_added(ops), _file_counts(ops), cut
                )
                cut = cut_here
                if info.version <= floor or any(op.get("kind") == "create_table" for op in ops):
                    return
            elif info.version <= floor:
                yield _Change(info.version, timestamp_ms(info.timestamp), True, cut_above=cut)
                return
            else:
                cut = cut or cut_here
            oldest = None if ops else info  # the oldest version seen since the last change
        last = infos[-1].version
        start = last - 1 if last > 0 and len(infos) == page else None
        page = _PAGE
    if oldest is not None:
        yield _Change(oldest.version, timestamp_ms(oldest.timestamp), True, cut_above=cut)


def _known_state(ctx: LakeContext, fileio: LakeFileIO, definition: TableDef, version: int, floor: int) -> _State | None:
    """The derived state of the table at change ``version`` if this process or the derived files know it."""
    key = (base_uri(ctx.objects), definition.id, version, floor)
    state = _cached(key)
    if state is not None:
        if not state.published or fileio.exists(state.derived.metadata_location):
            return state
        # Its files were lost (a cache, deleted by hand or by GC): this
        # process's states of the table may name lost manifests too.
        _forget_table(key[0], definition.id)
    location = fileio.uri(_metadata_path(definition, version, floor))
    # Derived files are put without fsync: after a crash of the machine any
    # of them may be torn. A state read back is served only if its
    # metadata.json parses and every Avro file it names has the digest it
    # recorded; otherwise it is derived again (and its files written anew).
    directory = metadata_dir(definition)
    try:
        metadata = TableMetadataUtil.parse_raw(fileio.objects.get(fileio.path_of(location)).decode())
        snapshot = metadata.current_snapshot()
        if snapshot is None or snapshot.sequence_number != version:
            return None  # not a file this module wrote: derive it again
        digests = {str(k): str(v) for k, v in json.loads(metadata.properties[_DIGESTS_PROPERTY]).items()}
        contents = {}
        for name, digest in digests.items():
            contents[name] = fileio.objects.get(f"{directory}/{name}")
            if content_digest(contents[name]) != digest:
                return None  # torn or replaced: derive it again
        if any(s.manifest_list.rsplit("/", 1)[-1] not in digests for s in metadata.snapshots):
            return None
        listed = contents[snapshot.manifest_list.rsplit("/", 1)[-1]]
        manifests = [_Manifest(m) for m in read_manifest_list(_Bytes(snapshot.manifest_list, listed))]
        if any(m.file.manifest_path.rsplit("/", 1)[-1] not in digests for m in manifests):
            return None
    except FileNotFoundError:
        return None  # lost (derived files are a cache): derive it again
    except (ValueError, KeyError, AttributeError, IcebergValidationError):
        return None  # a torn metadata.json (or one without digests): derive it again
    types = json.loads(metadata.properties.get(_TYPES_PROPERTY, "{}"))
    state = _State(
        derived=Derived(location, metadata, definition.id, version, version),
        manifests=manifests,
        files=None,
        total_records=_total_records(snapshot),
        types={int(k): v for k, v in types.items()},
        digests=digests,
    )
    _remember(key, state)
    return state


# The column types the current snapshot's manifest bounds were written for
# (a derived property: a widened column rewrites every manifest).
_TYPES_PROPERTY: Final = "lakekv.derived.column-types"
# JSON {file name: content_digest} of every manifest list and manifest the
# retained snapshots name (a derived property: how a torn file is caught).
_DIGESTS_PROPERTY: Final = "lakekv.derived.digests"


class _Bytes(InputFile):
    """Bytes already read, as pyiceberg's input file."""

    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


class _Appended:
    """The files the newest run of append-only changes added, from one scan of the newest one's file keys.

    A first derivation goes through every retained change: scanning the
    file keys at each (10,000 keys at the last of 100 appends) was a
    quarter of its time. When no change after some point removed a file
    (their summaries say so), every file live then is live at the newest
    change too, and the revision of its key (the seq of the commit that
    wrote it) says which change added it: one scan serves them all. Each
    change's share is checked against the count its summaries give; a
    change whose share differs is derived by scanning, as before.
    """

    def __init__(self, newest: int, by_seq: dict[int, list[tuple[bytes, bytes]]], files: _FileKeys) -> None:
        self.newest = newest
        self.by_seq = by_seq
        self.files = files  # the newest change's file keys

    @classmethod
    def scan(cls, ctx: LakeContext, table_id: str, pending: list[_Change], base: _State | None) -> _Appended | None:
        """One scan for the append-only changes at the newest end of ``pending`` (newest first), if two or more."""
        run = 0
        for change in pending:
            if change.files_added is None:
                break
            run += 1
        if base is None:
            run = min(run, len(pending) - 1)  # the first change is derived from a scan of its own
        if run < 2:
            return None
        # The state the run builds on: every key written after it must be one a change of the run wrote. A
        # commit whose summary was cut to fit the root file (transactions.bounded) may not name the table.
        before = pending[run].version if run < len(pending) else base.derived.snapshot_version  # type: ignore[union-attr]
        with ctx.store.at(version=before) as snap:
            before_seq = snap.seq
        run_seqs = frozenset().union(*(change.seqs for change in pending[:run]))
        by_seq: dict[int, list[tuple[bytes, bytes]]] = {}
        keys_: list[bytes] = []
        values: list[bytes] = []
        with ctx.store.at(version=pending[0].version) as snap:
            for key, value, revision in snap.scan_with_revision(prefix=keys.table_files(table_id)):
                by_seq.setdefault(revision, []).append((key, value))
                keys_.append(key)
                values.append(value)
        if any(seq > before_seq and seq not in run_seqs for seq in by_seq):
            return None  # files no change of the run says it added: scan each change
        files = _FileKeys(pa.array(keys_, pa.binary()), pa.array(values, pa.binary()))
        return cls(pending[0].version, by_seq, files)

    def added(self, change: _Change) -> list[DataFile] | None:
        """The files ``change`` added, or None if this scan cannot tell (its count differs from the summaries')."""
        if change.files_added is None or change.version > self.newest:
            return None
        pairs = [pair for seq in sorted(change.seqs) for pair in self.by_seq.get(seq, ())]
        if len(pairs) != change.files_added:
            return None  # an entry rewritten or removed since: scan this change's keys
        return [FILE_CACHE.get(k, v) for k, v in pairs]


def files_added(snap: Any, table_id: str, seqs: frozenset[int], since: int, count: int) -> list[tuple[bytes, bytes]] | None:
    """The file keys and entries the commits ``seqs``, which removed no file, added to the table, through its planning index, or None.

    Every commit that adds files writes them a file group of fresh id
    (:mod:`catalog.file_index`: ``grp/<group>`` and a ``gfile/`` member key
    per file), so the groups whose summary's revision is one of ``seqs``
    hold exactly the files those commits added: reading the table's group
    summaries and those groups' members costs the groups and the files
    added, not every file of the table (a million-file table has a
    thousand groups). ``snap`` is the view at the commits' version,
    ``since`` the seq of the previous change's view, ``count`` the files
    the commits' summaries say they added.

    None (the caller compares the live file keys instead) when the index
    cannot tell: a group written since ``since`` by a commit not in
    ``seqs`` (a summary rewritten by a removal, or a commit whose
    summaries left the table out), a member with no live file entry, or
    a number of files other than ``count`` (files added by code that
    wrote no index).
    """
    prefix = keys.file_groups(table_id)
    groups = []
    for key, _, revision in snap.scan_with_revision(prefix=prefix):
        if revision > since:
            if revision not in seqs:
                return None
            groups.append(key[len(prefix) :].decode())
    pairs = []
    for group in groups:
        members = keys.group_files(table_id, group)
        for key, _ in snap.scan(prefix=members):
            file_key = keys.table_file(table_id, key[len(members) :].decode())
            value = snap.get(file_key)
            if value is None:
                return None
            pairs.append((file_key, value))
            if len(pairs) > count:
                return None
    return pairs if len(pairs) == count else None


def files_changed(
    old: Any, new: Any, table_id: str, seqs: frozenset[int], counts: tuple[int, int]
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]] | None:
    """The file keys and entries the commits ``seqs`` added and removed (old to new), through the planning index, or None.

    For a table whose every group has its pack (:data:`file_index.PACKED`
    at both views) a removal rewrites the summary of each group it takes
    files from, or deletes it when the group empties: the groups it
    touched are those whose summary is gone or was written by one of
    ``seqs``, those it made are those that are new, and what the commits
    added and removed are those groups' members that came and went. The
    cost is the table's groups and the touched groups' members, not every
    file. ``old`` and ``new`` are the views at the previous change and at
    the commits' version; ``counts`` the files the summaries say were
    added and removed.

    None (the caller compares the live file keys instead): a table of an
    older index layout, a group written by a commit not in ``seqs``, a
    member with no file entry, or counts other than ``counts``.
    """
    if file_index.layout(old, table_id) != file_index.PACKED or file_index.layout(new, table_id) != file_index.PACKED:
        return None
    prefix = keys.file_groups(table_id)
    before = {key[len(prefix) :].decode() for key, _ in old.scan(prefix=prefix)}
    after: dict[str, int] = {}
    for key, _, revision in new.scan_with_revision(prefix=prefix):
        if revision > old.seq and revision not in seqs:
            return None
        after[key[len(prefix) :].decode()] = revision
    touched = [g for g in sorted(before) if g not in after or after[g] > old.seq]
    made = [g for g in sorted(after) if g not in before]

    def members(snap: Any, group: str) -> set[str]:
        start = keys.group_files(table_id, group)
        return {key[len(start) :].decode() for key, _ in snap.scan(prefix=start)}

    def entries(snap: Any, ids: Iterable[str]) -> list[tuple[bytes, bytes]] | None:
        pairs = []
        for file_id in sorted(ids):
            value = snap.get(keys.table_file(table_id, file_id))
            if value is None:
                return None
            pairs.append((keys.table_file(table_id, file_id), value))
        return pairs

    added_ids: set[str] = set()
    for group in made:
        added_ids |= members(new, group)
    removed_ids: set[str] = set()
    for group in touched:
        removed_ids |= members(old, group) - (members(new, group) if group in after else set())
    if (len(added_ids), len(removed_ids)) != counts:
        return None
    added, removed = entries(new, added_ids), entries(old, removed_ids)
    if added is None or removed is None:
        return None
    return added, removed


def _derive_change(
    ctx: LakeContext,
    fileio: LakeFileIO,
    table_id: str,
    change: _Change,
    base: _State | None,
    floor: int,
    appended: _Appended | None = None,
    told: bool = False,
) -> _State:
    """Derive (write what is missing of) the table's state at ``change``, on top of ``base`` (its previous change).

    ``told``: whether ``change``'s summaries tell every change of the
    table's files since ``base`` (no commit between them had its summaries
    cut), so that an append's files may be found without a scan of the
    table's file keys.
    """
    version = change.version
    files: _FileKeys | None
    # The files this change added, known without a scan of its keys (None: scan them).
    appended_now = None if base is None or appended is None else appended.added(change)
    with ctx.store.at(version=version) as snap:
        reader = CatalogReader(snap)
        definition = reader.table_def(table_id)
        properties = reader.table_properties(table_id)
        if appended_now is None and base is not None and told and change.files_added is not None:
            if not change.changes_files:
                appended_now = []  # the summaries say no file changed: nothing to read
            else:
                with ctx.store.at(version=base.derived.snapshot_version) as before:
                    since = before.seq
                pairs = files_added(snap, table_id, change.seqs, since, change.files_added)
                appended_now = None if pairs is None else [FILE_CACHE.get(k, v) for k, v in pairs]
        # A removal's files, likewise (None: compare the live keys).
        rewritten: tuple[list[DataFile], list[DataFile]] | None = None
        if appended_now is None and base is not None and told and change.counts is not None:
            with ctx.store.at(version=base.derived.snapshot_version) as before:
                found = files_changed(before, snap, table_id, change.seqs, change.counts)
            if found is not None:
                rewritten = ([FILE_CACHE.get(k, v) for k, v in found[0]], [FILE_CACHE.get(k, v) for k, v in found[1]])
        if appended_now is not None:
            if appended is not None and version == appended.newest:
                files = appended.files
            else:  # the live keys, if known: the base's, unless files were added
                files = None if appended_now else base.files  # type: ignore[union-attr]
        elif rewritten is not None:
            files = None
        else:
            files = _file_keys_in(snap, table_id)
    assert definition is not None and definition.schema is not None
    schema_id = definition.schema_version
    schema = iceberg_schema(definition.schema, schema_id)
    spec = _partition_spec(definition)
    types = _type_signature(definition.schema)
    sid = snapshot_id(table_id, version)
    base_uri_ = fileio.base

    kept: list[_Manifest] = []
    added: list[DataFile] = []
    gone: list[DataFile] = []
    base_version = None if base is None else base.derived.snapshot_version
    if base is None:
        assert files is not None
        added, gone = files.entries(), []
    elif appended_now is not None:
        kept, added = list(base.manifests), appended_now
    elif rewritten is not None:
        kept, (added, gone) = list(base.manifests), rewritten
    else:
        assert files is not None
        kept = list(base.manifests)
        if files is not base.files:
            if base.files is None:
                base.files = _file_keys(ctx, table_id, base.derived.snapshot_version)
            new = files.not_in(base.files)
            added = files.entries(new)
            # Keys are unique: when as many keys are live as before plus those
            # added, none went (an append), and the reverse comparison is skipped.
            if len(files.keys) - len(added) != len(base.files.keys):
                gone = base.files.entries(base.files.not_in(files))
    removed = {f.path for f in gone}
    added.sort(key=lambda f: f.id)
    total_records = (0 if base is None else base.total_records) + sum(f.rows for f in added) - sum(f.rows for f in gone)
    total_files = len(files.keys) if files is not None else _total_files(base) + len(added) - len(gone)

    retype = base is not None and any(base.types.get(fid) not in (None, t) for fid, t in types.items())
    list_path = _manifest_list_path(definition, version)
    list_uri = fileio.uri(list_path)
    manifests: list[_Manifest]
    # Written even if another process wrote it already: a file no verified
    # metadata.json vouches for may be torn, and the bytes are the same.
    manifests = []
    group = 1
    to_rewrite = kept if retype else [m for m in kept if removed and _holds_any(fileio, base_uri_, m, removed)]
    rewrite_ids = {id(m) for m in to_rewrite}
    for m in kept:
        if id(m) not in rewrite_ids:
            manifests.append(m)
            continue
        entries = [
            e for e in m.file.fetch_manifest_entry(fileio, discard_deleted=True)
            if fileio.path_of(e.data_file.file_path) not in removed
        ]
        if not entries:
            continue  # every file it held is gone
        if retype:
            if files is None:
                files = _file_keys(ctx, table_id, version)
            by_path = {f.path: f for f in files.entries()}
            make = _EntryMaker(base_uri_, definition.schema, schema, definition.partition_ids)
            entries = [_retyped(e, base_uri_, by_path, make) for e in entries]
        path = _manifest_path(definition, version, base_version, group)
        group += 1
        with _manifest_writer(spec, schema, fileio.new_output(fileio.uri(path)), sid) as writer:
            for e in entries:
                writer.existing(e)
        manifests.append(
            _Manifest(writer.to_manifest_file(), frozenset(fileio.path_of(e.data_file.file_path) for e in entries))
        )
    if added:
        path = _manifest_path(definition, version, base_version, 0)
        make = _EntryMaker(base_uri_, definition.schema, schema, definition.partition_ids)
        with _manifest_writer(spec, schema, fileio.new_output(fileio.uri(path)), sid) as writer:
            for f in added:
                data_file = make(f)
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=sid, sequence_number=version, data_file=data_file
                    )
                )
        manifests.append(_Manifest(writer.to_manifest_file(), frozenset(f.path for f in added)))
    parent = None if base is None else snapshot_id(table_id, base.derived.snapshot_version)
    with write_manifest_list(2, fileio.new_output(list_uri), sid, parent, version, _AVRO_CODEC) as list_writer:
        # The list writer's file writer is private to it; wrapping it is the
        # one way to reuse each manifest's encoded record across versions.
        list_writer._writer = _EncodedOnce(list_writer._writer)  # type: ignore[assignment]
        list_writer.add_manifests([m.file for m in manifests])
    # What the list writer wrote: the manifests made here get this
    # snapshot's sequence number (ManifestListWriterV2.prepare_manifest).
    manifests = [_Manifest(_sequenced(m.file, version), m.paths) for m in manifests]

    operation = Operation.APPEND
    if removed:
        operation = Operation.OVERWRITE if added else Operation.DELETE
    summary = Summary(
        operation=operation,
        **{
            "added-data-files": str(len(added)),
            "deleted-data-files": str(len(removed)),
            "added-records": str(sum(f.rows for f in added)),
            "deleted-records": str(sum(f.rows for f in gone)),
            "total-data-files": str(total_files),
            "total-records": str(total_records),
            "lakekv.version": str(version),
        },
    )
    snapshot = Snapshot.model_validate(
        {
            "snapshot-id": sid,
            "parent-snapshot-id": None if base is None else snapshot_id(table_id, base.derived.snapshot_version),
            "sequence-number": version,
            "timestamp-ms": change.timestamp_ms,
            "manifest-list": list_uri,
            "summary": summary,
            "schema-id": schema_id,
        }
    )
    metadata = _metadata(definition, properties, types, schema, spec, snapshot, base, fileio, floor)
    digests = _retained_digests(fileio, metadata, base, manifests)
    metadata = metadata.model_copy(
        update={"properties": {**metadata.properties, _DIGESTS_PROPERTY: json.dumps(digests, sort_keys=True, separators=(",", ":"))}}
    )
    # Written when asked for (_at_version): a first derivation goes through
    # every retained change, and only the one asked for needs its file.
    metadata_uri = fileio.uri(_metadata_path(definition, version, floor))
    state = _State(
        derived=Derived(metadata_uri, metadata, table_id, version, version),
        manifests=manifests,
        files=files,
        total_records=total_records,
        types=types,
        digests=digests,
        published=False,
    )
    _remember((base_uri_, table_id, version, floor), state)
    return state


def _retained_digests(fileio: LakeFileIO, metadata: TableMetadata, base: _State | None, manifests: list[_Manifest]) -> dict[str, str]:
    """The digests of every Avro file ``metadata``'s snapshots name: ``base``'s still named, and those written now."""
    digests = {} if base is None else dict(base.digests)
    for path, digest in fileio.digests.items():
        digests[path.rsplit("/", 1)[-1]] = digest
    if base is not None:
        oldest = min(_seq(s) for s in metadata.snapshots)
        if any(_seq(s) < oldest for s in base.derived.metadata.snapshots):
            # Snapshots went below the floor. Manifests only flow forward (a
            # list names its base's manifests or new ones), so the retained
            # ones are the oldest retained list's and those made since.
            (first,) = [s for s in metadata.snapshots if _seq(s) == oldest]
            named = {m.manifest_path.rsplit("/", 1)[-1] for m in read_manifest_list(fileio.new_input(first.manifest_list))}
            digests = {n: d for n, d in digests.items() if n in named or (_version_of(n) or -1) >= oldest}
    names = {s.manifest_list.rsplit("/", 1)[-1] for s in metadata.snapshots}
    names.update(m.file.manifest_path.rsplit("/", 1)[-1] for m in manifests)
    missing = names - digests.keys()
    assert not missing, f"derived files without a digest: {sorted(missing)}"
    return digests


class _OneBlock:
    """pyiceberg's Avro file writer with every block it is given gathered into one, written when it closes.

    pyiceberg's manifest writer writes, and deflates, one Avro block per
    entry: gathered, a manifest of 10,000 entries costs a fraction of the
    time (one block of any size is valid Avro).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._pending: list[Any] = []

    def write_block(self, objects: list[Any]) -> None:
        self._pending.extend(objects)

    def __exit__(self, *exc: Any) -> None:
        if self._pending and exc[0] is None:
            self._inner.write_block(self._pending)
        self._inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Raw:
    """An Avro record writer for records already encoded."""

    def write(self, encoder: BinaryEncoder, data: bytes) -> None:
        encoder.write(data)


_RAW: Final = _Raw()
# Manifest lists' records by (manifest path, sequence numbers, snapshot id): a
# derived manifest's name decides its content, so its record is the same in
# every list that names it, and a list after one append re-encodes none of them.
_ENCODED_RECORDS: Final = 20_000
_encoded: OrderedDict[tuple[str, int, int, int | None], bytes] = OrderedDict()


class _EncodedOnce:
    """pyiceberg's manifest list file writer, each manifest's record encoded once per process."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write_block(self, objects: list[ManifestFile]) -> None:
        records = []
        for m in objects:
            key = (m.manifest_path, m.sequence_number, m.min_sequence_number, m.added_snapshot_id)
            with _lock:
                data = _encoded.get(key)
            if data is None:
                buffer = io.BytesIO()
                self._inner.writer.write(BinaryEncoder(buffer), m)
                data = buffer.getvalue()
                with _lock:
                    _encoded[key] = data
                    while len(_encoded) > _ENCODED_RECORDS:
                        _encoded.popitem(last=False)
            records.append(data)
        writer = self._inner.writer
        self._inner.writer = _RAW
        try:
            self._inner.write_block(records)
        finally:
            self._inner.writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def _manifest_writer(spec: PartitionSpec, schema: IcebergSchema, output: OutputFile, sid: int) -> Iterator[ManifestWriter]:
    """pyiceberg's v2 manifest writer, its entries written as one Avro block."""
    with write_manifest(2, spec, schema, output, sid, _AVRO_CODEC) as writer:
        # The manifest writer's file writer is private to it; wrapping it is
        # the one way to batch the blocks without copying its entry bookkeeping.
        writer._writer = _OneBlock(writer._writer)  # type: ignore[assignment]
        yield writer


def _sequenced(manifest: ManifestFile, version: int) -> ManifestFile:
    """``manifest`` as a manifest list of sequence number ``version`` records it."""
    if manifest.sequence_number != UNASSIGNED_SEQ and manifest.min_sequence_number != UNASSIGNED_SEQ:
        return manifest
    out = copy(manifest)
    if out.sequence_number == UNASSIGNED_SEQ:
        out.sequence_number = version
    if out.min_sequence_number == UNASSIGNED_SEQ:
        out.min_sequence_number = version
    return out


def _holds_any(fileio: LakeFileIO, base: str, manifest: _Manifest, removed: set[str]) -> bool:
    if manifest.paths is None:
        entries = manifest.file.fetch_manifest_entry(fileio, discard_deleted=True)
        manifest.paths = frozenset(fileio.path_of(e.data_file.file_path) for e in entries)
    return not manifest.paths.isdisjoint(removed)


def _retyped(entry: ManifestEntry, base: str, by_path: dict[str, DataFile], make: _EntryMaker) -> ManifestEntry:
    """``entry`` with its bounds and partition serialised for the current column types."""
    native = by_path[entry.data_file.file_path[len(base) + 1 :]]
    return ManifestEntry.from_args(
        status=entry.status,
        snapshot_id=entry.snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=make(native),
    )


def _metadata(
    definition: TableDef,
    properties: dict[str, str],
    types: dict[int, str],
    schema: IcebergSchema,
    spec: PartitionSpec,
    snapshot: Snapshot,
    base: _State | None,
    fileio: LakeFileIO,
    floor: int,
) -> TableMetadata:
    """The metadata.json of the table at ``snapshot``: the retained snapshots of ``base`` plus it."""
    snapshots: list[Snapshot] = []
    schemas = {schema.schema_id: schema}
    if base is not None:
        previous = base.derived.metadata
        # Sequence numbers are lakehouse versions. The last change at or below
        # the floor stays (lake.at(version=floor) reads it); older ones go.
        keep_from = max((_seq(s) for s in previous.snapshots if _seq(s) <= floor), default=-1)
        snapshots = [s for s in previous.snapshots if _seq(s) >= keep_from]
        for s in snapshots:
            old = None if s.schema_id is None else previous.schema_by_id(s.schema_id)
            if old is not None and old.schema_id not in schemas:
                schemas[old.schema_id] = old
    snapshots.append(snapshot)
    props = {**properties, _TYPES_PROPERTY: json.dumps({str(k): v for k, v in sorted(types.items())})}
    props.setdefault("format-version", "2")
    last_partition = _PARTITION_FIELD_START - 1 + len(spec.fields)
    assert definition.schema is not None
    # model_validate with the spec's own (JSON) field names: what the metadata.json says.
    return TableMetadataV2.model_validate(
        {
            "location": fileio.uri(definition.location),
            "table-uuid": uuid.uuid5(uuid.NAMESPACE_URL, f"lakekv-table:{definition.id}"),
            "last-updated-ms": snapshot.timestamp_ms,
            "last-column-id": max(definition.last_field_id, max(s.highest_field_id for s in schemas.values())),
            "schemas": [schemas[i] for i in sorted(schemas)],
            "current-schema-id": schema.schema_id,
            "partition-specs": [spec],
            "default-spec-id": 0,
            "last-partition-id": last_partition,
            "properties": props,
            "current-snapshot-id": snapshot.snapshot_id,
            "snapshots": snapshots,
            "snapshot-log": [{"snapshot-id": s.snapshot_id, "timestamp-ms": s.timestamp_ms} for s in snapshots],
            "metadata-log": [],
            "sort-orders": [UNSORTED_SORT_ORDER],
            "default-sort-order-id": 0,
            "refs": {"main": {"snapshot-id": snapshot.snapshot_id, "type": "branch"}},
            "last-sequence-number": _seq(snapshot),
        }
    )


def _seq(snapshot: Snapshot) -> int:
    """A derived snapshot's sequence number: its lakehouse version (never None in derived metadata)."""
    return snapshot.sequence_number or 0


# -- GC ------------------------------------------------------------------------------------


def is_derived_path(path: str) -> bool:
    """Whether object ``path`` is a derived Iceberg file of a native table (``data/<id>/metadata/...``)."""
    parts = path.split("/")
    return len(parts) == 4 and parts[2] == METADATA_DIR


def collect(ctx: LakeContext, derived_paths: list[str], live_table_ids: set[str], dry_run: bool) -> list[str]:
    """Delete the derived files no retained version needs; returns their object paths.

    Every derived file of a table not in ``live_table_ids`` (dropped: a
    reader of an older version derives them again), and, for the others,
    with the data floor recorded in the lakehouse: every ``metadata.json``
    derived under a lower floor (it names snapshots GC may have taken files
    of), and every manifest list, manifest and ``metadata.json`` of a
    version below the table's last change at or below the floor, unless a
    retained manifest list still names that manifest (manifests are reused
    across versions). ``derived_paths`` are the derived files to consider
    (GC's listing of ``data/``, filtered by :func:`is_derived_path`). Losing
    a derived file loses nothing, so a reader racing this re-derives what it
    needs.
    """
    floor = retention.floor(ctx.store)
    by_table: dict[str, list[str]] = {}
    for path in derived_paths:
        by_table.setdefault(path.split("/")[1], []).append(path)
    deleted: list[str] = []
    for table_id, paths in sorted(by_table.items()):
        doomed = paths if table_id not in live_table_ids else _unneeded(ctx, table_id, paths, floor)
        for path in sorted(doomed):
            deleted.append(path)
            if not dry_run:
                ctx.objects.delete(path)
    return deleted


def _unneeded(ctx: LakeContext, table_id: str, paths: list[str], floor: int) -> list[str]:
    """The derived files of one live table that no retained version needs (see :func:`collect`)."""
    changes = list(_changes(ctx, table_id, ctx.store.version, floor))
    oldest = min((c.version for c in changes), default=floor)
    fileio = LakeFileIO(ctx.objects)
    named: set[str] = set()
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        version = _version_of(name)
        if name.startswith("snap-") and version is not None and version >= oldest:
            named.update(fileio.path_of(m.manifest_path) for m in read_manifest_list(fileio.new_input(fileio.uri(path))))
    doomed = []
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        version = _version_of(name)
        if version is None:
            continue  # not a name this module makes: not ours to delete
        if name.endswith(".metadata.json"):
            if version < oldest or _floor_of(name) < floor:
                doomed.append(path)
        elif version < oldest and path not in named:
            doomed.append(path)
    return doomed


def _floor_of(name: str) -> int:
    """The data floor a ``<version>-<floor>.metadata.json`` was derived under."""
    parts = name.removesuffix(".metadata.json").split("-")
    return int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else -1
