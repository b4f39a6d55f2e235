"""Iceberg tables' locations: their one normalized form, and the index that finds overlapping ones.

A table's location must not be equal to, inside or around another Iceberg
table's (purging one table must never delete another's files). Finding the
tables a location overlaps must not cost a read of every table: each Iceberg
table's normalized location is kept under ``lake/location/`` (see
:mod:`catalog.keys`), written and deleted by the same op, in the same
transaction, as the table's definition (create, drop, rename). A location
overlaps exactly the tables indexed at one of its ancestors (or itself) and
those indexed below it: one short scan per path segment and one scan below.

An op that creates an Iceberg table reads those same ranges, so two racing
creates of overlapping locations conflict (SERIALIZABLE), and refuses a
location that overlaps one already indexed.

Lakehouses made before the index hold tables that are not in it: the
``lake/location-index`` marker, written by :func:`build` with every table's
entry in one transaction, says the index is complete; until then callers
list the tables instead.

Locations are URIs (``file:///abs/dir``, ``s3://bucket/prefix``); a bare
absolute path is taken as ``file://``. :func:`normalize` decodes a location
the way the file IO that opens it does and refuses ambiguous ones.
"""

from __future__ import annotations

import unicodedata
import urllib.parse
from typing import Any, Final

from catalog import keys
from catalog.access import CatalogReader, CatalogWriter, KVReader
from catalog.names import join
from catalog.records import ICEBERG, TABLE, TableDef

# Schemes that name the same storage as the key: pyiceberg's and pyarrow's
# file IO open s3a:// and s3n:// as s3://.
_SCHEMES: Final = {"file": "file", "s3": "s3", "s3a": "s3", "s3n": "s3"}
_FORBIDDEN: Final = frozenset("\\?#")


def to_uri(location: str) -> str:
    """``location`` as a URI with a scheme; a bare absolute path becomes ``file://``.

    >>> to_uri("/data/wh"), to_uri("s3://b/p/")
    ('file:///data/wh', 's3://b/p')
    """
    if location.startswith("/"):
        location = "file://" + location
    return location.rstrip("/")


def _dot_segment(segment: str) -> bool:
    """Whether some server or client may take ``segment`` for ``.`` or ``..``.

    Only dots (and spaces, which Windows strips), also as compatibility
    characters (``\uff0e``, ``\u2025``), or such a segment with ``;``
    parameters, which servlet containers drop (``..;``).

    >>> [_dot_segment(s) for s in ("..;", ".;x", "...", "\uff0e\uff0e", ". ", "a.", ".hidden")]
    [True, True, True, True, True, False, False]
    """
    head = unicodedata.normalize("NFKC", segment.split(";", 1)[0]).strip(" ")
    return not head.strip(".")


def normalize(location: object, what: str = "location") -> str:
    """``location`` as the one URI the filesystem that uses it will open.

    What a client sends is decoded the way the file IO decodes it (one round
    of percent-decoding, scheme case, ``s3a``/``s3n`` as ``s3``, ``localhost``
    as no host, ``.`` and empty segments dropped), and refused when it is
    ambiguous: a ``..`` segment or one some server or client may read as
    ``.`` or ``..`` (``..;``, ``.;x``, ``...``, fullwidth dots), a ``%`` left
    after decoding (double encoding), a backslash, query or fragment, or a
    control character.

    >>> normalize("FILE:///wh//ns/./t/")
    'file:///wh/ns/t'
    >>> normalize("s3a://Bucket/wh/%74")
    's3://bucket/wh/t'

    Raises:
        ValueError: naming ``what`` and what is wrong with ``location``.
    """
    if not isinstance(location, str) or not location:
        raise ValueError(f"{what} must be a non-empty string")
    bad = next((c for c in location if c in _FORBIDDEN or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ValueError(f"{what} {location!r} contains the character {bad!r}")
    parts = urllib.parse.urlsplit(to_uri(location))
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ValueError(f"{what} {location!r}: scheme {parts.scheme!r} is not file or s3")
    netloc = parts.netloc.lower()
    if scheme == "file" and netloc in ("", "localhost"):
        netloc = ""
    elif scheme == "file" or not netloc or "@" in netloc or ":" in netloc:
        raise ValueError(f"{what} {location!r}: host {parts.netloc!r} is not allowed")
    path = urllib.parse.unquote(parts.path)
    bad = next((c for c in path if c in _FORBIDDEN or c == "%" or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ValueError(f"{what} {location!r} decodes to a path with the character {bad!r}")
    segments = [s for s in path.split("/") if s not in ("", ".")]
    dots = next((s for s in segments if _dot_segment(s)), None)
    if dots is not None:
        raise ValueError(
            f"{what} {location!r} has a {dots!r} segment: read as '..' it could lead outside the warehouse"
        )
    return f"{scheme}://{netloc}/" + "/".join(segments)


def under(path: str, root: str) -> bool:
    """Whether normalized URI ``path`` is ``root`` or below it.

    >>> under("s3://b/t/x", "s3://b/t"), under("s3://b/tx", "s3://b/t"), under("s3://b/t", "s3://b/")
    (True, False, True)
    """
    return path == root or path.startswith(root.rstrip("/") + "/")


def _indexed_form(definition: TableDef) -> str | None:
    """The normalized location an Iceberg table is indexed at; None for other tables and for a
    location that does not normalize (one from before confinement: it cannot hold another table)."""
    if definition.format != ICEBERG or not definition.location:
        return None
    try:
        return normalize(definition.location)
    except ValueError:  # a pre-confinement location: not indexed, and it can hold no other table
        return None


def _ancestors(uri: str) -> list[str]:
    """``uri`` and every normalized location it lies below (``s3://b/``, ``s3://b/a``, ...)."""
    head, _, path = uri.partition("://")
    netloc, _, rest = path.partition("/")
    segments = [s for s in rest.split("/") if s]
    root = f"{head}://{netloc}/"
    return [root] + [root + "/".join(segments[:n]) for n in range(1, len(segments) + 1)]


def overlapping(kv: KVReader, location: str) -> dict[str, str]:
    """The indexed tables whose location overlaps normalized ``location``, by name (their locations).

    Reads one short range per path segment and the range below ``location``:
    nothing in it grows with the number of tables that do not overlap.
    """
    found: dict[str, str] = {}
    for prefix in [keys.table_locations_at(a) for a in _ancestors(location)] + [keys.table_locations_under(location)]:
        for key, value in kv.scan(prefix=prefix):
            found[value.decode()] = key[len(keys.TABLE_LOCATIONS):].split(b"\x00", 1)[0].decode()
    return found


def complete(kv: KVReader) -> bool:
    """Whether every Iceberg table of this view is in the index (see :func:`build`)."""
    return kv.get(keys.TABLE_LOCATIONS_COMPLETE) is not None


def created(w: CatalogWriter, definition: TableDef, name: str) -> None:
    """Index the Iceberg table ``name`` being created with ``definition``.

    Raises:
        ValueError: its location overlaps an indexed table's.
    """
    uri = _indexed_form(definition)
    if uri is None:
        return
    clash = overlapping(w.kv, uri)
    if clash:
        other = min(clash)
        raise ValueError(f"table location {definition.location!r} overlaps the location of table {other} ({clash[other]})")
    w.put(keys.table_location(uri, definition.id), name.encode())


def dropped(w: CatalogWriter, definition: TableDef) -> None:
    """Remove the index entry of the table with ``definition`` (nothing for a table that has none)."""
    uri = _indexed_form(definition)
    if uri is not None:
        w.delete(keys.table_location(uri, definition.id))


def renamed(w: CatalogWriter, definition: TableDef, new_name: str) -> None:
    """The index entry of the table with ``definition`` names it ``new_name``."""
    uri = _indexed_form(definition)
    if uri is not None:
        w.put(keys.table_location(uri, definition.id), new_name.encode())


def build(store: Any) -> None:
    """Index every Iceberg table of the lakehouse kept in ``store`` and mark the index complete, in one transaction.

    Reads every table once: done once per lakehouse (a no-op once marked), by the
    first caller that needs the index of a lakehouse made before it. A table
    created or dropped meanwhile makes it conflict and run again on the new version.
    """

    def index(txn: Any) -> None:
        if txn.get(keys.TABLE_LOCATIONS_COMPLETE) is not None:
            return
        w = CatalogWriter(txn)
        reader: CatalogReader = w
        for ns in [(), *reader.child_namespaces((), recursive=True)]:
            for name, pointer in reader.entries(ns):
                definition = reader.table_def(pointer.id) if pointer.kind == TABLE else None
                uri = _indexed_form(definition) if definition is not None else None
                if uri is not None:
                    w.put(keys.table_location(uri, pointer.id), join((*ns, name)).encode())
        w.put(keys.TABLE_LOCATIONS_COMPLETE, b"{}")
        txn.commit()

    store.refresh()
    store.run(index)
