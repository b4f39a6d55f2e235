"""The warehouse: where Iceberg tables live, and the rule that no location a
client sends may point outside it.

Locations are URIs (``file:///abs/dir``, ``s3://bucket/prefix``); a bare
absolute path is taken as ``file://``. A location is accepted only if, after
resolving ``.`` and ``..`` segments, it is the warehouse itself or below it,
with the same scheme and authority. This is what keeps a client from making
the server write metadata, or register a table, anywhere else on its disks.

Metadata files are written and read with pyiceberg's own FileIO and
serializers, so they are byte-for-byte what any Iceberg client expects.
Metadata files never change once written, so parsed ones are cached by location.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from catalog import table_locations
from catalog.table_locations import to_uri
from catalog.table_locations import under as _under
from service.errors import ApiError

if TYPE_CHECKING:
    from pyiceberg.io import OutputFile
    from pyiceberg.table.metadata import TableMetadata

# pyiceberg is imported where metadata is first written or read, not with this
# module: it takes about 1 s, which `lakekv serve` would otherwise pay before
# it listens (the etcd API and the KV API never need it).

# Parsed metadata files kept in memory; each is a few KB to a few MB.
_METADATA_CACHE_ENTRIES: Final = 256


def _write_v3(metadata: TableMetadata, output: OutputFile) -> None:
    """Write version 3 ``metadata`` as pyiceberg writes versions 1 and 2 (compressed as the location's suffix says)."""
    from pyiceberg.serializers import Compressor

    body = json.dumps(metadata.model_dump(mode="json", by_alias=True, exclude_none=True)).encode()
    with output.create(overwrite=False) as stream:
        stream.write(Compressor.get_compressor(output.location).bytes_compressor()(body))


# Table properties that name where a table's files are written (Iceberg's
# TableProperties: data, metadata, and the two older object/folder storage
# names of the data path). Each must lie inside the table's own location:
# inside the warehouse, apart from every other table (whose purge would
# delete them) and from the store, and purged with the table.
WRITE_PATH_PROPERTIES: Final = (
    "write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path",
)
# Properties that name a class deciding where files go (Java's and
# pyiceberg's): no path to check, and pyiceberg imports the named module.
LOCATION_PROVIDER_PROPERTIES: Final = ("write.location-provider.impl", "write.py-location-provider.impl")


def normalize(location: object, what: str = "location") -> str:
    """``location`` as the one URI the filesystem that uses it will open (see
    :func:`catalog.table_locations.normalize`), or ApiError 400 naming what is wrong.

    >>> normalize("FILE:///wh//ns/./t/")
    'file:///wh/ns/t'
    """
    try:
        return table_locations.normalize(location, what)
    except ValueError as exc:
        raise ApiError(400, "BadRequestException", str(exc)) from None


class Warehouse:
    """The root location of Iceberg tables served by this server."""

    def __init__(self, root: str, store_url: str | None = None) -> None:
        try:
            self.root = normalize(root, "warehouse")
            # The lakehouse store: no table location may equal or contain it.
            self.store = normalize(to_uri(os.path.abspath(store_url)) if store_url and "://" not in store_url
                                   else store_url, "store") if store_url else None
        except ApiError as exc:
            raise ValueError(exc.message) from None
        self._cache: OrderedDict[str, TableMetadata] = OrderedDict()
        self._cache_lock = threading.Lock()

    @classmethod
    def for_lakehouse(cls, lakehouse_url: str, explicit: str | None) -> Warehouse:
        """``explicit`` if given, else ``<lakehouse>/iceberg`` for a local or s3 lakehouse."""
        if explicit:
            return cls(explicit, lakehouse_url)
        if "://" not in lakehouse_url or lakehouse_url.startswith("file://"):
            path = lakehouse_url.removeprefix("file://")
            return cls(os.path.abspath(path) + "/iceberg", lakehouse_url)
        if lakehouse_url.startswith("s3://"):
            return cls(lakehouse_url.rstrip("/") + "/iceberg", lakehouse_url)
        raise ValueError(
            f"no default warehouse for {lakehouse_url!r}: Iceberg clients must reach table files, "
            "so pass --warehouse (a shared path or an s3:// URI)"
        )

    def check(self, location: object, what: str) -> str:
        """``location`` normalized (see :func:`normalize`) if it lies strictly inside the warehouse, else ApiError 400."""
        uri = normalize(location, what)
        if uri == self.root or not _under(uri, self.root):
            raise ApiError(
                400, "BadRequestException",
                f"{what} {location!r} is outside the warehouse {self.root!r} (it must lie strictly inside it)",
            )
        return uri

    def check_table_location(self, location: object, others: dict[str, str], what: str) -> str:
        """A table's location: strictly inside the warehouse, apart from every other table's, not the store's.

        ``others`` maps the other tables' names to their locations; a location
        equal to, inside or containing one of them is refused (purging one
        table must never delete another's files), and so is one equal to or
        containing the lakehouse store.
        """
        uri = self.check(location, what)
        for other, theirs in sorted(others.items()):
            try:
                theirs = normalize(theirs)
            except ApiError:
                continue  # a location from before confinement: its own purge is refused, it cannot hold ours
            if _under(uri, theirs) or _under(theirs, uri):
                raise ApiError(
                    400, "BadRequestException", f"{what} {location!r} overlaps the location of table {other} ({theirs})"
                )
        if self.store is not None and _under(self.store, uri):
            raise ApiError(400, "BadRequestException", f"{what} {location!r} contains the lakehouse store {self.store}")
        return uri

    def check_write_paths(self, properties: Mapping[str, str], location: str) -> None:
        """Refuse (ApiError 400 naming the property) table ``properties`` that would put
        files outside the table's ``location``.

        Each of :data:`WRITE_PATH_PROPERTIES` is normalized as locations are
        (:func:`normalize`) and must be ``location`` or below it; the
        :data:`LOCATION_PROVIDER_PROPERTIES` are refused outright.
        """
        for key in LOCATION_PROVIDER_PROPERTIES:
            if key in properties:
                raise ApiError(
                    400, "BadRequestException",
                    f"table property {key} is not accepted: a custom location provider may write files "
                    "outside the table location, where this server cannot confine them",
                )
        table = normalize(location, "table location")
        for key in WRITE_PATH_PROPERTIES:
            if key not in properties:
                continue
            value = properties[key]
            uri = normalize(value, f"table property {key}")
            if uri == self.root or not _under(uri, self.root):
                raise ApiError(
                    400, "BadRequestException",
                    f"table property {key} {value!r} is outside the warehouse {self.root!r}",
                )
            if not _under(uri, table):
                raise ApiError(
                    400, "BadRequestException",
                    f"table property {key} {value!r} is outside the table location {table!r} "
                    "(a table's files must lie under its location: purging it removes them, "
                    "and no other table's purge can reach them)",
                )

    def prepare_location(self, location: str) -> None:
        """Create a local table location's ``data`` and ``metadata`` directories: a staged
        create writes no file there, but its writer puts data files and manifests there
        before it commits (local file IO does not create parent directories)."""
        uri = self.check(location, "table location")
        if uri.startswith("file://"):
            for sub in ("data", "metadata"):
                os.makedirs(os.path.join(uri.removeprefix("file://"), sub), exist_ok=True)

    def default_table_location(self, namespace: str, name: str) -> str:
        """A fresh location per table: a dropped and re-created name never shares files."""
        return f"{self.root}/{namespace.replace('.', '/')}/{name}-{uuid.uuid4().hex}"

    def next_metadata_location(self, metadata: TableMetadata, previous: str | None) -> str:
        """``<location>/metadata/<version+1>-<uuid>.metadata.json``, as Iceberg names them
        (under ``write.metadata.path`` if set: check it first, :meth:`check_write_paths`).

        Computed here, not by pyiceberg's location provider, which imports
        whatever class the table's ``write.py-location-provider.impl`` names.
        """
        version = 0 if previous is None else _metadata_version(previous) + 1
        directory = metadata.properties.get("write.metadata.path") or f"{metadata.location.rstrip('/')}/metadata"
        location = f"{directory.rstrip('/')}/{version:05d}-{uuid.uuid4()}.metadata.json"
        return self.check(location, "metadata location")

    def write_metadata(self, metadata: TableMetadata, location: str) -> None:
        """Write ``metadata`` to ``location``.

        Version 3 metadata is serialized here (pyiceberg 0.12 reads it and
        refuses to write it): the same pydantic model, dumped as the REST
        responses dump it.
        """
        from pyiceberg.io import load_file_io
        from pyiceberg.serializers import ToOutputFile

        io = load_file_io(properties={}, location=location)
        if metadata.format_version >= 3:
            _write_v3(metadata, io.new_output(location))
        else:
            ToOutputFile.table_metadata(metadata, io.new_output(location))
        self._remember(location, metadata)

    def read_metadata(self, location: str) -> TableMetadata:
        """The metadata file at ``location``, parsed (from the cache if it was parsed before).

        Raises:
            ApiError: 404 ``NotFoundException`` if the file is gone, as Iceberg's
                reference catalog answers: a table whose current metadata file
                was deleted is damaged, and a cached copy must not hide that.
        """
        from pyiceberg.io import load_file_io
        from pyiceberg.serializers import FromInputFile

        input_file = load_file_io(properties={}, location=location).new_input(location)
        with self._cache_lock:
            cached = self._cache.get(location)
            if cached is not None:
                self._cache.move_to_end(location)
        if cached is not None:
            # One stat (a HEAD on s3): the parsed copy stays valid only while the
            # file exists, since metadata files never change once written.
            if not input_file.exists():
                self._forget(location)
                raise _missing_metadata(location)
            return cached
        try:
            metadata = FromInputFile.table_metadata(input_file)
        except FileNotFoundError:
            raise _missing_metadata(location) from None
        self._remember(location, metadata)
        return metadata

    def delete_file(self, location: str) -> None:
        """Remove a metadata file this server wrote but never published (a lost race)."""
        from pyiceberg.io import load_file_io

        load_file_io(properties={}, location=location).delete(location)
        self._forget(location)

    def _forget(self, location: str) -> None:
        with self._cache_lock:
            self._cache.pop(location, None)

    def _remember(self, location: str, metadata: TableMetadata) -> None:
        with self._cache_lock:
            self._cache[location] = metadata
            while len(self._cache) > _METADATA_CACHE_ENTRIES:
                self._cache.popitem(last=False)


def _missing_metadata(location: str) -> ApiError:
    return ApiError(404, "NotFoundException", f"Failed to open input stream for file: {location}")


def _metadata_version(location: str) -> int:
    """The leading number of ``00012-<uuid>.metadata.json``; -1 if it has none."""
    head = location.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(head) if head.isdigit() else -1
