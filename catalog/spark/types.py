"""Arrow ⇄ Spark type mapping for the ``lakehouse`` data source.

Two directions, two rules:

* **Reading** (table → Spark): :func:`spark_schema` turns a table's Arrow schema
  into the ``StructType`` the data source reports, and :func:`to_spark_batches`
  casts the Arrow data read from Parquet into *exactly* the Arrow schema Spark
  derives from that ``StructType``. Exactly, because PySpark's read worker
  compares the first batch's schema with ``to_arrow_schema(schema,
  timezone="UTC")`` and rejects any difference (``large_string`` for
  ``string``, ``list<item>`` for ``list<element>``, a zone other than UTC,
  nanoseconds for microseconds). We compute the target with Spark's own
  function instead of re-deriving its conventions, so a PySpark upgrade that
  changes them cannot silently break reads.
* **Writing** (Spark → table): :func:`check_writable` compares a DataFrame's
  ``StructType`` with the table's Arrow schema before any task runs, and names
  the first column that does not fit; :func:`to_table_batches` then casts each
  incoming Arrow batch to the table's schema. Only widening is accepted
  (``int`` into ``bigint``, ``float`` into ``double``, a decimal into a wider
  one, ``NULL`` into anything): narrowing could lose data, so it must be an
  explicit ``cast`` in the job.

Spark keeps microseconds: table timestamps with a finer unit are truncated
when read (``allow_time_truncate``), never when written.

``CHAR(n)``/``VARCHAR(n)`` columns are strings, as in Iceberg, whose Arrow
field metadata keeps Spark's type (:data:`CHAR_VARCHAR_KEY`); the
``StructType`` reports it back as Spark's own field metadata, so Spark
applies its length rules on write and pads ``CHAR`` on read. A collation
other than ``UTF8_BINARY`` is refused (:func:`column_metadata`): the catalog
compares strings by their bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from catalog.errors import SchemaMismatchError
from catalog.schema import COMMENT as COMMENT_KEY  # a column's comment, in its Arrow field metadata

__all__ = [
    "CHAR_VARCHAR_KEY",
    "column_metadata",
    "is_char_column",
    "spark_type",
    "spark_schema",
    "spark_arrow_schema",
    "to_spark_batches",
    "check_writable",
    "to_table_batches",
]

# Spark's integral types in widening order; an unsigned Arrow type maps to the
# next wider signed one so that every value fits (uint64 has no such type).
_INTEGRAL_ORDER: tuple[type[DataType], ...] = (ByteType, ShortType, IntegerType, LongType)
_SIGNED: dict[int, DataType] = {8: ByteType(), 16: ShortType(), 32: IntegerType(), 64: LongType()}
_UNSIGNED: dict[int, DataType] = {8: ShortType(), 16: IntegerType(), 32: LongType()}
# Spark decimals are at most 38 digits (a 128-bit unscaled value).
_SPARK_MAX_DECIMAL_PRECISION = 38
# Spark's field metadata for a CHAR(n)/VARCHAR(n) column stored as a string
# (CharVarcharUtils), and the Arrow field metadata key that keeps it in a table.
CHAR_VARCHAR_KEY: Final = "__CHAR_VARCHAR_TYPE_STRING"
_ARROW_CHAR_VARCHAR: Final = b"spark_char_varchar"


def spark_type(arrow_type: pa.DataType, column: str = "?") -> DataType:
    """The Spark type that holds every value of ``arrow_type``.

    Args:
        arrow_type: an Arrow type from a table schema.
        column: the column name, used only in the error message.

    Raises:
        TypeError: the type has no lossless Spark equivalent (``uint64``,
            ``float16``, time of day, durations, unions, dictionaries).

    >>> spark_type(pa.large_string())
    StringType()
    >>> spark_type(pa.timestamp("ns", tz="Europe/Paris"))
    TimestampType()
    """
    t = arrow_type
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_signed_integer(t):
        return _SIGNED[t.bit_width]
    if pa.types.is_unsigned_integer(t) and t.bit_width in _UNSIGNED:
        return _UNSIGNED[t.bit_width]
    if pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal(t) and t.precision <= _SPARK_MAX_DECIMAL_PRECISION:
        return DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return BinaryType()
    if pa.types.is_date(t):
        return DateType()
    if pa.types.is_timestamp(t):
        # A zone means "an instant" (Spark TIMESTAMP); no zone means wall-clock
        # time (Spark TIMESTAMP_NTZ). Spark stores every instant in UTC, so the
        # zone itself is not kept.
        return TimestampType() if t.tz is not None else TimestampNTZType()
    if pa.types.is_null(t):
        return NullType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        value = t.value_field
        return ArrayType(spark_type(value.type, f"{column}[]"), containsNull=value.nullable)
    if pa.types.is_struct(t):
        return StructType([_spark_field(t.field(i), f"{column}.") for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return MapType(
            spark_type(t.key_type, f"{column}.key"),
            spark_type(t.item_type, f"{column}.value"),
            valueContainsNull=t.item_field.nullable,
        )
    raise TypeError(f"column {column!r}: Arrow type {t} has no lossless Spark type")



def _collation(t: DataType) -> str | None:
    """The first collation other than UTF8_BINARY in ``t`` (nested types too), or None."""
    if isinstance(t, StringType):
        name = getattr(t, "collation", "UTF8_BINARY")
        return None if name == "UTF8_BINARY" else name
    if isinstance(t, ArrayType):
        return _collation(t.elementType)
    if isinstance(t, MapType):
        return _collation(t.keyType) or _collation(t.valueType)
    if isinstance(t, StructType):
        return next((c for c in (_collation(f.dataType) for f in t.fields) if c is not None), None)
    return None


def column_metadata(field: StructField) -> dict[bytes, bytes]:
    """The Arrow field metadata (besides the comment) a table column created from ``field`` keeps.

    That is its ``CHAR(n)``/``VARCHAR(n)`` type, from Spark's field metadata.

    Raises:
        ValueError: the column (or a type nested in it) has a collation other
            than UTF8_BINARY: the COLLATE clause is not supported.
        TypeError: the CHAR/VARCHAR metadata is not a string.
    """
    collation = _collation(field.dataType)
    if collation is not None:
        raise ValueError(
            f"column {field.name!r}: COLLATE {collation} is not supported by the lakehouse catalog, which "
            "compares strings by their bytes (UTF8_BINARY); declare the column without the COLLATE clause"
        )
    raw = field.metadata.get(CHAR_VARCHAR_KEY)
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise TypeError(f"column {field.name!r}: {CHAR_VARCHAR_KEY} must be a string, got {raw!r}")
    return {_ARROW_CHAR_VARCHAR: raw.encode()}


def is_char_column(field: pa.Field) -> bool:
    """Whether a table column is a Spark ``CHAR(n)`` (top level).

    Spark pads such values to ``n`` when it reads them and pads the literals
    it compares them with, while other writers may have stored them short: a
    comparison of the stored values with Spark's literal can differ from
    Spark's, so filters on these columns neither prune nor delete.
    """
    raw: bytes = (field.metadata or {}).get(_ARROW_CHAR_VARCHAR, b"")
    return raw.startswith(b"char(")


def _spark_field(field: pa.Field, prefix: str = "") -> StructField:
    stored = field.metadata or {}
    metadata = {}
    if COMMENT_KEY in stored:
        metadata["comment"] = stored[COMMENT_KEY].decode()
    if _ARROW_CHAR_VARCHAR in stored:
        metadata[CHAR_VARCHAR_KEY] = stored[_ARROW_CHAR_VARCHAR].decode()
    return StructField(field.name, spark_type(field.type, prefix + field.name), nullable=field.nullable, metadata=metadata or None)


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The ``StructType`` a Spark DataFrame over a table with ``arrow_schema`` has.

    Raises:
        TypeError: a column's type has no lossless Spark equivalent (names it).
    """
    return StructType([_spark_field(field) for field in arrow_schema])


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema PySpark expects read batches to have for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")


def to_spark_batches(data: pa.Table | Iterable[pa.RecordBatch], target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Cast table data into ``target`` (from :func:`spark_arrow_schema`), batch by batch.

    Columns are selected by name, so the data may carry them in another order
    or carry extra ones.
    """
    options = [pc.CastOptions(field.type, allow_time_truncate=True) for field in target]
    batches = data.to_batches() if isinstance(data, pa.Table) else data
    for batch in batches:
        columns = []
        for field, opts in zip(target, options):
            column = batch.column(field.name)
            # Most columns already have Spark's type: no cast, no copy.
            columns.append(column if column.type == field.type else pc.cast(column, options=opts))
        # from_arrays with the target schema takes its field names and
        # nullability, which Spark compares; table field metadata (ids) goes.
        yield pa.RecordBatch.from_arrays(columns, schema=target)


def _is_widening(source: DataType, target: DataType) -> bool:
    """Whether every ``source`` value is a ``target`` value unchanged."""
    if isinstance(source, NullType) or source == target:
        return True
    if isinstance(source, tuple(_INTEGRAL_ORDER)) and isinstance(target, tuple(_INTEGRAL_ORDER)):
        return _INTEGRAL_ORDER.index(type(source)) <= _INTEGRAL_ORDER.index(type(target))
    if isinstance(source, FloatType) and isinstance(target, DoubleType):
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return target.scale >= source.scale and (target.precision - target.scale) >= (
            source.precision - source.scale
        )
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return _is_widening(source.elementType, target.elementType)
    if isinstance(source, MapType) and isinstance(target, MapType):
        return _is_widening(source.keyType, target.keyType) and _is_widening(source.valueType, target.valueType)
    if isinstance(source, StructType) and isinstance(target, StructType):
        if source.fieldNames() != target.fieldNames():
            return False
        return all(_is_widening(s.dataType, t.dataType) for s, t in zip(source.fields, target.fields))
    return False


def check_writable(data_schema: StructType, table_schema: pa.Schema, table: str = "?") -> None:
    """Refuse a DataFrame whose columns do not fit the table, naming the column.

    Columns are matched by name (exactly; column order does not matter), as
    the catalog's own writes do: a missing nullable column is written as
    nulls, a missing required column or a column the table does not have is
    an error rather than silently dropped.

    Raises:
        SchemaMismatchError: a missing required or extra column, or a type
            that is not a widening of the table column's type.
    """
    target = spark_schema(table_schema)
    by_name = {field.name: field for field in data_schema.fields}
    for field in target.fields:
        source = by_name.pop(field.name, None)
        if source is None:
            if field.nullable:
                continue
            raise SchemaMismatchError(
                f"table {table}: the DataFrame has no column {field.name!r}, which the table "
                f"requires (not null); DataFrame columns: {data_schema.fieldNames()}"
            )
        if not _is_widening(source.dataType, field.dataType):
            raise SchemaMismatchError(
                f"table {table}: column {field.name!r} is {source.dataType.simpleString()} in the "
                f"DataFrame but {field.dataType.simpleString()} in the table; cast it explicitly"
            )
    if by_name:
        extra = sorted(by_name)
        raise SchemaMismatchError(
            f"table {table}: column {extra[0]!r} is not in the table (table columns: {target.fieldNames()})"
        )


def to_table_batches(batches: Iterable[pa.RecordBatch], table_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Cast Spark's write batches to the table's Arrow schema (checked by :func:`check_writable`)."""
    target = pa.schema([field.remove_metadata() for field in table_schema])
    for batch in batches:
        columns = []
        for field in target:
            index = batch.schema.get_field_index(field.name)
            if index < 0:  # a nullable column the DataFrame leaves out (check_writable)
                columns.append(pa.nulls(batch.num_rows, field.type))
            else:
                # safe=True: a widening never fails, so any cast error here is
                # a bug we want to see rather than a silent wrap-around.
                columns.append(batch.column(index).cast(field.type, safe=True))
        yield pa.RecordBatch.from_arrays(columns, schema=target)
