"""Filters: a ``pyarrow.compute`` expression turned into predicates that prune data files.

A scan filter is an ordinary ``pc.Expression`` (``pc.field("day") ==
"2024-01-01"``). To skip files we need its structure, which pyarrow does not
expose; it does serialise an expression (for pickling) into an Arrow IPC file
whose schema metadata lists the tree in prefix order (``call``/``field_ref``/
``literal``/``options``/``end``) and whose columns hold the literal values
and function options as real Arrow scalars. :func:`from_expression` reads
that form (the metadata through the Arrow C data interface, which keeps the
repeated keys a Python dict would merge), so literals keep their exact type.

Pruning (:func:`may_match`) evaluates a predicate over per-file statistics,
vectorised over all files at once: a file is skipped only when its min / max
/ null counts prove that no row can match. Anything not understood (other
functions, casts, nested fields) becomes :class:`Unknown`, which keeps every
file: pruning is an optimisation and is never allowed to change a result —
the full expression is still applied to the rows read.
"""

from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Final, Sequence, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc


@dataclass(frozen=True)
class Pred:
    """Base of the predicate tree."""


@dataclass(frozen=True)
class Unknown(Pred):
    """Something pruning does not understand: may match anything."""


@dataclass(frozen=True)
class Const(Pred):
    value: bool | None


@dataclass(frozen=True)
class Compare(Pred):
    column: str
    op: str  # one of == != < <= > >=
    value: pa.Scalar


@dataclass(frozen=True)
class IsIn(Pred):
    column: str
    values: pa.Array


@dataclass(frozen=True)
class IsNull(Pred):
    column: str


@dataclass(frozen=True)
class NotNull(Pred):
    column: str


@dataclass(frozen=True)
class StartsWith(Pred):
    column: str
    prefix: str


@dataclass(frozen=True)
class And(Pred):
    children: tuple[Pred, ...]


@dataclass(frozen=True)
class Or(Pred):
    children: tuple[Pred, ...]


@dataclass(frozen=True)
class Not(Pred):
    child: Pred


_COMPARE: Final = {
    "equal": "==",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_FLIP: Final = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE: Final = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


# -- reading an expression's structure ---------------------------------------


class _CSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """Schema metadata with repeated keys kept, in order (the C data interface's encoding)."""
    capsule = schema.__arrow_c_schema__()  # released by the capsule's destructor
    c = _CSchema.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    if not c.metadata:
        return []
    pos = c.metadata
    (count,) = struct.unpack("<i", ctypes.string_at(pos, 4))
    pos += 4
    pairs = []
    for _ in range(count):
        (klen,) = struct.unpack("<i", ctypes.string_at(pos, 4))
        key = ctypes.string_at(pos + 4, klen)
        pos += 4 + klen
        (vlen,) = struct.unpack("<i", ctypes.string_at(pos, 4))
        value = ctypes.string_at(pos + 4, vlen)
        pos += 4 + vlen
        pairs.append((key.decode(), value.decode()))
    return pairs


def from_expression(expr: object) -> Pred:
    """The predicate tree of a ``pc.Expression`` (``TypeError`` for anything else).

    Raises:
        TypeError: ``expr`` is not a pyarrow.compute.Expression. (A form it
            cannot read is not an error: it becomes ``Unknown``, which prunes nothing.)
    """
    if not isinstance(expr, pc.Expression):
        raise TypeError(f"filter must be a pyarrow.compute.Expression, not {type(expr).__name__}")
    try:
        buf = expr.__reduce__()[1][0]
        batch = ipc.open_file(buf).read_all()
        tokens = _metadata_pairs(batch.schema)
    except (pa.ArrowException, IndexError, TypeError, ValueError, struct.error):
        return Unknown()  # a form we cannot read: prune nothing, still filter rows
    literals = batch.columns
    pos = 0

    def node() -> tuple[str, Any]:
        nonlocal pos
        kind, value = tokens[pos]
        pos += 1
        if kind == "literal":
            return "lit", literals[int(value)][0]
        if kind == "field_ref":
            return "field", value
        if kind == "nested_field_ref":
            for _ in range(int(value)):
                pos += 1
            return "other", None
        if kind == "call":
            args: list[tuple[str, Any]] = []
            options = None
            while tokens[pos][0] != "end":
                if tokens[pos][0] == "options":
                    options = literals[int(tokens[pos][1])][0]
                    pos += 1
                else:
                    args.append(node())
            pos += 1  # the "end" token
            return "pred", _call(value, args, options)
        raise ValueError(kind)

    try:
        kind, value = node()
    except (IndexError, ValueError, KeyError):
        return Unknown()
    if kind == "pred":
        return cast(Pred, value)
    if kind == "lit" and pa.types.is_boolean(value.type):
        return Const(value.as_py())
    if kind == "field":
        return Unknown()
    return Unknown()


def _call(name: str, args: list[tuple[str, Any]], options: Any) -> Pred:
    if name in _COMPARE and len(args) == 2:
        (ka, a), (kb, b) = args
        op = _COMPARE[name]
        if ka == "field" and kb == "lit":
            return Compare(a, op, b)
        if ka == "lit" and kb == "field":
            return Compare(b, _FLIP[op], a)
        return Unknown()
    if name in ("and_kleene", "and"):
        return And(tuple(_as_pred(a) for a in args))
    if name in ("or_kleene", "or"):
        return Or(tuple(_as_pred(a) for a in args))
    if name == "invert" and len(args) == 1:
        return Not(_as_pred(args[0]))
    if name == "is_null" and len(args) == 1 and args[0][0] == "field":
        return IsNull(args[0][1])
    if name == "is_valid" and len(args) == 1 and args[0][0] == "field":
        return NotNull(args[0][1])
    if name == "is_in" and len(args) == 1 and args[0][0] == "field" and options is not None:
        values = options["value_set"].values
        return IsIn(args[0][1], values) if values is not None else Unknown()
    if name == "starts_with" and len(args) == 1 and args[0][0] == "field" and options is not None:
        if options["ignore_case"].as_py():
            return Unknown()
        return StartsWith(args[0][1], options["pattern"].as_py())
    return Unknown()


def _as_pred(arg: tuple[str, Any]) -> Pred:
    kind, value = arg
    if kind == "pred":
        return value  # type: ignore[no-any-return]
    if kind == "lit" and pa.types.is_boolean(value.type):
        return Const(value.as_py())
    return Unknown()


def columns_of(pred: Pred) -> set[str]:
    """Every column a predicate looks at."""
    if isinstance(pred, (Compare, IsIn, IsNull, NotNull, StartsWith)):
        return {pred.column}
    if isinstance(pred, (And, Or)):
        return set().union(*(columns_of(c) for c in pred.children)) if pred.children else set()
    if isinstance(pred, Not):
        return columns_of(pred.child)
    return set()


def check_expression(expr: pc.Expression, schema: pa.Schema, what: str = "filter") -> None:
    """Refuse an expression that cannot apply to rows of ``schema``, naming the column.

    Both pruning (which would keep every file) and the row filter must see the
    same expression, so it is bound to the schema once, here: an unknown
    column is a ``ValueError`` and a comparison of a column with a value of
    another type a ``TypeError``, each naming the column, instead of
    pyarrow's errors from deep inside a scan (or none at all when pruning).

    Raises:
        ValueError: the expression names a column that is not in ``schema``.
        TypeError: it compares a column with a value of another type.
    """
    try:
        schema.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        missing = _UNKNOWN_FIELD.findall(str(exc))
        if missing:
            raise ValueError(
                f"{what} names column {missing[0]!r}, which is not a column (columns: {', '.join(schema.names)})"
            ) from None
        used = sorted(columns_of(from_expression(expr)))
        typed = ", ".join(f"{name!r} ({schema.field(name).type})" for name in used if name in schema.names)
        about = f" on column {typed}" if typed else ""
        raise TypeError(f"{what} does not fit the column types{about}: {exc}") from None


_UNKNOWN_FIELD: Final = re.compile(r"No match for FieldRef\.Name\(([^)]*)\)")


# -- pruning ---------------------------------------------------------------


@dataclass
class ColumnBounds:
    """Statistics of one column over ``n`` files, as Arrow arrays (null = unknown)."""

    mins: pa.Array
    maxs: pa.Array
    nulls: pa.Array  # int64, null = unknown
    rows: pa.Array  # int64


def may_match(pred: Pred, n: int, bounds: Callable[[str], ColumnBounds | None]) -> pa.BooleanArray:
    """A boolean per file: False only when the statistics prove no row matches.

    ``bounds(column)`` returns the statistics of a column, or None when the
    column is unknown (e.g. a name not in the table): such a predicate keeps
    every file.
    """
    every = pa.array([True] * n, pa.bool_()) if n else pa.array([], pa.bool_())
    return _eval(pred, n, bounds, every)


def _eval(pred: Pred, n: int, bounds: Callable[[str], ColumnBounds | None], every: pa.BooleanArray) -> pa.BooleanArray:
    if isinstance(pred, Const):
        return every if pred.value else pa.array([False] * n, pa.bool_())
    if isinstance(pred, And):
        out = every
        for child in pred.children:
            out = pc.and_(out, _eval(child, n, bounds, every))
        return out
    if isinstance(pred, Or):
        if not pred.children:
            return every
        out = pa.array([False] * n, pa.bool_())
        for child in pred.children:
            out = pc.or_(out, _eval(child, n, bounds, every))
        return out
    if isinstance(pred, Not):
        pushed = _negate(pred.child)
        return every if pushed is None else _eval(pushed, n, bounds, every)
    if isinstance(pred, (Compare, IsIn, IsNull, NotNull, StartsWith)):
        b = bounds(pred.column)
        if b is None:
            return every
        try:
            mask = _leaf(pred, b)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
            return every  # e.g. comparing a string column with an int literal: let the row filter decide
        return pc.fill_null(mask, True)
    return every


def must_match(pred: Pred, n: int, bounds: Callable[[str], ColumnBounds | None]) -> pa.BooleanArray:
    """A boolean per file: True only when the statistics prove that EVERY row matches.

    Such a file can be deleted whole, without reading it. That holds when
    ``NOT pred`` can match no row (:func:`may_match`) and no row can make
    ``pred`` null instead of true: every column it compares has a null count
    of 0 and is not floating-point (statistics leave NaN out, and a NaN row
    compares false).
    """
    none = pa.array([False] * n, pa.bool_())
    if _has_null_literal(pred):
        return none  # ``x = NULL`` is null for every row: its negation proves nothing
    negated = _negate(pred, no_nulls=True)  # true below: every compared column is checked for nulls
    if negated is None:
        return none
    every = pa.array([True] * n, pa.bool_()) if n else pa.array([], pa.bool_())
    proven = pc.invert(_eval(negated, n, bounds, every))
    for column in _valued_columns(pred):
        b = bounds(column)
        if b is None or pa.types.is_floating(b.mins.type):
            return none
        proven = pc.and_(proven, pc.fill_null(pc.equal(b.nulls, 0), False))
    return proven


def _has_null_literal(pred: Pred) -> bool:
    if isinstance(pred, Compare):
        return not pred.value.is_valid
    if isinstance(pred, Const):
        return pred.value is None
    if isinstance(pred, (And, Or)):
        return any(_has_null_literal(c) for c in pred.children)
    if isinstance(pred, Not):
        return _has_null_literal(pred.child)
    return False


def _valued_columns(pred: Pred) -> set[str]:
    """The columns whose null values would make ``pred`` null (not IS [NOT] NULL tests)."""
    if isinstance(pred, (Compare, IsIn, StartsWith)):
        return {pred.column}
    if isinstance(pred, (And, Or)):
        return set().union(*(_valued_columns(c) for c in pred.children)) if pred.children else set()
    if isinstance(pred, Not):
        return _valued_columns(pred.child)
    return set()


def _negate(pred: Pred, no_nulls: bool = False) -> Pred | None:
    """``NOT pred`` pushed down (3-valued logic: a filter keeps only true rows).

    ``no_nulls``: the caller knows the compared columns hold no nulls. Only
    then is ``NOT (x IN (a, b))`` the same as ``x != a AND x != b``: Arrow's
    ``is_in`` is false, not null, for a null ``x``, so its negation is true.
    """
    if isinstance(pred, Compare):
        return Compare(pred.column, _NEGATE[pred.op], pred.value)
    if isinstance(pred, IsIn) and no_nulls and len(pred.values) <= 64 and pred.values.null_count == 0:
        return And(tuple(Compare(pred.column, "!=", v) for v in pred.values))
    if isinstance(pred, IsNull):
        return NotNull(pred.column)
    if isinstance(pred, NotNull):
        return IsNull(pred.column)
    if isinstance(pred, And):
        children = [_negate(c, no_nulls) for c in pred.children]
        return None if any(c is None for c in children) else Or(tuple(c for c in children if c is not None))
    if isinstance(pred, Or):
        children = [_negate(c, no_nulls) for c in pred.children]
        # NOT (a OR b) = NOT a AND NOT b; an unknown conjunct just keeps files.
        return And(tuple(c if c is not None else Unknown() for c in children))
    if isinstance(pred, Not):
        return pred.child
    if isinstance(pred, Const):
        return Const(None if pred.value is None else not pred.value)
    return None


def _cast_like(value: pa.Scalar, target: pa.DataType) -> pa.Scalar:
    if value.type == target:
        return value
    return value.cast(target)


def _leaf(pred: Pred, b: ColumnBounds) -> pa.Array:
    if isinstance(pred, IsNull):
        return pc.greater(b.nulls, 0)
    if isinstance(pred, NotNull):
        return pc.less(b.nulls, b.rows)
    if isinstance(pred, Compare):
        if not pred.value.is_valid:
            return pa.array([False] * len(b.rows), pa.bool_())  # x <op> NULL is never true
        v = _cast_like(pred.value, b.mins.type)
        op = pred.op
        if op == "==":
            return pc.and_(pc.less_equal(b.mins, v), pc.greater_equal(b.maxs, v))
        if op == "!=":
            return pc.invert(pc.and_(pc.equal(b.mins, v), pc.equal(b.maxs, v)))
        if op == "<":
            return pc.less(b.mins, v)
        if op == "<=":
            return pc.less_equal(b.mins, v)
        if op == ">":
            return pc.greater(b.maxs, v)
        return pc.greater_equal(b.maxs, v)
    if isinstance(pred, IsIn):
        values = pred.values.drop_null()
        if len(values) == 0:
            return pa.array([False] * len(b.rows), pa.bool_())
        values = values.cast(b.mins.type)
        if len(values) <= 64:
            out = None
            for v in values:
                m = pc.and_(pc.less_equal(b.mins, v), pc.greater_equal(b.maxs, v))
                out = m if out is None else pc.or_(out, m)
            return out
        mm = pc.min_max(values)
        return pc.and_(pc.less_equal(b.mins, mm["max"]), pc.greater_equal(b.maxs, mm["min"]))
    if isinstance(pred, StartsWith):
        if not (pa.types.is_string(b.mins.type) or pa.types.is_large_string(b.mins.type)):
            raise TypeError("starts_with on a non-string column")
        if not pred.prefix:
            return pc.less(b.nulls, b.rows)
        upper = pred.prefix + "\U0010ffff"
        return pc.and_(pc.greater_equal(b.maxs, pred.prefix), pc.less_equal(b.mins, upper))
    raise AssertionError(pred)  # pragma: no cover


def conjunction(preds: Sequence[Pred]) -> Pred:
    """The AND of ``preds`` (the predicate itself when there is only one)."""
    return preds[0] if len(preds) == 1 else And(tuple(preds))
