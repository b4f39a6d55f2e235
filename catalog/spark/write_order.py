"""The table property ``write.ordered-by``: the order Spark's native writes put a table's rows in.

Spark's SQL has no ``WRITE ORDERED BY`` clause without Iceberg's SQL
extensions, so the order is a table property, set at ``CREATE TABLE ...
TBLPROPERTIES`` or with ``ALTER TABLE ... SET TBLPROPERTIES``: a list of
columns, each optionally followed by ``ASC`` or ``DESC``. The JVM side
(``WriteOrder.java``) asks Spark for a range distribution on it and a sort
within each task. This module checks a value when it is set, so a bad one is
refused then and not at the next write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["WRITE_ORDER_PROPERTY", "check_write_order"]

WRITE_ORDER_PROPERTY: Final = "write.ordered-by"


def check_write_order(value: str, columns: Sequence[str]) -> None:
    """Check a ``write.ordered-by`` value against a table's ``columns``.

    >>> check_write_order("day, id DESC", ["id", "day"])
    >>> check_write_order("nope", ["id"])
    Traceback (most recent call last):
    ...
    ValueError: table property write.ordered-by = 'nope': no column 'nope' (columns: id)

    Raises:
        ValueError: a term is not a column of the table, optionally followed by ASC or DESC.
    """
    terms = [term.strip() for term in value.split(",")]
    if not value.strip():
        raise ValueError(f"table property {WRITE_ORDER_PROPERTY} is empty: give columns (e.g. 'day, id DESC')")
    for term in terms:
        words = term.split()
        if not words or len(words) > 2 or (len(words) == 2 and words[1].upper() not in ("ASC", "DESC")):
            raise ValueError(
                f"table property {WRITE_ORDER_PROPERTY} = {value!r}: {term!r} is not a column name, optionally followed by ASC or DESC"
            )
        if words[0] not in columns:
            raise ValueError(f"table property {WRITE_ORDER_PROPERTY} = {value!r}: no column {words[0]!r} (columns: {', '.join(columns)})")
