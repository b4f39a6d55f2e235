"""Iceberg REST identifiers to catalog names, validated before anything else.

The protocol sends a namespace as its parts: in paths joined by the unit
separator ``\\x1f`` (each part percent-encoded, decoded by the router), in
JSON as a list. The catalog names namespaces with dots (``"a.b"``) and tables
``"<ns>.<table>"``, so a part may not contain a dot; every other rule (no
control characters, no ``/``, no ``..``, bounded length, Unicode NFC as
:mod:`catalog.names` requires) is checked here too, so no client string
reaches a key or a path unchecked.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final

from service.errors import ApiError

NAMESPACE_SEPARATOR: Final = "\x1f"
MAX_PART_CHARS: Final = 255
MAX_NAMESPACE_DEPTH: Final = 16
# Printable, no path or namespace separators; must not start with a dot.
_PART = re.compile(r"[^\x00-\x1f\x7f./\\]{1,255}")


def check_part(part: object, what: str) -> str:
    """Return ``part`` if it is a valid namespace part or table/view name, else raise ApiError 400.

    >>> check_part("sales_2024", "table name")
    'sales_2024'
    """
    if not isinstance(part, str):
        raise ApiError(400, "BadRequestException", f"{what} must be a string, not {type(part).__name__}")
    if not _PART.fullmatch(part) or part in ("..",):
        raise ApiError(
            400, "BadRequestException",
            f"invalid {what} {part!r}: 1-{MAX_PART_CHARS} characters, no control characters, '.', '/' or '\\\\'",
        )
    if not unicodedata.is_normalized("NFC", part):
        raise ApiError(
            400, "BadRequestException",
            f"invalid {what} {part!r}: not in Unicode NFC (write {unicodedata.normalize('NFC', part)!r})",
        )
    return part


def namespace_from_parts(parts: Any) -> str:
    """The catalog's dotted namespace name of a list of parts (validated).

    >>> namespace_from_parts(["a", "b"])
    'a.b'
    """
    if not isinstance(parts, (list, tuple)) or not parts:
        raise ApiError(400, "BadRequestException", "namespace must be a non-empty list of strings")
    if len(parts) > MAX_NAMESPACE_DEPTH:
        raise ApiError(400, "BadRequestException", f"namespace is deeper than {MAX_NAMESPACE_DEPTH} levels")
    return ".".join(check_part(part, "namespace part") for part in parts)


def namespace_from_path(text: str) -> str:
    """The dotted namespace name of a path parameter (parts joined by ``\\x1f``)."""
    return namespace_from_parts(text.split(NAMESPACE_SEPARATOR))


def parts_of(dotted: str) -> list[str]:
    return dotted.split(".")


def table_name(namespace: str, name: Any) -> str:
    """The catalog's full name ``<ns>.<name>`` (name validated)."""
    return f"{namespace}.{check_part(name, 'table name')}"


def identifier_from_json(data: Any, what: str = "identifier") -> str:
    """The full name of a JSON ``{"namespace": [...], "name": ...}``."""
    if not isinstance(data, dict):
        raise ApiError(400, "BadRequestException", f"{what} must be an object with namespace and name")
    return table_name(namespace_from_parts(data.get("namespace")), data.get("name"))


def identifier_to_json(full_name: str) -> dict[str, Any]:
    """Inverse of :func:`identifier_from_json`.

    >>> identifier_to_json("a.b.t")
    {'namespace': ['a', 'b'], 'name': 't'}
    """
    *namespace, name = full_name.split(".")
    return {"namespace": namespace, "name": name}
