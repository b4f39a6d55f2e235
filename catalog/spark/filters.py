"""Spark pushed filters → a pruning predicate over data files.

PySpark (≥ 4.1, with ``spark.sql.python.filterPushdown.enabled``) hands the
reader a conjunction of simple filters. We translate the ones we can into one
``pyarrow.compute`` expression and let the catalog (``Table.files(filter=)``)
drop the data files whose partition values or min/max statistics prove that no
row can match.

Pruning is the only use: the reader gives every filter back to Spark, which
re-applies it to the rows it gets. So a translation only has to be
*conservative* (never drop a file holding a matching row), not exact, and a
filter we cannot translate costs nothing but the pruning it would have given.

Left out on purpose:

* comparisons on ``float``/``double`` columns: Spark orders NaN above every
  number (``x > 5`` is true for NaN) while Parquet min/max statistics ignore
  NaN, so a file whose max is 3 may still hold matching NaN rows;
* nested column paths (``a.b``): the catalog keeps statistics per top-level
  column only;
* ``Not``, ``StringEndsWith``, ``StringContains``: min/max cannot refute them;
* comparisons on ``CHAR(n)`` columns: Spark pads the values it reads and the
  literal it compares them with, while other writers may have stored a value
  short (``catalog.spark.types.is_char_column``).

``StringStartsWith(c, p)`` becomes the range ``p <= c < successor(p)``, which
min/max statistics can refute; Spark compares strings by code point
(UTF8_BINARY), the same order as Arrow and Python.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from catalog.spark.types import is_char_column

_log = logging.getLogger(__name__)

__all__ = ["exact_scalar", "filter_expression", "prefix_successor", "pruning_expression"]

_MAX_CODE_POINT = 0x10FFFF


def prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``.

    ``None`` when there is none (the prefix is empty or all maximal code points).

    >>> prefix_successor("abc")
    'abd'
    >>> prefix_successor("a\\U0010ffff")
    'b'
    >>> prefix_successor("") is None
    True
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < _MAX_CODE_POINT:
            nxt = last + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not valid in UTF-8
                nxt = 0xE000
            return "".join(chars) + chr(nxt)
    return None


def exact_scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the column's type, or None when it cannot be one exactly.

    pyarrow converts some values with loss (``1.5`` into an int column is 1, a
    microsecond into a millisecond timestamp is dropped); a filter over such a
    literal would select other rows than Spark's, so those are None too.
    """
    if value is None:
        return None
    if pa.types.is_timestamp(arrow_type):
        # Spark sends TIMESTAMP literals as UTC-aware datetimes and
        # TIMESTAMP_NTZ ones as naive; a mismatch would shift the instant.
        if not isinstance(value, dt.datetime) or (value.tzinfo is not None) != (arrow_type.tz is not None):
            return None
    try:
        scalar = pa.scalar(value, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        _log.debug("literal %r does not fit %s: %s", value, arrow_type, exc)
        return None
    return scalar if scalar.as_py() == value else None


def _is_orderable(arrow_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(arrow_type)
        or pa.types.is_decimal(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_date(arrow_type)
        or pa.types.is_timestamp(arrow_type)
        or pa.types.is_boolean(arrow_type)
    )


def filter_expression(spark_filter: Filter, schema: pa.Schema) -> pc.Expression | None:
    """The pruning expression for one Spark filter, or None if it cannot prune.

    Args:
        spark_filter: one of the filters PySpark passes to ``pushFilters``.
        schema: the table's Arrow schema (column types decide the literals).
    """
    attribute = getattr(spark_filter, "attribute", None)
    if attribute is None or len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    name = attribute[0]
    arrow_type = schema.field(name).type
    column = pc.field(name)

    if isinstance(spark_filter, IsNull):
        return column.is_null()
    if isinstance(spark_filter, IsNotNull):
        return column.is_valid()
    if not _is_orderable(arrow_type) or is_char_column(schema.field(name)):
        return None
    if isinstance(spark_filter, StringStartsWith):
        if not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)):
            return None
        low = exact_scalar(spark_filter.value, arrow_type)
        if low is None:
            return None
        successor = prefix_successor(spark_filter.value)
        if successor is None:
            return column >= low
        return (column >= low) & (column < pa.scalar(successor, type=arrow_type))
    if isinstance(spark_filter, In):
        literals = [exact_scalar(v, arrow_type) for v in spark_filter.value if v is not None]
        values = [literal.as_py() for literal in literals if literal is not None]
        if not values or len(values) != len(literals):
            return None
        return column.isin(pa.array(values, type=arrow_type))

    literal = exact_scalar(spark_filter.value, arrow_type)  # type: ignore[attr-defined]
    if literal is None:
        return None
    if isinstance(spark_filter, (EqualTo, EqualNullSafe)):
        return column == literal
    if isinstance(spark_filter, GreaterThan):
        return column > literal
    if isinstance(spark_filter, GreaterThanOrEqual):
        return column >= literal
    if isinstance(spark_filter, LessThan):
        return column < literal
    if isinstance(spark_filter, LessThanOrEqual):
        return column <= literal
    return None


def pruning_expression(filters: Sequence[Filter], schema: pa.Schema) -> pc.Expression | None:
    """The AND of every filter that can prune, or None when none can."""
    result: pc.Expression | None = None
    for spark_filter in filters:
        expression = filter_expression(spark_filter, schema)
        if expression is not None:
            result = expression if result is None else result & expression
    return result
