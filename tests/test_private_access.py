"""Tests use public seams (issue 24, acceptance 4): parsed, not imported.

No test reads a private attribute of the object under test unless the test is
of that module's internals, and says so. Every ``.py`` under ``tests/`` is
parsed with :mod:`ast`, and each of these is a *private access*:

* an attribute ``expr._name`` (read, written or deleted; one leading
  underscore or a name-mangled ``__name``, not a dunder) where ``expr`` is
  not the plain name ``self`` or ``cls``; this covers ``module._name`` too;
* ``getattr``/``setattr``/``delattr``/``hasattr`` and
  ``monkeypatch.setattr``/``delattr`` (any ``*.setattr``/``*.delattr``)
  naming a private attribute by a string literal, or a dotted target such as
  ``"kvstore.flush._ROWS"``;
* ``from m import _name``, ``from m._private import name`` and
  ``import m._private`` where ``m`` is a project package (every top-level
  directory of the checkout with an ``__init__.py``, except ``tests``).

Each must carry a comment ``# internals: <reason>`` with a non-empty reason,
on the physical line of the access (where it starts or where the private name
is) or on the first line of the statement containing it. The only objects
left out are ``self`` and ``cls``, a test class's own state. Everything else
is marked, even a private handle of another library's object (PySpark's
``_jsc``), so that each exception is visible and says why.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PROJECT_PACKAGES = frozenset(
    path.parent.name for path in ROOT.glob("*/__init__.py") if path.parent.name != "tests"
)
MARK = re.compile(r"#\s*internals:(.*)")
OWN = frozenset({"self", "cls"})
REFLECTION = frozenset({"getattr", "setattr", "delattr", "hasattr"})
PATCHING = frozenset({"setattr", "delattr"})  # monkeypatch.setattr(obj, "_name", ...) and friends


def is_private(name: str) -> bool:
    """``_name`` or ``__name`` (name-mangled), not a dunder and not ``_`` alone."""
    return len(name) > 1 and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] in PROJECT_PACKAGES and any(is_private(part) for part in parts)


def _comments(source: str) -> dict[int, str]:
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    return comments


def _private_string(node: ast.expr) -> bool:
    """A string literal naming a private attribute: ``"_name"`` or ``"pkg.mod._name"``."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    parts = node.value.split(".")
    if len(parts) == 1:
        return is_private(parts[0])
    return parts[0] in PROJECT_PACKAGES and all(p.isidentifier() for p in parts) and any(map(is_private, parts))


class _Finder(ast.NodeVisitor):
    """Collects (node, statement it belongs to) for every private access."""

    def __init__(self) -> None:
        self.statement: ast.stmt | None = None
        self.found: list[tuple[ast.expr | ast.stmt, ast.stmt | None]] = []

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            outer, self.statement = self.statement, node
            self._check(node)
            self.generic_visit(node)
            self.statement = outer
        else:
            self._check(node)
            self.generic_visit(node)

    def _check(self, node: ast.AST) -> None:
        if not isinstance(node, (ast.expr, ast.stmt)):
            return
        if isinstance(node, ast.Attribute):
            owner = node.value
            if is_private(node.attr) and not (isinstance(owner, ast.Name) and owner.id in OWN):
                self.found.append((node, self.statement))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split(".")[0] in PROJECT_PACKAGES:
                if _private_module(node.module) or any(is_private(alias.name) for alias in node.names):
                    self.found.append((node, self.statement))
        elif isinstance(node, ast.Import):
            if any(_private_module(alias.name) for alias in node.names):
                self.found.append((node, self.statement))
        elif isinstance(node, ast.Call):
            func = node.func
            reflective = isinstance(func, ast.Name) and func.id in REFLECTION and len(node.args) >= 2
            patching = isinstance(func, ast.Attribute) and func.attr in PATCHING
            if reflective and _private_string(node.args[1]):
                self.found.append((node, self.statement))
            elif patching and any(_private_string(arg) for arg in node.args[:2]):
                self.found.append((node, self.statement))


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.ImportFrom):  # only the private names, if the module is public
        names = node.names if _private_module(node.module or "") else [a for a in node.names if is_private(a.name)]
        return ast.unparse(ast.ImportFrom(node.module, names, node.level))
    if isinstance(node, ast.Call):  # the call's name and the string, not every argument
        return ast.unparse(node.func) + "(" + ", ".join(ast.unparse(arg) for arg in node.args[:2]) + ", ...)"
    return ast.unparse(node)


def scan_source(source: str, path: str) -> list[str]:
    """Every unmarked private access in ``source``, as ``path:line: expr``."""
    comments = _comments(source)
    finder = _Finder()
    finder.visit(ast.parse(source, path))
    offenders = []
    for node, statement in finder.found:
        lines = {node.lineno, node.end_lineno or node.lineno}
        if statement is not None:
            lines.add(statement.lineno)
        marks = [MARK.search(comments[line]) for line in sorted(lines) if line in comments]
        reasons = [m.group(1).strip() for m in marks if m is not None]
        if any(reasons):
            continue
        why = " (empty internals reason)" if reasons else ""
        offenders.append(f"{path}:{node.end_lineno or node.lineno}: {_text(node)}{why}")
    return offenders


def test_tests_read_no_private_attribute_without_saying_why() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 50 and {"kvstore", "catalog", "service"} <= PROJECT_PACKAGES
    offenders = []
    for path in files:
        offenders += scan_source(path.read_text(), str(path.relative_to(ROOT)))
    assert not offenders, (
        "private access in tests without '# internals: <reason>' (use a public seam, such as "
        "Store.stats(), or mark a test of the module's internals):\n" + "\n".join(offenders)
    )


def test_scanner_flags_unmarked_access_and_accepts_marked() -> None:
    source = (
        "from kvstore.store import _check_batch\n"
        "from kvstore.store import open  # internals: not private, the mark is harmless\n"
        "import kvstore._native\n"
        "tree = db._state.tree\n"
        "tree = db._state.tree  # internals: which SSTs to damage\n"
        "tree = db._state.tree  # internals:\n"
        "self._x = other._y\n"
        "self._x = cls._y + obj.__dict__ + obj.public\n"
        "total = f(\n"
        "    db._oracle,\n"
        ")\n"
        "total = f(  # internals: the oracle's horizon\n"
        "    db._oracle,\n"
        ")\n"
        "monkeypatch.setattr(collector, '_live_files', fake)\n"
        "monkeypatch.setattr('kvstore.flush._ROWS', 2)\n"
        "value = getattr(db, '_txns')\n"
        "monkeypatch.setattr(db, 'refresh', fake)\n"
        "with db._txns.locks as locks:  # internals: the key locks\n"
        "    locks.wait()\n"
        "with db._txns.locks as locks:\n"
        "    locks.wait()  # internals: a comment on the wrong statement\n"
    )
    assert scan_source(source, "t.py") == [
        "t.py:1: from kvstore.store import _check_batch",
        "t.py:3: import kvstore._native",
        "t.py:4: db._state",
        "t.py:6: db._state (empty internals reason)",
        "t.py:7: other._y",
        "t.py:10: db._oracle",
        "t.py:15: monkeypatch.setattr(collector, '_live_files', ...)",
        "t.py:16: monkeypatch.setattr('kvstore.flush._ROWS', 2, ...)",
        "t.py:17: getattr(db, '_txns', ...)",
        "t.py:21: db._txns",
    ]
