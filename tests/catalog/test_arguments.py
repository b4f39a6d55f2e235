"""Wrong argument types: a clear TypeError and no change of state, for every public method.

The cases are generated from the methods' signatures (catalog.arguments reads
the same annotations), not from a hand list: every public method of the
catalog's and the durable transactions' classes is enumerated, and every
annotated parameter gets each wrong value its type admits. A method added
later without ``@checked`` fails ``test_every_public_method_is_checked``.
"""

from __future__ import annotations

import collections.abc
import inspect
import itertools
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from catalog.arguments import _hints, checked  # internals: @checked has no public query of the annotations it enforces
from catalog.durable.manager import DurableTransaction, Lock, TransactionManager
from catalog.durable.session import DurableCatalogTransaction
from catalog.lakehouse import LakeTransaction, PastLakehouse
from catalog.tree import LakeTree
from catalog.table import Table, UpdateSchemaBuilder
from catalog_util import ORDERS, orders

CLASSES = [
    catalog.Lakehouse,
    LakeTree,
    PastLakehouse,
    LakeTransaction,
    Table,
    UpdateSchemaBuilder,
    TransactionManager,
    DurableTransaction,
    DurableCatalogTransaction,
    Lock,
]
_counter = itertools.count()


def public_methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or isinstance(inspect.getattr_static(cls, name), property):
            continue
        if inspect.isfunction(member) or isinstance(inspect.getattr_static(cls, name), staticmethod):
            yield name, member


_CHECKED_CODE = checked(lambda: None).__code__


def _is_checked(method: Callable[..., Any]) -> bool:
    """Whether ``checked``'s wrapper is anywhere in the method's chain of wrappers."""
    f: Any = method
    while f is not None:
        if getattr(f, "__code__", None) is _CHECKED_CODE:
            return True
        f = getattr(f, "__wrapped__", None)
    return False


def test_every_public_method_is_checked() -> None:
    unchecked = [f"{cls.__name__}.{name}" for cls in CLASSES for name, method in public_methods(cls) if not _is_checked(method)]
    assert unchecked == []


# -- values of each annotation, right and wrong ------------------------------------------


def _options(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return list(typing.get_args(annotation))
    return [annotation]


def wrong_values(annotation: Any) -> list[Any]:
    """Values no option of ``annotation`` admits (empty: nothing to try)."""
    options = _options(annotation)
    if any(o in (Any, object) for o in options):
        return []
    candidates: list[Any] = ["no", 1, 2.5, True, None, b"x", ["x"], [1], {"k": "v"}, {"k": 1}, object()]
    return [v for v in candidates if not any(_admits(o, v) for o in options)]


def _admits(option: Any, value: Any) -> bool:
    if option in (Any, object):
        return True
    origin = typing.get_origin(option) or option
    args = typing.get_args(option)
    if option is type(None) or option is None:
        return value is None
    if option is bool:
        return isinstance(value, bool)
    if option is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if option is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (list, tuple, typing.Sequence, collections.abc.Sequence,
                  collections.abc.Iterable):
        return isinstance(value, (list, tuple)) and all(_admits(args[0], x) for x in value) if args else isinstance(value, (list, tuple))
    if origin in (dict, typing.Mapping, collections.abc.Mapping):
        return isinstance(value, dict) and (not args or all(_admits(args[0], k) and _admits(args[1], x) for k, x in value.items()))
    if isinstance(origin, type):
        return isinstance(value, origin)
    return True  # not something the generator reasons about: assume admitted, try nothing


def right_value(annotation: Any) -> Any:
    """A value of the right type for the other parameters (the checks run before the method)."""
    for option in _options(annotation):
        if option is type(None):
            return None
    option = _options(annotation)[0]
    origin = typing.get_origin(option) or option
    samples: dict[Any, Any] = {
        bool: False, int: 0, float: 1.0, str: "s.o", list: [], tuple: (), dict: {},
        pa.Schema: ORDERS, pa.DataType: pa.int64(),
    }
    if origin in samples:
        return samples[origin]
    if origin is collections.abc.Callable:
        return lambda *args: None
    return None


@pytest.fixture
def world(tmp_path: Any) -> Iterator[dict[str, Any]]:
    lake = catalog.open(f"memory://arguments-{next(_counter)}", poll_interval_s=0)
    lake.create_namespace("s", {"p": "1"})
    table = lake.create_table("s.o", ORDERS, properties={"a": "1", "b": "2", "c": "3"})
    table.append(orders([1, 2]))
    lake.create_view("s.v", "select 1")
    durable = lake.begin_durable()
    lock = durable.lock("s.o", "shared", child_key="k")
    objects = {
        catalog.Lakehouse: lake,
        LakeTree: lake.tree,
        PastLakehouse: lake.at(version=lake.version),
        Table: table,
        UpdateSchemaBuilder: table.update_schema(),
        TransactionManager: lake.durable.manager,
        DurableTransaction: durable,
        DurableCatalogTransaction: durable,
        Lock: lock,
    }
    yield {"lake": lake, "objects": objects, "durable": durable}
    lake.close()


def _state(lake: catalog.Lakehouse) -> tuple[Any, ...]:
    lake.refresh()
    return (
        lake.version,
        lake.namespace_properties("s"),
        lake.load_table("s.o").properties,
        sorted(lake.list_tables("s")),
        [(t.id, t.state) for t in lake.transactions(include_finished=True)],
        sorted(lake.list_namespaces()),
    )


def _cases() -> list[tuple[type, str, str, Any]]:
    cases = []
    for cls in CLASSES:
        for name, method in public_methods(cls):
            if cls is LakeTransaction:
                continue  # its tree's methods are LakeTree's, tested through the lake's tree
            hints = _hints(inspect.unwrap(method))
            for param in list(inspect.signature(method).parameters)[1:]:
                for value in wrong_values(hints.get(param, Any)):
                    cases.append((cls, name, param, value))
    return cases


CASES = _cases()


def test_the_generator_covers_the_reported_cases() -> None:
    found = {(cls.__name__, name, param, repr(value)) for cls, name, param, value in CASES}
    for case in [
        ("LakeTree", "drop_namespace", "cascade", "'no'"),
        ("LakeTree", "drop_table", "purge", "'no'"),
        ("LakeTree", "create_namespace", "parents", "'no'"),
        ("LakeTree", "update_namespace_properties", "removals", "'no'"),
        ("Table", "update_properties", "removals", "'no'"),
        ("Lakehouse", "gc", "dry_run", "'no'"),
    ]:
        assert case in found
    assert len(CASES) > 300


@pytest.mark.parametrize(
    ("cls", "name", "param", "value"),
    CASES,
    ids=[f"{c.__name__}.{n}-{p}-{type(v).__name__}{i}" for i, (c, n, p, v) in enumerate(CASES)],
)
def test_a_wrong_type_is_a_type_error_and_changes_nothing(
    world: dict[str, Any], cls: type, name: str, param: str, value: Any
) -> None:
    target = world["objects"][cls]
    method = getattr(target, name)
    signature = inspect.signature(method)
    hints = _hints(inspect.unwrap(getattr(cls, name)))
    kwargs = {
        p: right_value(hints.get(p, Any))
        for p, parameter in signature.parameters.items()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    }
    kwargs[param] = value
    before = _state(world["lake"])
    with pytest.raises(TypeError, match=f"{name}\\(\\): {param} must be"):
        result = method(**kwargs)
        if inspect.isgenerator(result) or hasattr(result, "__enter__"):
            with result:
                pass
    assert _state(world["lake"]) == before


# -- the reported cases that are about content, not type -----------------------------------


def test_column_names_follow_one_rule(world: dict[str, Any]) -> None:
    table = world["objects"][Table]
    with pytest.raises(ValueError, match="control characters"):
        table.update_schema().add_column("a\x01", pa.int64())
    with pytest.raises(ValueError, match="control characters"):
        table.update_schema().rename_column("id", "b\x02")
    with pytest.raises(ValueError, match="appears twice"):
        world["lake"].create_table("s.d", pa.schema([("x", pa.int64()), ("x", pa.int64())]))
    with pytest.raises(catalog.SchemaMismatchError, match="'id' appears 2 times in the data"):
        table.append(pa.table([pa.array([1]), pa.array([2])], names=["id", "id"]))
    with pytest.raises(ValueError, match="twice"):
        world["lake"].create_table("s.p", ORDERS, partition_by=["day", "day"])


def test_filters_name_the_column_in_files_and_scan_alike(world: dict[str, Any]) -> None:
    table = world["objects"][Table]
    for call in (table.files, table.scan):
        with pytest.raises(ValueError, match="names column 'nope'"):
            call(pc.field("nope") == 1)
        with pytest.raises(TypeError, match="column 'id' \\(int64\\)"):
            call(pc.field("id") == "x")
    with pytest.raises(ValueError, match="names column 'nope'"):
        table.delete(pc.field("nope") == 1)
    assert table.scan().count() == 2
