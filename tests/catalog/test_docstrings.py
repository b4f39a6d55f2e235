"""Every public function and method of the catalog has a docstring, and says what it raises (issue 24).

Walked: every module under ``catalog/``, the Spark adapter
(``catalog/spark/``) included; only ``__main__`` modules are skipped
(importing one runs it).

Covered, in each walked module:

* every public module-level function defined there (name not starting
  with ``_``);
* every public method of every public class defined there: plain, static
  and class methods and properties, the class's own and those it inherits
  from a catalog base (reported where they are defined). Skipped: dunder
  methods, dataclass-generated methods and anything inherited from a base
  outside the catalog (``object``, ``NamedTuple``, ``Enum``, ...). A public
  method a public class inherits from a private catalog base is reported
  under that base (``catalog.ops:_Rewrite.write``).

Each needs a docstring. It also needs a Google-style ``Raises:`` section
when it can raise something its caller should know about, decided
pragmatically from the code (parsed with :mod:`ast`, matched to the live
objects with :mod:`inspect`):

* it is decorated with :func:`catalog.arguments.checked` and the decorator
  checks at least one of its parameters (a wrong type is a ``TypeError``);
  a method whose parameters are all ``object``/``Any`` (or that takes none)
  cannot fail that check, so that alone does not require a section;
* or its body contains a ``raise`` statement (nested functions included).

Offenders are reported as ``module:qualname``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import catalog
from catalog import arguments

EXCLUDED: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entry:
    """One public function or method: where it is defined and what the code says about it."""

    name: str  # "module:qualname"
    doc: str | None
    checked: bool  # decorated with @checked and checking at least one argument
    raises: bool  # its body holds a raise statement


def _excluded(module: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in EXCLUDED)


def _modules() -> list[types.ModuleType]:
    names = ["catalog"]
    for info in pkgutil.walk_packages(catalog.__path__, prefix="catalog."):
        if info.name.endswith(".__main__") or _excluded(info.name):
            continue
        names.append(info.name)
    return [importlib.import_module(name) for name in sorted(names)]


def _definitions(module: types.ModuleType) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function in the module's source by qualname ("Class.method", "function")."""
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{prefix}{child.name}"] = child
                visit(child, f"{prefix}{child.name}.<locals>.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)
    return names


def _checks_an_argument(func: Callable[..., Any]) -> bool:
    """Whether :func:`catalog.arguments.checked` checks any parameter of ``func`` (its own rule)."""
    hints = arguments._hints(func)  # internals: @checked's own rule, which has no public query
    for name, parameter in inspect.signature(func).parameters.items():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        check, _ = arguments._check_for(hints.get(name, Any))  # internals: @checked's own rule
        if check is not arguments._anything:  # internals: the check that accepts anything
            return True
    return False


def _function_of(member: object) -> Callable[..., Any] | None:
    """The plain function behind a method, static/class method or property (None for anything else)."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    elif isinstance(member, property):
        member = member.fget
    elif hasattr(member, "func") and type(member).__name__ == "cached_property":
        member = member.func  # type: ignore[attr-defined]
    if isinstance(member, types.FunctionType):
        return member
    return None


def _entry(module_name: str, qualname: str, member: object, sources: dict[str, dict[str, Any]]) -> Entry | None:
    func = _function_of(member)
    if func is None:
        return None
    doc = func.__doc__
    inner = inspect.unwrap(func)
    if "<locals>" in inner.__qualname__ and "__create_fn__" in inner.__qualname__:
        return None  # generated by dataclasses
    node = sources[module_name].get(inner.__qualname__)
    if node is None:
        raise AssertionError(f"{module_name}:{qualname}: no definition found in the module's source")
    checked = "checked" in _decorator_names(node) and _checks_an_argument(inner)
    raises = any(isinstance(n, ast.Raise) for n in ast.walk(node))
    return Entry(f"{module_name}:{qualname}", doc, checked, raises)


def _entries() -> list[Entry]:
    modules = _modules()
    sources: dict[str, dict[str, Any]] = {}
    found: dict[str, Entry] = {}

    def source(module_name: str) -> None:
        if module_name not in sources:
            sources[module_name] = _definitions(importlib.import_module(module_name))

    for module in modules:
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if isinstance(obj, types.FunctionType):
                source(module.__name__)
                entry = _entry(module.__name__, obj.__qualname__, obj, sources)
                if entry is not None:
                    found[entry.name] = entry
            elif isinstance(obj, type):
                for base in obj.__mro__:
                    base_module = base.__module__
                    if not (base_module == "catalog" or base_module.startswith("catalog.")) or _excluded(base_module):
                        continue  # inherited from outside the walked catalog modules
                    source(base_module)
                    for attr, member in vars(base).items():
                        if attr.startswith("_") or _defining_class(obj, attr) is not base:
                            continue  # private, or overridden further down the class's MRO
                        entry = _entry(base_module, f"{base.__qualname__}.{attr}", member, sources)
                        if entry is not None:
                            found[entry.name] = entry
    return sorted(found.values(), key=lambda e: e.name)


def _defining_class(cls: type, attr: str) -> type | None:
    for base in cls.__mro__:
        if attr in vars(base):
            return base
    return None


def _has_raises_section(doc: str) -> bool:
    return any(line.strip() == "Raises:" for line in inspect.cleandoc(doc).splitlines())


def test_the_walk_finds_the_public_api() -> None:
    names = {entry.name for entry in _entries()}
    assert "catalog.transactions:LiveHost.submit" in names
    assert "catalog.tree:LakeTree.create_table" in names
    assert "catalog.lakehouse:open" in names
    assert "catalog.ops:Op.apply" in names
    assert "catalog.ops:_Rewrite.write" in names  # public method of a private base, inherited by Delete
    assert "catalog.spark.control:ControlPlane.handle" in names  # the Spark adapter is walked too
    assert not any(name.split(":")[1].split(".")[-1].startswith("_") for name in names)  # no private member


def test_every_public_function_has_a_docstring() -> None:
    missing = [entry.name for entry in _entries() if not (entry.doc and entry.doc.strip())]
    assert not missing, f"{len(missing)} public functions/methods without a docstring:\n" + "\n".join(missing)


def test_every_public_function_that_raises_says_so() -> None:
    missing = [
        entry.name
        for entry in _entries()
        if (entry.checked or entry.raises) and not (entry.doc and _has_raises_section(entry.doc))
    ]
    assert not missing, f"{len(missing)} public functions/methods without a Raises: section:\n" + "\n".join(missing)
