"""Table schemas with stable field ids, their JSON form, evolution and projection.

Every top-level column of a table carries a field id in its Arrow field
metadata (``b"field_id"``). Ids are never reused, so a data file written
under an old schema is read under the current one by matching ids: a renamed
column keeps its data, a dropped column disappears, an added column reads as
nulls, a widened column is cast (:func:`project`). Partition columns and file
statistics are keyed by field id too, so renames never touch data files.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Final, Iterable

import pyarrow as pa

from catalog.errors import SchemaMismatchError

FIELD_ID: Final = b"field_id"
# pyarrow reads (and writes) a Parquet column's field_id as this field metadata.
PARQUET_FIELD_ID: Final = b"PARQUET:field_id"
# A column's comment (Spark's ``COMMENT``), in the same field metadata.
COMMENT: Final = b"comment"

# Type changes that never lose information (the "widen" evolution).
_INT_ORDER: Final = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UINT_ORDER: Final = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def field_id(f: pa.Field) -> int:
    """The field id of a table column (``KeyError`` if it has none)."""
    meta = f.metadata or {}
    return int(meta[FIELD_ID])


def with_field_id(f: pa.Field, fid: int) -> pa.Field:
    """A copy of ``f`` with field id ``fid`` in its metadata."""
    meta = dict(f.metadata or {})
    meta[FIELD_ID] = str(fid).encode()
    return f.with_metadata(meta)


def _check_type(name: str, t: pa.DataType) -> None:
    if pa.types.is_dictionary(t) or pa.types.is_null(t) or pa.types.is_union(t):
        raise ValueError(f"column {name!r}: type {t} is not supported by the catalog (use the plain value type)")


def check_column_name(name: object, what: str = "column name") -> str:
    """The one rule for column names (create_table, add_column, rename_column):
    a non-empty str of at most 255 characters, no control characters.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: it is empty, longer than 255 characters or holds a control character.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what}: a column name must be a str, not {type(name).__name__}")
    if not name or len(name) > 255 or any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        raise ValueError(f"{what}: column name {name[:60]!r} must be 1-255 characters without control characters")
    return name


def assign_field_ids(schema: object) -> tuple[pa.Schema, int]:
    """A new table's schema with ids 1..n; returns it and the last id used.

    Raises:
        TypeError: ``schema`` is not a pyarrow.Schema.
        ValueError: it has no column, a column name twice, a bad column name or an
            unsupported type (dictionary, null, union).
    """
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    if len(schema) == 0:
        raise ValueError("schema must have at least one column")
    names = [f.name for f in schema]
    for f in schema:
        check_column_name(f.name)
        if names.count(f.name) > 1:
            raise ValueError(f"column {f.name!r} appears twice in the schema")
        _check_type(f.name, f.type)
    fields = [with_field_id(f, i) for i, f in enumerate(schema, 1)]
    return pa.schema(fields), len(fields)


def schema_to_json(schema: pa.Schema) -> str:
    """The schema (with field ids) as base64 Arrow IPC: exact and self-describing."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_json(text: str) -> pa.Schema:
    """The schema :func:`schema_to_json` encoded, field ids included."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def by_id(schema: pa.Schema) -> dict[int, pa.Field]:
    """The schema's fields by field id."""
    return {field_id(f): f for f in schema}


def can_widen(old: pa.DataType, new: pa.DataType) -> bool:
    """True if every value of ``old`` is exactly representable in ``new``."""
    if old == new:
        return True
    for order in (_INT_ORDER, _UINT_ORDER):
        if old in order and new in order:
            return order.index(old) <= order.index(new)
    if old in _UINT_ORDER[:3] and new in _INT_ORDER:  # uintN fits in int(2N)
        return _INT_ORDER.index(new) > _UINT_ORDER.index(old)
    if pa.types.is_floating(old) and pa.types.is_floating(new):
        return bool(old.bit_width <= new.bit_width)
    if pa.types.is_integer(old) and old.bit_width <= 16 and new in (pa.float32(), pa.float64()):
        return True
    if pa.types.is_int32(old) and new == pa.float64():
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision >= old.precision)
    if (pa.types.is_string(old) and pa.types.is_large_string(new)) or (
        pa.types.is_binary(old) and pa.types.is_large_binary(new)
    ):
        return True
    return False


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Check ``data`` against the table schema and return it in the table's exact form.

    Columns are matched by name (any order). A missing nullable column is
    filled with nulls; an extra column, a missing required one, a type that
    cannot be cast without loss, or nulls in a non-nullable column raise
    :class:`SchemaMismatchError` naming the column and both types.

    Raises:
        SchemaMismatchError: as above, or a column name appears twice in ``data``.
    """
    present = set(data.column_names)
    if len(present) != data.num_columns:
        twice = next(n for n in data.column_names if data.column_names.count(n) > 1)
        raise SchemaMismatchError(f"column {twice!r} appears {data.column_names.count(twice)} times in the data")
    wanted = {f.name for f in schema}
    extra = [n for n in data.column_names if n not in wanted]
    if extra:
        raise SchemaMismatchError(
            f"column {extra[0]!r} ({data.schema.field(extra[0]).type}) is not in the table schema "
            f"(columns: {', '.join(schema.names)})"
        )
    arrays = []
    for f in schema:
        if f.name not in present:
            if not f.nullable:
                raise SchemaMismatchError(f"column {f.name!r} ({f.type}, not null) is missing from the data")
            arrays.append(pa.nulls(data.num_rows, f.type))
            continue
        col = data.column(f.name)
        if col.type != f.type:
            # Integers of another width are accepted when every value fits (checked by the
            # safe cast below): Python ints arrive as int64 whatever the column holds.
            same_kind = pa.types.is_integer(col.type) and pa.types.is_integer(f.type)
            if not (same_kind or can_widen(col.type, f.type) or _safe_relabel(col.type, f.type)):
                raise SchemaMismatchError(f"column {f.name!r}: data type {col.type} does not match the table's {f.type}")
            try:
                col = col.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(f"column {f.name!r}: cannot cast {col.type} to {f.type}: {exc}") from None
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(f"column {f.name!r} is not nullable but the data has {col.null_count} nulls")
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def _safe_relabel(src: pa.DataType, dst: pa.DataType) -> bool:
    # Same values, other physical form: large_string data into a string column
    # (what many producers emit), timestamps of another unit only when widening
    # precision, nested types whose children match.
    if (pa.types.is_large_string(src) and pa.types.is_string(dst)) or (
        pa.types.is_large_binary(src) and pa.types.is_binary(dst)
    ):
        return True
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        units = ["s", "ms", "us", "ns"]
        return src.tz == dst.tz and units.index(src.unit) <= units.index(dst.unit)
    if pa.types.is_date(src) and pa.types.is_date(dst):
        return True
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (pa.types.is_list(dst) or pa.types.is_large_list(dst)):
        return src.value_type == dst.value_type or can_widen(src.value_type, dst.value_type)
    return False


def project(data: pa.Table, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
    """Read a file's table (written under any older schema) as the current ``schema``.

    Columns are matched by field id; ``columns`` selects (and orders) output columns.
    """
    file_ids: dict[int, int] = {}
    for i, f in enumerate(data.schema):
        meta = f.metadata or {}
        # Files written by Spark's Parquet writer (the catalog plugin) carry
        # only the Parquet field id; ours carry both, equal.
        fid = meta.get(FIELD_ID, meta.get(PARQUET_FIELD_ID))
        if fid is not None:
            file_ids[int(fid)] = i
    out_fields = [schema.field(c) for c in columns] if columns is not None else list(schema)
    arrays = []
    for f in out_fields:
        idx = file_ids.get(field_id(f))
        if idx is None:
            arrays.append(pa.nulls(data.num_rows, f.type))
            continue
        col = data.column(idx)
        if col.type != f.type:
            col = col.cast(f.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=pa.schema(out_fields))


@dataclass
class SchemaChange:
    """Pending schema evolution: built by ``Table.update_schema()``, applied at ``commit()``."""

    steps: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def apply(self, schema: pa.Schema, last_id: int, partition_ids: Iterable[int]) -> tuple[pa.Schema, int]:
        """Apply every step in order; ``ValueError`` names the first impossible one.

        Raises:
            ValueError: a step that cannot apply (a column that exists or is missing,
                a new column that is not nullable, dropping a partition or the last
                column, a lossy widening), naming the step and the column.
        """
        fields = list(schema)
        partitioned = set(partition_ids)
        for op, args in self.steps:
            names = [f.name for f in fields]
            if op == "add":
                name, type_, nullable = args
                if name in names:
                    raise ValueError(f"add_column: column {name!r} already exists")
                if not nullable:
                    raise ValueError(f"add_column: new column {name!r} must be nullable (old files have no values)")
                _check_type(name, type_)
                last_id += 1
                fields.append(with_field_id(pa.field(name, type_, True), last_id))
            elif op == "rename":
                old, new = args
                if old not in names:
                    raise ValueError(f"rename_column: no column {old!r}")
                if new in names:
                    raise ValueError(f"rename_column: column {new!r} already exists")
                i = names.index(old)
                fields[i] = fields[i].with_name(new)
            elif op == "drop":
                (name,) = args
                if name not in names:
                    raise ValueError(f"drop_column: no column {name!r}")
                if field_id(fields[names.index(name)]) in partitioned:
                    raise ValueError(f"drop_column: {name!r} is a partition column")
                if len(fields) == 1:
                    raise ValueError(f"drop_column: {name!r} is the last column")
                del fields[names.index(name)]
            elif op == "widen":
                name, type_ = args
                if name not in names:
                    raise ValueError(f"widen: no column {name!r}")
                i = names.index(name)
                if not can_widen(fields[i].type, type_):
                    raise ValueError(f"widen: {name!r} cannot change from {fields[i].type} to {type_} without loss")
                fields[i] = pa.field(fields[i].name, type_, fields[i].nullable, fields[i].metadata)
            elif op == "comment":
                name, comment = args
                if name not in names:
                    raise ValueError(f"set_comment: no column {name!r}")
                i = names.index(name)
                meta = {k: v for k, v in (fields[i].metadata or {}).items() if k != COMMENT}
                if comment is not None:
                    meta[COMMENT] = comment.encode()
                fields[i] = fields[i].with_metadata(meta)
            else:  # pragma: no cover - steps are only built by UpdateSchema
                raise AssertionError(op)
        return pa.schema(fields), last_id
