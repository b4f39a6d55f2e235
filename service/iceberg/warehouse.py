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

import os
import posixpath
import threading
import urllib.parse
import uuid
from collections import OrderedDict
from typing import Final

from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata

from service.errors import ApiError

# Parsed metadata files kept in memory; each is a few KB to a few MB.
_METADATA_CACHE_ENTRIES: Final = 256


def to_uri(location: str) -> str:
    """``location`` as a URI with a scheme; a bare absolute path becomes ``file://``.

    >>> to_uri("/data/wh"), to_uri("s3://b/p/")
    ('file:///data/wh', 's3://b/p')
    """
    if location.startswith("/"):
        location = "file://" + location
    return location.rstrip("/")


def _normalized(uri: str) -> tuple[str, str, str]:
    parts = urllib.parse.urlsplit(uri)
    path = posixpath.normpath(parts.path or "/")
    return parts.scheme, parts.netloc, path


class Warehouse:
    """The root location of Iceberg tables served by this server."""

    def __init__(self, root: str) -> None:
        self.root = to_uri(root)
        self._scheme, self._netloc, self._path = _normalized(self.root)
        if not self._scheme:
            raise ValueError(f"warehouse must be an absolute path or a URI, got {root!r}")
        self._cache: OrderedDict[str, TableMetadata] = OrderedDict()
        self._cache_lock = threading.Lock()

    @classmethod
    def for_lakehouse(cls, lakehouse_url: str, explicit: str | None) -> Warehouse:
        """``explicit`` if given, else ``<lakehouse>/iceberg`` for a local or s3 lakehouse."""
        if explicit:
            return cls(explicit)
        if "://" not in lakehouse_url or lakehouse_url.startswith("file://"):
            path = lakehouse_url.removeprefix("file://")
            return cls(os.path.abspath(path) + "/iceberg")
        if lakehouse_url.startswith("s3://"):
            return cls(lakehouse_url.rstrip("/") + "/iceberg")
        raise ValueError(
            f"no default warehouse for {lakehouse_url!r}: Iceberg clients must reach table files, "
            "so pass --warehouse (a shared path or an s3:// URI)"
        )

    def check(self, location: str, what: str) -> str:
        """Return ``location`` as a URI if it lies inside the warehouse, else raise ApiError 400."""
        if not isinstance(location, str) or not location:
            raise ApiError(400, "BadRequestException", f"{what} must be a non-empty string")
        uri = to_uri(location)
        scheme, netloc, path = _normalized(uri)
        inside = (scheme, netloc) == (self._scheme, self._netloc) and (
            path == self._path or path.startswith(self._path.rstrip("/") + "/")
        )
        if not inside or ".." in uri.split("/"):
            raise ApiError(400, "BadRequestException", f"{what} {location!r} is outside the warehouse {self.root!r}")
        return uri

    def default_table_location(self, namespace: str, name: str) -> str:
        """A fresh location per table: a dropped and re-created name never shares files."""
        return f"{self.root}/{namespace.replace('.', '/')}/{name}-{uuid.uuid4().hex}"

    def next_metadata_location(self, metadata: TableMetadata, previous: str | None) -> str:
        """``<location>/metadata/<version+1>-<uuid>.metadata.json``, as Iceberg names them."""
        version = 0 if previous is None else _metadata_version(previous) + 1
        provider = load_location_provider(metadata.location, metadata.properties)
        return self.check(provider.new_table_metadata_file_location(version), "metadata location")

    def write_metadata(self, metadata: TableMetadata, location: str) -> None:
        io = load_file_io(properties={}, location=location)
        ToOutputFile.table_metadata(metadata, io.new_output(location))
        self._remember(location, metadata)

    def read_metadata(self, location: str) -> TableMetadata:
        with self._cache_lock:
            cached = self._cache.get(location)
            if cached is not None:
                self._cache.move_to_end(location)
                return cached
        io = load_file_io(properties={}, location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        self._remember(location, metadata)
        return metadata

    def delete_file(self, location: str) -> None:
        """Remove a metadata file this server wrote but never published (a lost race)."""
        load_file_io(properties={}, location=location).delete(location)
        with self._cache_lock:
            self._cache.pop(location, None)

    def _remember(self, location: str, metadata: TableMetadata) -> None:
        with self._cache_lock:
            self._cache[location] = metadata
            while len(self._cache) > _METADATA_CACHE_ENTRIES:
                self._cache.popitem(last=False)


def _metadata_version(location: str) -> int:
    """The leading number of ``00012-<uuid>.metadata.json``; -1 if it has none."""
    head = location.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(head) if head.isdigit() else -1
