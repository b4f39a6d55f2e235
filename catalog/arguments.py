"""Strict argument types for the catalog's public methods: one rule, one place.

``drop_namespace("ns", cascade="no")`` used to cascade (``"no"`` is truthy)
and ``update_properties(removals="abc")`` removed "a", "b" and "c". Every
public method of the catalog and the durable transactions is decorated with
:func:`checked`, which compares each argument with the method's own
annotation before the method runs, so a wrong type is a ``TypeError`` naming
the method, the parameter and what was passed, and nothing has changed:

* ``bool`` takes only ``True``/``False`` (not ``"no"``, not ``1``);
* ``int`` takes no ``bool``; ``float`` takes ``int`` too, no ``bool``, and
  no NaN or infinity;
* ``list[str]``, ``Sequence[str]``, ``Iterable[str]`` take a list or tuple
  whose items are ``str``: never a ``str`` itself;
* ``dict[str, str]`` and ``Mapping[str, str]`` take a mapping of str to str;
* a class takes its instances, ``Callable`` a callable; ``X | None`` also ``None``;
* ``object`` and ``Any`` take anything: the method checks those itself
  (data, filters), as before.

Names (of namespaces, tables, views, columns) are checked for *content* by
:mod:`catalog.names`, the one place that knows what a name may hold.

The plan for a method is made on its first call (annotations resolved with
``typing.get_type_hints``) and costs a few hundred nanoseconds a call after.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import math
import types
import typing
from typing import Any, Callable, TypeVar

from catalog.errors import ArgumentTypeError

F = TypeVar("F", bound=Callable[..., Any])

Check = Callable[[Any], bool]

_SEQUENCES = (
    list,
    tuple,
    collections.abc.Sequence,
    collections.abc.Iterable,
    collections.abc.Collection,
    typing.Sequence,
    typing.Iterable,
)
_MAPPINGS = (dict, collections.abc.Mapping, typing.Mapping)


def _anything(value: Any) -> bool:
    return True


def _number(value: Any) -> bool:
    return type(value) is not bool and isinstance(value, (int, float)) and math.isfinite(value)


def _check_for(annotation: Any) -> tuple[Check, str]:
    """A predicate for values of ``annotation`` and how to name the expected type."""
    if annotation is Any or annotation is object or annotation is inspect.Parameter.empty:
        return _anything, "anything"
    if annotation is type(None) or annotation is None:
        return (lambda v: v is None), "None"
    if annotation is bool:
        return (lambda v: v is True or v is False), "bool"
    if annotation is int:
        return (lambda v: type(v) is not bool and isinstance(v, int)), "int"
    if annotation is float:
        return _number, "finite number"
    if annotation is str:
        return (lambda v: isinstance(v, str)), "str"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        parts = [_check_for(a) for a in args]
        if any(check is _anything for check, _ in parts):
            return _anything, "anything"
        checks = [check for check, _ in parts]
        return (lambda v: any(check(v) for check in checks)), " or ".join(_a(name) for _, name in parts)
    if origin in _MAPPINGS or annotation in _MAPPINGS:
        key_check, key_name = _check_for(args[0]) if args else (_anything, "anything")
        value_check, value_name = _check_for(args[1]) if len(args) > 1 else (_anything, "anything")
        return (
            lambda v: isinstance(v, collections.abc.Mapping)
            and all(key_check(k) and value_check(x) for k, x in v.items())
        ), f"dict of {key_name} to {value_name}"
    if origin in _SEQUENCES or annotation in _SEQUENCES:
        item_check, item_name = _check_for(args[0]) if args and args[0] is not Ellipsis else (_anything, "anything")
        return (
            lambda v: isinstance(v, (list, tuple)) and all(item_check(x) for x in v)
        ), f"list of {item_name}"
    if origin is collections.abc.Callable or annotation is collections.abc.Callable:
        return callable, "callable"
    if origin is None and isinstance(annotation, type):
        return (lambda v: isinstance(v, annotation)), annotation.__name__
    return _anything, "anything"  # TypeVars, literals: the method checks those itself


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The function's annotations, resolved; one that names a type only imported
    for type checking (``TYPE_CHECKING``) is left unchecked (Any)."""
    try:
        return typing.get_type_hints(func)
    except NameError:
        resolved: dict[str, Any] = {}
        for name, annotation in func.__annotations__.items():
            try:
                resolved[name] = typing.get_type_hints(_Single(annotation, func.__globals__))["value"]
            except NameError:
                resolved[name] = Any
        return resolved


class _Single:
    """One annotation, for typing.get_type_hints to resolve on its own."""

    def __init__(self, annotation: Any, namespace: dict[str, Any]) -> None:
        self.__annotations__ = {"value": annotation}
        self.__globals__ = namespace
        self.__module__ = namespace.get("__name__", "")


def _a(name: str) -> str:
    """``"str"`` -> ``"a str"``, ``"int"`` -> ``"an int"``; phrases that have one already stay."""
    if name == "None" or name.startswith(("a ", "an ")) or " or " in name:
        return name
    return ("an " if name[0] in "aeiouAEIOU" else "a ") + name


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def checked(func: F) -> F:
    """Decorate a public method: wrong argument types raise ``TypeError`` before it runs.

    Raises:
        ArgumentTypeError: (a ``TypeError``, raised by the decorated method) an
            argument does not match its parameter's annotation; the message names
            the method, the parameter and the value.
    """
    plan: list[tuple[str, int | None, Check, str]] | None = None
    signature = inspect.signature(func)
    qualname = func.__qualname__

    def make_plan() -> list[tuple[str, int | None, Check, str]]:
        hints = _hints(func)
        out = []
        for index, (name, parameter) in enumerate(signature.parameters.items()):
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            check, expected = _check_for(hints.get(name, Any))
            if check is _anything:
                continue
            position = index if parameter.kind is not inspect.Parameter.KEYWORD_ONLY else None
            out.append((name, position, check, expected))
        return out

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal plan
        if plan is None:
            plan = make_plan()
        for name, position, check, expected in plan:
            if position is not None and position < len(args):
                value = args[position]
            elif name in kwargs:
                value = kwargs[name]
            else:
                continue  # the default: the method's own, trusted
            if not check(value):
                raise ArgumentTypeError(f"{qualname}(): {name} must be {_a(expected)}, not {_describe(value)}")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
