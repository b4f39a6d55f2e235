"""The locks a catalog operation takes implicitly inside a durable transaction (seed 003, "Implicit locks").

Nodes are catalog names: a namespace ``"sales.eu"``, a table or view
``"sales.eu.orders"``, and :data:`ROOT_NODE` for the lakehouse itself (the
parent of top-level namespaces; ``"."`` can never be a catalog name).

===============================  ===============================================================
operation                        locks
===============================  ===============================================================
create/drop namespace N          exclusive on N; shared(child_key=last part) on N's parent
create/drop table or view T      exclusive on T; shared(child_key=T's name) on its namespace
replace view T                   exclusive on T
rename table A -> B              exclusive on A and B; shared(child_key=...) on both namespaces
append (commit_files append)     shared on the table
overwrite, delete, compact,      exclusive on the table
schema change, metadata commit
set/remove table property k      shared(attribute_key=k) on the table
set/remove namespace property k  shared(attribute_key=k) on the namespace
===============================  ===============================================================

A request the transaction already covers is not stored again
(:func:`~.compat.is_redundant`), so repeated operations do not pile up locks.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from catalog import ops
from catalog.names import Namespace, join

ROOT_NODE: Final = "."


class LockRequest(NamedTuple):
    node: str
    mode: str
    child_key: str | None = None
    attribute_key: str | None = None


def _container(ns: Namespace) -> tuple[str, str]:
    """(parent node, child key) of the namespace ``ns``."""
    return (join(ns[:-1]) if len(ns) > 1 else ROOT_NODE), ns[-1]


def _entry(ns: Namespace, name: str) -> list[LockRequest]:
    """Creating or removing ``ns.name``: exclusive on it, shared(child_key) on its namespace."""
    return [LockRequest(join((*ns, name)), "exclusive"), LockRequest(join(ns), "shared", child_key=name)]


def implicit_locks(op: ops.Op) -> list[LockRequest]:
    """The locks ``op`` needs, in a fixed order (so two transactions request them alike).

    Raises:
        TypeError: there is no implicit-lock rule for the op's kind.
    """
    if isinstance(op, (ops.CreateNamespace, ops.DropNamespace)):
        parent, key = _container(op.ns)
        requests = [LockRequest(join(op.ns), "exclusive"), LockRequest(parent, "shared", child_key=key)]
        if isinstance(op, ops.CreateNamespace) and op.parents:
            for depth in range(1, len(op.ns)):
                parent, key = _container(op.ns[:depth])
                requests.append(LockRequest(parent, "shared", child_key=key))
        return requests
    if isinstance(op, ops.UpdateNamespaceProperties):
        return [LockRequest(join(op.ns), "shared", attribute_key=k) for k in sorted({*op.updates, *op.removals})]
    if isinstance(op, ops.CreateView) and op.replace:
        return [LockRequest(op.object_name, "exclusive")]
    if isinstance(op, (ops.CreateTable, ops.DropTable, ops.CreateView, ops.DropView)):
        return _entry(op.ns, op.name)
    if isinstance(op, ops.RenameTable):
        return _entry(op.ns, op.name) + _entry(op.new_ns, op.new_name)
    if isinstance(op, ops.Append):
        return [LockRequest(op.table, "shared")]
    if isinstance(op, ops.UpdateProperties):
        return [LockRequest(op.table, "shared", attribute_key=k) for k in sorted({*op.updates, *op.removals})]
    if isinstance(op, (ops._Rewrite, ops.UpdateSchema, ops.CommitMetadata)):
        return [LockRequest(op.table, "exclusive")]
    if isinstance(op, ops.CheckRead):
        return []  # validated at the commit instead: a read that another transaction's write may follow
    raise TypeError(f"no implicit-lock rule for catalog operation {op.kind!r}")


def removed_nodes(op: ops.Op) -> list[str]:
    """Nodes ``op`` removes: pending locks on them are dropped when it commits."""
    if isinstance(op, ops.DropNamespace):
        return [join(op.ns)]
    if isinstance(op, (ops.DropTable, ops.DropView, ops.RenameTable)):
        return [op.object_name]
    return []
