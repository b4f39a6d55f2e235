"""The one place that turns catalog objects into lakekv keys.

Layout (DESIGN.md §7), every name already validated by :mod:`catalog.names`
(so no part contains a control character, which makes ``\\x00`` and ``\\x01``
safe separators):

=====================================  =========================================
``ns/<a>\\x00<b>``                      namespace ``a.b``: JSON {created, ...}
``nsprop/<a>\\x00<b>\\x01<key>``         one namespace property (own key: updates
                                       of different keys never conflict)
``obj/<a>\\x00<b>\\x01<name>``           table or view ``a.b.name``: JSON pointer
                                       {kind, id} (views keep their definition here)
``tbl/<id>/def``                       table definition: schema with field ids,
                                       partition columns, format, location
``tbl/<id>/prop/<key>``                one table property
``tbl/<id>/file/<file id>``            one live data file and its statistics
``tbl/<id>/gone/<file id>``            a removed file: path and removing version
``tbl/<id>/layout``                    the table keeps the planning index below for
                                       every live file (:mod:`catalog.file_index`)
``tbl/<id>/pidx/<part>/<file id>``     partition index: one key per live file under
                                       its partition's token; value: its group id
``tbl/<id>/grp/<group id>``            one group (the files one commit added):
                                       per-column min/max/null count, rows
``tbl/<id>/gfile/<group>/<file id>``   the group's live files (empty values)
``tbl/<id>/gpack/<group id>``          the group's live files' entries, packed in
                                       columns (:mod:`catalog.file_columns`)
``sys/...``                            durable transactions and locks
``lake/retention/window``              the lakehouse's retention window: JSON
                                       {window_s} (absent: the engine default)
``lake/retention/floor``               versions below this may have lost data
                                       files: JSON {version} (never lowered)
``lake/location/<uri>\x00<id>``         an Iceberg table's normalized location
                                       (:mod:`catalog.table_locations`); value:
                                       the table's name
``lake/location-index``                every Iceberg table's location is indexed
                                       (absent: an older lakehouse, read linearly)
=====================================  =========================================

Appends only create ``file/`` keys (and their ``pidx/``, ``grp/``,
``gfile/`` and ``gpack/`` index keys) with fresh ids and read ``def``, so appends to one
table never touch a shared key and never conflict with each other; an overwrite scans the ``file/`` range, so it conflicts with an append
that lands inside it (SERIALIZABLE range validation).
"""

from __future__ import annotations

from typing import Final, Sequence

NS: Final = b"ns/"
NS_PROP: Final = b"nsprop/"
OBJ: Final = b"obj/"
TBL: Final = b"tbl/"
SYS: Final = b"sys/"
LAKE: Final = b"lake/"
RETENTION_WINDOW: Final = LAKE + b"retention/window"
RETENTION_FLOOR: Final = LAKE + b"retention/floor"
TABLE_LOCATIONS: Final = LAKE + b"location/"
TABLE_LOCATIONS_COMPLETE: Final = LAKE + b"location-index"
_PART: Final = b"\x00"
_LEAF: Final = b"\x01"


def _ns(parts: Sequence[str]) -> bytes:
    return _PART.join(p.encode() for p in parts)


def namespace(parts: Sequence[str]) -> bytes:
    """The key of namespace ``parts``'s record."""
    return NS + _ns(parts)


def namespace_children(parent: Sequence[str]) -> bytes:
    """Prefix of every namespace below ``parent`` (all of them for ``()``)."""
    return NS + _ns(parent) + _PART if parent else NS


def namespace_from_key(key: bytes) -> tuple[str, ...]:
    """The namespace parts a namespace key names (the inverse of :func:`namespace`)."""
    return tuple(p.decode() for p in key[len(NS) :].split(_PART))


def namespace_property(parts: Sequence[str], name: str) -> bytes:
    """The key of property ``name`` of namespace ``parts``."""
    return namespace_properties(parts) + name.encode()


def namespace_properties(parts: Sequence[str]) -> bytes:
    """Prefix of every property of namespace ``parts``."""
    return NS_PROP + _ns(parts) + _LEAF


def obj(parts: Sequence[str], name: str) -> bytes:
    """The key of the pointer to table or view ``name`` in namespace ``parts``."""
    return entries_in(parts) + name.encode()


def entries_in(parts: Sequence[str]) -> bytes:
    """Prefix of the tables and views directly in namespace ``parts``."""
    return OBJ + _ns(parts) + _LEAF


def table_def(table_id: str) -> bytes:
    """The key of the table's definition."""
    return TBL + table_id.encode() + b"/def"


def table_properties(table_id: str) -> bytes:
    """Prefix of every property of the table."""
    return TBL + table_id.encode() + b"/prop/"


def table_property(table_id: str, name: str) -> bytes:
    """The key of the table's property ``name``."""
    return table_properties(table_id) + name.encode()


def table_files(table_id: str) -> bytes:
    """Prefix of the table's live data file entries."""
    return TBL + table_id.encode() + b"/file/"


def table_file(table_id: str, file_id: str) -> bytes:
    """The key of the table's live data file ``file_id``."""
    return table_files(table_id) + file_id.encode()


def table_gone(table_id: str) -> bytes:
    """Prefix of the table's removed data files that GC has not deleted yet."""
    return TBL + table_id.encode() + b"/gone/"


def table_gone_file(table_id: str, file_id: str) -> bytes:
    """The key of the table's removed data file ``file_id``."""
    return table_gone(table_id) + file_id.encode()


def table_layout(table_id: str) -> bytes:
    """The key whose presence says every live file of the table is in its planning index."""
    return TBL + table_id.encode() + b"/layout"


def partition_index(table_id: str, token: str) -> bytes:
    """Prefix of the partition index keys of the files in the partition with ``token``."""
    return TBL + table_id.encode() + b"/pidx/" + token.encode() + b"/"


def partition_index_prefix(table_id: str) -> bytes:
    """Prefix of every partition index key of the table."""
    return TBL + table_id.encode() + b"/pidx/"


def file_groups(table_id: str) -> bytes:
    """Prefix of the table's file group summaries."""
    return TBL + table_id.encode() + b"/grp/"


def file_group(table_id: str, group_id: str) -> bytes:
    """The key of the summary of file group ``group_id``."""
    return file_groups(table_id) + group_id.encode()


def group_files_prefix(table_id: str) -> bytes:
    """Prefix of every group membership key of the table."""
    return TBL + table_id.encode() + b"/gfile/"


def group_files(table_id: str, group_id: str) -> bytes:
    """Prefix of the membership keys of the live files of group ``group_id``."""
    return group_files_prefix(table_id) + group_id.encode() + b"/"


def group_packs(table_id: str) -> bytes:
    """Prefix of the table's packed file groups."""
    return TBL + table_id.encode() + b"/gpack/"


def group_pack(table_id: str, group_id: str) -> bytes:
    """The key of the packed entries of the live files of group ``group_id``."""
    return group_packs(table_id) + group_id.encode()


def table_prefix(table_id: str) -> bytes:
    """Prefix of every key of the table (definition, properties, files)."""
    return TBL + table_id.encode() + b"/"


def table_location(uri: str, table_id: str) -> bytes:
    """The key of the index entry of the Iceberg table ``table_id`` at normalized location ``uri``."""
    return table_locations_at(uri) + table_id.encode()


def table_locations_at(uri: str) -> bytes:
    """Prefix of the index entries of the tables whose location is exactly ``uri``."""
    return TABLE_LOCATIONS + uri.encode() + _PART


def table_locations_under(uri: str) -> bytes:
    """Prefix of the index entries of the tables whose location lies strictly below ``uri``."""
    return TABLE_LOCATIONS + uri.rstrip("/").encode() + b"/"


def table_id_of(key: bytes) -> str | None:
    """The table id a ``tbl/`` key belongs to, else None."""
    if not key.startswith(TBL):
        return None
    return key[len(TBL) :].split(b"/", 1)[0].decode()


def check_property_name(name: object, what: str = "property") -> str:
    """Property names: non-empty str without control characters, ≤ 1024 chars.

    Returns the name.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: it is empty, longer than 1024 characters or holds a control character.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} names must be str, got {type(name).__name__}")
    if not name or len(name) > 1024 or any(ord(c) < 0x20 for c in name):
        raise ValueError(f"{what} name {name[:60]!r} must be 1-1024 characters without control characters")
    return name


def check_properties(props: object, what: str = "properties") -> dict[str, str]:
    """A ``dict[str, str]`` of properties (None → empty).

    Returns a copy.

    Raises:
        TypeError: ``props`` is not a dict, or a value is not a str.
        ValueError: a bad property name (see :func:`check_property_name`).
    """
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise TypeError(f"{what} must be a dict of str to str, not {type(props).__name__}")
    for k, v in props.items():
        check_property_name(k, what)
        if not isinstance(v, str):
            raise TypeError(f"{what}[{k!r}] must be a str, not {type(v).__name__}")
    return dict(props)
