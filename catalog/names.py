"""Names of namespaces, tables and views: validation and parsing.

A name is dotted: ``"sales.eu.orders"`` is table ``orders`` in namespace
``sales.eu``. Every part is checked here, before it reaches a key or a path:
no empty parts, no ``.``/``..``, no ``/`` or ``\\``, no control characters,
no NUL (the key separator), at most :data:`MAX_PART_CHARS` characters a part
and :data:`MAX_DEPTH` parts, and every part in Unicode NFC. A violation raises
``ValueError`` naming the part.

Why NFC, and why refuse rather than normalise: ``"café"`` typed as ``e`` +
combining accent (NFD, as macOS file names are) and as ``é`` (NFC, as
keyboards type it) look the same but are different strings, so they used to
name two namespaces. Refusing keeps every name stored exactly as its caller
wrote it, so a name read back (a listing, a history entry, Spark's
identifiers) always equals the one used, and each name has one spelling. The
Spark plugin and the Iceberg REST API reach the catalog through here.

>>> split_table_name("sales.eu.orders")
(('sales', 'eu'), 'orders')
>>> join(("sales", "eu"))
'sales.eu'
>>> parse_namespace("sales..eu")
Traceback (most recent call last):
...
ValueError: namespace 'sales..eu': part 2 is empty
"""

from __future__ import annotations

import unicodedata
from typing import Final, Sequence

MAX_PART_CHARS: Final = 255
MAX_DEPTH: Final = 16
_FORBIDDEN: Final = frozenset("./\\\x00")

Namespace = tuple[str, ...]


def _check_part(what: str, name: str, index: int, part: str) -> None:
    where = f"{what} {name!r}: part {index}"
    if not part:
        raise ValueError(f"{where} is empty")
    if part in (".", ".."):
        raise ValueError(f"{where} is {part!r}")
    if len(part) > MAX_PART_CHARS:
        raise ValueError(f"{where} is longer than {MAX_PART_CHARS} characters")
    for ch in part:
        if ch in _FORBIDDEN or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            raise ValueError(f"{where} ({part[:40]!r}) contains the forbidden character {ch!r}")
    if not unicodedata.is_normalized("NFC", part):
        raise ValueError(
            f"{where} ({part[:40]!r}) is not in Unicode NFC: write it as "
            f"{unicodedata.normalize('NFC', part)[:40]!r} (unicodedata.normalize('NFC', name))"
        )


def parse(name: object, what: str = "name") -> Namespace:
    """Split and validate a dotted name (or a sequence of parts) into parts.

    Raises:
        TypeError: ``name`` is not a str or a list/tuple of str.
        ValueError: more than :data:`MAX_DEPTH` parts, or a bad part (empty, ``.``
            or ``..``, too long, or holding a forbidden character).
    """
    if isinstance(name, str):
        parts: Sequence[object] = name.split(".")
    elif isinstance(name, (tuple, list)):
        parts = name
        if not all(isinstance(p, str) for p in parts):
            raise TypeError(f"{what} parts must be str, got {name!r}")
    else:
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    shown = name if isinstance(name, str) else ".".join(str(p) for p in parts)
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"{what} {shown!r} has more than {MAX_DEPTH} parts")
    for i, part in enumerate(parts, 1):
        _check_part(what, shown, i, part)  # type: ignore[arg-type]
    return tuple(parts)  # type: ignore[arg-type]


def parse_namespace(name: object) -> Namespace:
    """A validated namespace path (at least one part)."""
    return parse(name, "namespace")


def split_table_name(name: object, what: str = "table") -> tuple[Namespace, str]:
    """``"a.b.t"`` → ``(("a", "b"), "t")``; an object needs a namespace.

    Raises:
        TypeError / ValueError: a malformed name (see :func:`parse`), or one without a namespace.
    """
    parts = parse(name, what)
    if len(parts) < 2:
        raise ValueError(f"{what} name {join(parts)!r} needs a namespace: write '<namespace>.{join(parts)}'")
    return parts[:-1], parts[-1]


def join(parts: Sequence[str]) -> str:
    """The dotted form of a validated name."""
    return ".".join(parts)
