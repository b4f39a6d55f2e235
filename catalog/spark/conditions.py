"""Spark's filters from the catalog plugin: as PySpark filters for pruning, or as an exact row filter.

:func:`spark_filters` turns a scan's pushed filters (JSON leaves) into
PySpark filter objects, which :mod:`catalog.spark.filters` translates for
pruning. :func:`exact_condition` turns a ``DELETE ... WHERE`` condition into
an exact row filter.

The plugin sends Spark's V1 filters (``Filters.java``) as JSON trees: the
leaves of :mod:`catalog.spark.filters` plus ``And``/``Or``/``Not`` and
``AlwaysTrue``/``AlwaysFalse``. Pruning may approximate; a delete may not, so
each node becomes the ``pyarrow.compute`` expression that is true for exactly
the rows where Spark's predicate is true, and null where Spark's is null
(Arrow's ``&``, ``|`` and ``~`` use the same three-valued logic as SQL). What
cannot be translated exactly is a ``ValueError`` naming it, before anything
is deleted:

* ``float``/``double`` columns: Spark treats ``NaN = NaN`` as true and NaN as
  larger than every number, Arrow as unordered;
* ``CHAR(n)`` columns: Spark pads their values and the literal, values other
  writers stored may be short;
* nested fields, and literals the column's type cannot hold exactly.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any, Final

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

from catalog.spark.filters import exact_scalar
from catalog.spark.types import is_char_column

__all__ = ["exact_condition", "literal", "spark_filters"]


def literal(encoded: Any) -> Any:
    """A filter literal from its JSON form (see ``Filters.java``).

    Raises:
        ValueError: ``encoded`` is no literal form this knows, or its date, time
            or microsecond count does not parse.
        TypeError: a date, time or microsecond count of the wrong JSON type.

    >>> literal({"decimal": "1.50"})
    Decimal('1.50')
    >>> literal({"date": "2024-02-29"})
    datetime.date(2024, 2, 29)
    >>> literal({"timestamp_us": 0})
    datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if encoded is None or isinstance(encoded, (bool, int, float, str)):
        return encoded
    if isinstance(encoded, dict) and len(encoded) == 1:
        (kind, value), = encoded.items()
        if kind == "decimal":
            try:
                return decimal.Decimal(value)
            except (decimal.InvalidOperation, TypeError, ValueError):
                raise ValueError(f"filter literal {encoded!r}: not a decimal number") from None
        if kind == "date":
            return dt.date.fromisoformat(value)
        if kind == "timestamp_us":
            try:
                return _EPOCH + dt.timedelta(microseconds=int(value))
            except OverflowError:  # Filters.java sends none outside the years 1 to 9999
                raise ValueError(f"filter literal {encoded!r}: outside the years 1 to 9999") from None
        if kind == "timestamp_ntz":
            return dt.datetime.fromisoformat(value)
    raise ValueError(f"unknown filter literal {encoded!r}")


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


_FILTERS: Final[dict[str, Callable[..., Filter]]] = {
    "EqualTo": EqualTo,
    "EqualNullSafe": EqualNullSafe,
    "GreaterThan": GreaterThan,
    "GreaterThanOrEqual": GreaterThanOrEqual,
    "LessThan": LessThan,
    "LessThanOrEqual": LessThanOrEqual,
    "StringStartsWith": StringStartsWith,
}


def spark_filters(encoded: object) -> list[Filter]:
    """The pushed filters of a scan request as PySpark filter objects (so one translation serves both paths).

    Only the leaves of :mod:`catalog.spark.filters` are accepted (no
    ``And``/``Or``/``Not``); columns are not checked here.

    Raises:
        ValueError: ``encoded`` is not a list, or an item is not a filter object,
            has no list of names as ``attribute``, is an ``In`` without a
            ``values`` list, is of an unknown type, or has a literal
            :func:`literal` refuses.
        TypeError, decimal.InvalidOperation: a literal :func:`literal` refuses so.
    """
    if not isinstance(encoded, list):
        raise ValueError("argument 'filters' must be a list")
    result: list[Filter] = []
    for item in encoded:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ValueError(f"bad filter {item!r}")
        attribute = _attribute(item)
        kind = item["type"]
        if kind == "IsNull":
            result.append(IsNull(attribute))
        elif kind == "IsNotNull":
            result.append(IsNotNull(attribute))
        elif kind == "In":
            values = item.get("values")
            if not isinstance(values, list):
                raise ValueError(f"filter In needs 'values': {item!r}")
            result.append(In(attribute, tuple(literal(v) for v in values)))
        elif kind in _FILTERS:
            result.append(_FILTERS[kind](attribute, literal(item.get("value"))))
        else:
            raise ValueError(f"unknown filter type {kind!r}")
    return result


def _attribute(item: dict[str, Any]) -> tuple[str, ...]:
    value = item.get("attribute")
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        raise ValueError(f"filter {item!r}: 'attribute' must be a list of names")
    return tuple(value)


_COMPARISONS = {
    "EqualTo": lambda c, v: c == v,
    "GreaterThan": lambda c, v: c > v,
    "GreaterThanOrEqual": lambda c, v: c >= v,
    "LessThan": lambda c, v: c < v,
    "LessThanOrEqual": lambda c, v: c <= v,
}


def exact_condition(encoded: object, schema: pa.Schema) -> pc.Expression:
    """The AND of the encoded filters (a JSON list) as one exact expression over ``schema``.

    Raises:
        ValueError: a filter that has no exact translation, naming it.
    """
    if not isinstance(encoded, list) or not encoded:
        raise ValueError("a delete condition is a non-empty list of filters")
    result = _node(encoded[0], schema)
    for item in encoded[1:]:
        result = result & _node(item, schema)
    return result


def _node(item: object, schema: pa.Schema) -> pc.Expression:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise ValueError(f"bad filter {item!r}")
    kind = item["type"]
    if kind == "AlwaysTrue":
        return pc.scalar(True)
    if kind == "AlwaysFalse":
        return pc.scalar(False)
    if kind in ("And", "Or"):
        left, right = _node(item.get("left"), schema), _node(item.get("right"), schema)
        return left & right if kind == "And" else left | right
    if kind == "Not":
        return ~_node(item.get("child"), schema)
    name, arrow_type = _column(item, schema)
    column = pc.field(name)
    if kind == "IsNull":
        return column.is_null()
    if kind == "IsNotNull":
        return column.is_valid()
    if is_char_column(schema.field(name)):
        raise ValueError(
            f"DELETE on CHAR column {name!r} is not supported: Spark pads its values and the literal, while "
            "values other writers stored may be short, so the rows deleted could differ from the rows Spark selects"
        )
    if pa.types.is_floating(arrow_type):
        raise ValueError(
            f"DELETE on float/double column {name!r} is not supported: Spark orders NaN above every number "
            "and Arrow does not, so the rows deleted could differ from the rows Spark selects"
        )
    if kind == "In":
        values = item.get("values")
        if not isinstance(values, list):
            raise ValueError(f"filter In needs 'values': {item!r}")
        if not values:
            return pc.scalar(False)
        # x IN (a, b) is x = a OR x = b in SQL, nulls included (Arrow's is_in
        # is false, not null, for a null x, which NOT would turn into true).
        alternatives = [column == _scalar(v, arrow_type, name) for v in values]
        result = alternatives[0]
        for alternative in alternatives[1:]:
            result = result | alternative
        return result
    value = item.get("value")
    if kind == "StringStartsWith":
        if not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)) or not isinstance(value, str):
            raise ValueError(f"filter {kind} on column {name!r} ({arrow_type}) has no exact translation")
        return pc.starts_with(column, value)
    if kind == "EqualNullSafe":
        if value is None:
            return column.is_null()
        # Never null: false where the column is null.
        return pc.if_else(column.is_null(), False, column == _scalar(value, arrow_type, name))
    if kind in _COMPARISONS:
        return _COMPARISONS[kind](column, _scalar(value, arrow_type, name))
    raise ValueError(f"filter {kind} has no exact translation for a delete")


def _column(item: dict[str, Any], schema: pa.Schema) -> tuple[str, pa.DataType]:
    attribute = item.get("attribute")
    if not isinstance(attribute, list) or len(attribute) != 1 or not isinstance(attribute[0], str):
        raise ValueError(f"filter {item.get('type')} on {attribute!r}: only top-level columns can be compared")
    name = attribute[0]
    if name not in schema.names:
        raise ValueError(f"filter on {name!r}, which is not a column (columns: {', '.join(schema.names)})")
    return name, schema.field(name).type


def _scalar(encoded: object, arrow_type: pa.DataType, name: str) -> pa.Scalar:
    value = literal(encoded)
    if value is None:
        return pa.scalar(None, type=arrow_type)  # a comparison with NULL is null: no row is deleted
    scalar = exact_scalar(value, arrow_type)
    if scalar is None:
        raise ValueError(f"literal {value!r} does not fit column {name!r} ({arrow_type}) exactly")
    return scalar
