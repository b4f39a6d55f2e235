"""Iceberg tables and views in a lakehouse export: their files copied, their locations rewritten.

A table of format ``iceberg`` keeps only the location of its current
metadata JSON in the lakehouse; everything else (manifest lists, manifests,
data and delete files) is named by absolute URI inside those files. A copy of
the catalog keys alone would leave the exported lakehouse pointing at the
source's warehouse, so :func:`copy_iceberg` copies each table's files and
rewrites every location in them:

* a location under the source lakehouse's root moves to the same place under
  the destination's root (the default warehouse, ``<lakehouse>/iceberg``,
  stays the destination's default warehouse); one elsewhere (a
  ``--warehouse`` outside the lakehouse) moves to
  ``<destination>/iceberg/<table id>``;
* a file under the table's location keeps its place below the new location;
  one outside it (a file registered from elsewhere) goes to
  ``<new location>/data/external/<hash>-<name>``;
* the current metadata JSON is rewritten (``location``, every snapshot's
  ``manifest-list``, the ``write.*.path`` properties), every snapshot's
  manifest list and every manifest too (their Avro files read and written
  with pyiceberg's Avro reader and writer, schema and header kept), and
  position delete files, whose rows name data files, get their ``file_path``
  column rewritten. Earlier metadata files (``metadata-log``) and statistics
  files are not copied, and the copy does not list them.

Views made over the Iceberg REST API keep their Iceberg metadata in the
catalog: its ``location`` is rewritten the same way. (Other views' Iceberg
metadata is derived from the catalog at each load, and the files the server
writes for views are a cache it writes again.)

The catalog keys are then corrected in the destination in ONE commit after
the copied version: the destination's newest version is the exported one
with its Iceberg locations rewritten.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from catalog import keys
from catalog.records import ICEBERG, VIEW, Pointer, TableDef
from kvstore.objstore import ObjectStore

# Position delete files' column of data file paths (the Iceberg spec's reserved field id).
_DELETE_FILE_PATH_ID: Final = 2147483546
_POSITION_DELETES: Final = 1
_WRITE_PATH_PROPERTIES: Final = (
    "write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path",
)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass
class Roots:
    """Where the source lakehouse and the destination live, as URIs (``file:///...``, ``s3://...``)."""

    source: str
    dest: str

    def relocate(self, location: str, table_id: str) -> str:
        """A table or view location of the source as the destination's."""
        location = location.rstrip("/")
        if _under(location, self.source):
            return self.dest + location[len(self.source.rstrip("/")):]
        return f"{self.dest}/iceberg/{table_id}"

    def dest_path(self, uri: str) -> str:
        """``uri`` (under the destination's root) as a path in the destination's object store.

        Raises:
            ValueError: ``uri`` is not strictly under the destination's root.
        """
        if not _under(uri, self.dest) or uri == self.dest:
            raise ValueError(f"{uri!r} is not under the export's destination {self.dest!r}")
        return uri[len(self.dest.rstrip("/")) + 1:]


@dataclass
class IcebergExport:
    """What :func:`copy_iceberg` copied."""

    tables: int = 0
    views: int = 0
    files: int = 0
    size: int = 0  # bytes written
    rewritten: dict[bytes, bytes] = field(default_factory=dict)  # catalog key -> corrected value


class _Move:
    """One table's relocation: its old location to its new one, every file under it alike."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old.rstrip("/"), new.rstrip("/")

    def __call__(self, uri: str) -> str:
        if _under(uri, self.old):
            return self.new + uri[len(self.old):]
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        return f"{self.new}/data/external/{hashlib.sha256(uri.encode()).hexdigest()[:16]}-{name}"


class _Copier:
    def __init__(self, source: ObjectStore, dest: ObjectStore, roots: Roots, report: IcebergExport, scratch: Path) -> None:
        self.source, self.dest, self.roots, self.report, self.scratch = source, dest, roots, report, scratch
        self.copied: set[str] = set()

    def read(self, uri: str) -> bytes:
        """A source file: through the lakehouse's object store when it lies under it, else pyiceberg's file IO."""
        if _under(uri, self.roots.source) and uri != self.roots.source:
            return self.source.get(uri[len(self.roots.source.rstrip("/")) + 1:])
        from pyiceberg.io import load_file_io

        with load_file_io(properties={}, location=uri).new_input(uri).open() as stream:
            return stream.read()

    def write(self, uri: str, body: bytes) -> None:
        self.dest.put(self.roots.dest_path(uri), body)
        self.report.files += 1
        self.report.size += len(body)

    def copy(self, old: str, new: str) -> None:
        if new in self.copied:
            return
        self.write(new, self.read(old))
        self.copied.add(new)

    def rewrite_avro(self, body: bytes, edit: Callable[[Any, Any], None]) -> bytes:
        """An Avro file of Iceberg's with ``edit(schema, record)`` applied to each record; schema and header kept."""
        from pyiceberg.avro.file import AvroFile, AvroOutputFile
        from pyiceberg.io.pyarrow import PyArrowFileIO

        file_io = PyArrowFileIO()
        source, target = self.scratch / "in.avro", self.scratch / "out.avro"
        source.write_bytes(body)
        with AvroFile[Any](file_io.new_input(str(source))) as reader:
            schema = reader.schema
            meta = dict(reader.header.meta)
            records = list(reader)
        for record in records:
            edit(schema, record)
        name = json.loads(meta.pop("avro.schema")).get("name", "record")
        with AvroOutputFile[Any](file_io.new_output(str(target)), schema, name, metadata=meta) as writer:
            writer.write_block(records)
        return target.read_bytes()


def _position(struct: Any, name: str) -> int:
    return next(i for i, f in enumerate(struct.fields) if f.name == name)


def _rewrite_position_deletes(body: bytes, move: _Move) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(body))
    index = table.schema.get_field_index("file_path")
    paths = pa.array([move(p) for p in table.column(index).to_pylist()], table.schema.field(index).type)
    table = table.set_column(index, table.schema.field(index), paths)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _copy_manifest(copier: _Copier, move: _Move, old: str) -> tuple[str, int]:
    """Copy one manifest and the files it lists, rewritten; return its new location and length."""
    new = move(old)

    def edit(schema: Any, entry: Any) -> None:
        data_index = _position(schema, "data_file")
        data_type = schema.fields[data_index].field_type
        data_file = entry[data_index]
        path_index = _position(data_type, "file_path")
        old_file = data_file[path_index]
        new_file = move(old_file)
        data_file[path_index] = new_file
        content = data_file[_position(data_type, "content")] if any(f.name == "content" for f in data_type.fields) else 0
        status = entry[_position(schema, "status")]
        try:
            body = copier.read(old_file)
        except FileNotFoundError:
            if status == 2:  # a DELETED entry: its file may be gone already
                return
            raise
        if content == _POSITION_DELETES:
            body = _rewrite_position_deletes(body, move)
            data_file[_position(data_type, "file_size_in_bytes")] = len(body)
            for bounds in ("lower_bounds", "upper_bounds"):
                if any(f.name == bounds for f in data_type.fields):
                    values = data_file[_position(data_type, bounds)]
                    if values:
                        values.pop(_DELETE_FILE_PATH_ID, None)
        if new_file not in copier.copied:
            copier.write(new_file, body)
            copier.copied.add(new_file)

    body = copier.rewrite_avro(copier.read(old), edit)
    copier.write(new, body)
    return new, len(body)


def _copy_table(copier: _Copier, table: TableDef) -> TableDef:
    from pyiceberg.table.metadata import TableMetadataUtil

    assert table.metadata_location is not None
    metadata = json.loads(copier.read(table.metadata_location))
    move = _Move(metadata["location"], copier.roots.relocate(metadata["location"], table.id))
    manifests: dict[str, tuple[str, int]] = {}

    def edit_list(schema: Any, manifest: Any) -> None:
        path_index = _position(schema, "manifest_path")
        old = manifest[path_index]
        if old not in manifests:
            manifests[old] = _copy_manifest(copier, move, old)
        manifest[path_index], manifest[_position(schema, "manifest_length")] = manifests[old]

    for snapshot in metadata.get("snapshots") or []:
        old_list = snapshot["manifest-list"]
        snapshot["manifest-list"] = move(old_list)
        copier.write(snapshot["manifest-list"], copier.rewrite_avro(copier.read(old_list), edit_list))
    metadata["location"] = move.new
    metadata["metadata-log"] = []
    metadata["statistics"] = []
    metadata["partition-statistics"] = []
    properties = metadata.get("properties") or {}
    for key in _WRITE_PATH_PROPERTIES:
        if key in properties:
            properties[key] = move(properties[key])
    body = json.dumps(metadata).encode()
    TableMetadataUtil.parse_raw(body.decode())  # what any reader parses: a bad rewrite fails here, not there
    new_location = move(table.metadata_location)
    copier.write(new_location, body)
    return TableDef(**{**table.__dict__, "location": move.new, "metadata_location": new_location})


def copy_iceberg(
    entries: list[tuple[bytes, bytes]], source: ObjectStore, dest: ObjectStore, roots: Roots
) -> IcebergExport:
    """Copy the Iceberg tables and relocate the Iceberg views among catalog ``entries`` (key, value) into ``dest``.

    Returns what was copied, with the catalog keys whose values must change
    in the destination (``rewritten``).

    Raises:
        FileNotFoundError: a file a table's metadata names is missing (its
            copy would not read).
    """
    report = IcebergExport()
    with tempfile.TemporaryDirectory(prefix="lakekv-export-") as scratch:
        copier = _Copier(source, dest, roots, report, Path(scratch))
        for key, value in entries:
            if key.startswith(keys.TBL) and key.endswith(b"/def"):
                table = TableDef.decode(value)
                if table.format == ICEBERG and table.metadata_location:
                    report.rewritten[key] = _copy_table(copier, table).encode()
                    report.tables += 1
            elif key.startswith(keys.OBJ):
                pointer = Pointer.decode(value)
                view = pointer.view
                if pointer.kind == VIEW and view is not None and isinstance(view.metadata, dict) \
                        and isinstance(view.metadata.get("location"), str) and "view-uuid" in view.metadata:
                    location = roots.relocate(view.metadata["location"], pointer.id)
                    view.metadata = {**view.metadata, "location": location}
                    report.rewritten[key] = pointer.encode()
                    report.views += 1
    return report
