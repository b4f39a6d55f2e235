"""Exception rules of issue 24 over kvstore/, catalog/ and service/ (parsed, not imported).

* Every exception class's name ends in ``Error`` (a warning's may end in
  ``Warning``), so a name says what it is at every ``except`` and
  ``raise``.
* Every exception class lives in a module named ``errors.py`` (or inside an
  ``errors`` package), so each package's errors are found in one place.

"Exception class" means deriving from ``BaseException`` directly or through
any chain of classes: the project's own (resolved through each module's
imports, re-exports included) and other libraries' (imported to ask them).
Matching on base-class names alone would miss a subclass of a subclass of
``Exception`` and a project class whose name does not say it is an error.

Also: the deprecated old names of renamed exceptions still import, and warn.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kvstore", "kvclient", "catalog", "service")


@dataclass
class Module:
    path: str  # as reported, relative to the root
    classes: dict[str, list[ast.expr]] = field(default_factory=dict)  # every class (nested too) -> its bases
    top_level: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name it binds


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module a (possibly relative) ``from`` import names."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def parse_module(name: str, path: str, source: str, is_package: bool = False) -> Module:
    module = Module(path)
    tree = ast.parse(source, path)
    module.top_level = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            module.classes.setdefault(node.name, node.bases)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                # "import a.b" binds "a"; "import a.b as x" binds x to a.b.
                local = alias.asname or alias.name.split(".")[0]
                module.imports[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source_module = _absolute(name, is_package, node.level, node.module)
            for alias in node.names:
                module.imports[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    return module


class Checker:
    """Classifies the classes of a set of parsed modules."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self._memo: dict[str, frozenset[str]] = {}

    def _resolve(self, module: str, expr: ast.expr) -> str | None:
        """The qualified name a base-class expression refers to, or None."""
        if isinstance(expr, ast.Subscript):  # Generic[T], ...
            return self._resolve(module, expr.value)
        if isinstance(expr, ast.Name):
            mod = self.modules[module]
            if expr.id in mod.classes:
                return f"{module}.{expr.id}"
            if expr.id in mod.imports:
                return mod.imports[expr.id]
            return f"builtins.{expr.id}" if hasattr(builtins, expr.id) else None
        if isinstance(expr, ast.Attribute):
            owner = self._resolve(module, expr.value)
            return None if owner is None else f"{owner}.{expr.attr}"
        return None

    def roots(self, qualified: str) -> frozenset[str]:
        """Which of BaseException and Warning the class ``qualified`` derives from."""
        if qualified not in self._memo:
            self._memo[qualified] = frozenset()  # a cycle (or self-reference) adds nothing
            self._memo[qualified] = self._roots(qualified)
        return self._memo[qualified]

    def _roots(self, qualified: str) -> frozenset[str]:
        module, _, name = qualified.rpartition(".")
        if module in self.modules:
            mod = self.modules[module]
            if name in mod.classes:
                found: set[str] = set()
                for base in mod.classes[name]:
                    target = self._resolve(module, base)
                    if target is not None:
                        found |= self.roots(target)
                return frozenset(found)
            if name in mod.imports:  # a re-export
                return self.roots(mod.imports[name])
            return frozenset()
        # Another library's class (or a builtin): ask it.
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError):
            return frozenset()
        if not isinstance(obj, type):
            return frozenset()
        return frozenset(root.__name__ for root in (BaseException, Warning) if issubclass(obj, root))

    def offences(self) -> list[str]:
        found = []
        for module, mod in sorted(self.modules.items()):
            in_errors = module.split(".")[-1] == "errors" or "errors" in module.split(".")[:-1]
            for name in mod.classes:
                roots = self.roots(f"{module}.{name}")
                if "BaseException" not in roots:
                    continue
                suffixes = ("Error", "Warning") if "Warning" in roots else ("Error",)
                if not name.endswith(suffixes):
                    found.append(f"{mod.path}:{name}: name does not end in {' or '.join(suffixes)}")
                if not in_errors:
                    found.append(f"{mod.path}:{name}: exception class outside an errors module")
        return found


def project_modules() -> dict[str, Module]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            is_package = path.name == "__init__.py"
            parts = rel.with_suffix("").parts
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = parse_module(name, str(rel), path.read_text(), is_package)
    return modules


def _check(sources: dict[str, str]) -> list[str]:
    modules = {name: parse_module(name, name.replace(".", "/") + ".py", src) for name, src in sources.items()}
    return Checker(modules).offences()


def test_the_checker_follows_chains_imports_and_libraries() -> None:
    offences = _check({
        "pkg.errors": "class BaseError(Exception): pass\nclass Oops(BaseError): pass\n"
                      "class LateWarning(UserWarning): pass\nclass SadWarning(Exception): pass\n",
        "pkg.ops": "from pkg.errors import BaseError as Base\nimport json\n"
                   "class Again(Base): pass\nclass ParseError(json.JSONDecodeError): pass\n"
                   "class Plain: pass\nclass Shape(Plain): pass\n",
        "pkg.reexport": "from pkg.errors import Oops\n",
        "pkg.deep": "from pkg import reexport\nclass Deeper(reexport.Oops): pass\n",
    })
    assert offences == [
        "pkg/deep.py:Deeper: name does not end in Error",
        "pkg/deep.py:Deeper: exception class outside an errors module",
        "pkg/errors.py:Oops: name does not end in Error",
        "pkg/errors.py:SadWarning: name does not end in Error",
        "pkg/ops.py:Again: name does not end in Error",
        "pkg/ops.py:Again: exception class outside an errors module",
        "pkg/ops.py:ParseError: exception class outside an errors module",
    ]


def test_every_exception_ends_in_error_and_lives_in_an_errors_module() -> None:
    offences = Checker(project_modules()).offences()
    assert offences == [], "\n".join(offences)


# Old name -> (modules that exported it, new name as module.Name), kept one release (CHANGELOG.md).
DEPRECATED = {
    "EditConflict": (("kvstore.errors", "kvstore.compaction"), "kvstore.errors.EditConflictError"),
    "CompactionAborted": (("kvstore.errors", "kvstore.compaction"), "kvstore.errors.CompactionAbortedError"),
    "InjectedFault": (("kvstore.errors", "kvstore.objstore"), "kvstore.errors.InjectedFaultError"),
    "CheckFailed": (("kvstore.errors",), "kvstore.errors.CheckFailedError"),
    "TransactionExpiredError": (
        ("catalog.errors", "catalog.durable.errors", "catalog.durable"),
        "catalog.errors.DurableTransactionExpiredError",
    ),
}


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [(module, old, new) for old, (modules, new) in DEPRECATED.items() for module in modules],
)
def test_a_deprecated_name_still_imports_and_warns(module: str, old: str, new: str) -> None:
    new_module, _, new_name = new.rpartition(".")
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated.*{new_name}") as caught:
        got = getattr(importlib.import_module(module), old)
    assert got is getattr(importlib.import_module(new_module), new_name)
    # The warning points at the caller, not at the alias machinery.
    assert caught[0].filename == __file__


def test_a_deprecated_name_works_in_a_from_import() -> None:
    from kvstore.errors import EditConflictError

    with pytest.warns(DeprecationWarning, match="EditConflictError"):
        from kvstore.errors import EditConflict  # type: ignore[attr-defined]
    assert EditConflict is EditConflictError


def test_the_catalog_s_deprecated_name_works_in_a_from_import_and_is_still_caught() -> None:
    import kvstore.errors
    from catalog.errors import DurableTransactionExpiredError

    with pytest.warns(DeprecationWarning, match="DurableTransactionExpiredError"):
        from catalog.durable import TransactionExpiredError  # type: ignore[attr-defined]
    assert TransactionExpiredError is DurableTransactionExpiredError
    # Still the engine's TransactionExpiredError too: one except catches both kinds.
    assert issubclass(DurableTransactionExpiredError, kvstore.errors.TransactionExpiredError)
    assert kvstore.errors.TransactionExpiredError is not DurableTransactionExpiredError


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import catalog.durable
    import catalog.durable.errors
    import catalog.errors
    import kvstore.compaction
    import kvstore.errors

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning on the way
        for module in (kvstore.errors, kvstore.compaction, catalog.errors, catalog.durable.errors, catalog.durable):
            with pytest.raises(AttributeError, match="NoSuchThing"):
                module.NoSuchThing  # noqa: B018
