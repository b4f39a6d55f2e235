"""Namespaces, tables and views: the lakehouse tree, read and changed through one host.

:class:`LakeTree` implements every namespace, table and view method once. It
reads and writes only through its *host*, a :class:`~catalog.table.TableHost`
(the same small public protocol a :class:`~catalog.table.Table` uses), so
each kind of session is a host and a tree, not a subclass:

* the live lakehouse (:class:`catalog.transactions.LiveHost`): a fresh
  snapshot per read, each write committed at once (returns the version);
* a multi-table transaction (:class:`catalog.lakehouse.LakeTransaction`, hosted by
  :class:`catalog.transactions.OpenTransaction`):
  reads see its own changes, writes are applied to it (return None);
* a past version (:class:`catalog.timetravel.PastLakehouse`): a fixed
  snapshot, writes refused with ``ReadOnlyError``;
* a durable transaction (:class:`catalog.durable.session.DurableCatalogTransaction`):
  reads replay its staged operations, writes are staged.

Sessions expose the tree's methods with :class:`tree_method`, one line each,
so ``lake.create_table(...)`` and ``tx.create_table(...)`` are the same code.
"""

from __future__ import annotations

import time
import uuid
import types
from typing import Any, Callable, Concatenate, Generic, ParamSpec, TypeVar, overload

import pyarrow as pa

from catalog.arguments import checked
from catalog import keys, names, paging
from catalog.access import CatalogReader
from catalog.errors import NoSuchTableError, NoSuchViewError
from catalog.ops import (
    CommitMetadata,
    CreateNamespace,
    CreateTable,
    CreateView,
    DropNamespace,
    DropTable,
    DropView,
    Op,
    RenameTable,
    UpdateNamespaceProperties,
)
from catalog.paging import NamePage
from catalog.records import FORMATS, TABLE, VIEW, TableDef, ViewRecord
from catalog.schema import assign_field_ids, check_column_name, field_id
from catalog.table import Table, TableHost

DATA_PREFIX = "data"


class View:
    """A view definition: SQL text in a dialect, with optional schema and metadata."""

    def __init__(self, name: str, record: ViewRecord) -> None:
        self.name = name
        self.sql = record.sql
        self.dialect = record.dialect
        self.properties = dict(record.properties)
        self.schema = record.schema
        self.metadata = record.metadata
        self.version = record.version
        self.created_ms = record.created_ms  # with the name, what tells a re-created view from the old one

    def __repr__(self) -> str:
        return f"View({self.name!r}, dialect={self.dialect!r})"


class LakeTree:
    """Namespaces, tables and views through one host's view of the lakehouse.

    Args:
        host: where reads come from and writes go (see the module docstring).
        table_host: the host a loaded table reads and writes through, given its
            name; by default ``host``. A durable transaction freezes a table it
            holds a snapshot lock on this way.
    """

    def __init__(self, host: TableHost, table_host: Callable[[str], TableHost] | None = None) -> None:
        self.host = host
        self._table_host = table_host

    def _submit(self, op: Op) -> Any:
        self.host.check_writable()
        return self.host.submit(op)

    # -- namespaces ----------------------------------------------------------

    @checked
    def create_namespace(self, namespace: str, properties: dict[str, str] | None = None, parents: bool = False) -> Any:
        """Create a namespace (its parents must exist unless ``parents=True``).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name or property.
            NamespaceAlreadyExistsError: the namespace exists.
            NoSuchNamespaceError: its parent does not exist and ``parents`` is false.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns = names.parse_namespace(namespace)
        props = keys.check_properties(properties)
        return self._submit(CreateNamespace(ns=ns, properties=props, parents=bool(parents)))

    @checked
    def list_namespaces(self, parent: str | None = None, recursive: bool = False) -> list[str]:
        """Namespaces directly under ``parent`` (top level for None), sorted.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed ``parent``.
            NoSuchNamespaceError: ``parent`` does not exist.
        """
        ns = names.parse_namespace(parent) if parent is not None else ()
        with self.host.reading() as r:
            if ns:
                r.require_namespace(ns)
            return [names.join(c) for c in r.child_namespaces(ns, recursive=recursive)]

    @checked
    def namespace_exists(self, namespace: str) -> bool:
        """Whether the namespace exists at this session's view.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name.
        """
        ns = names.parse_namespace(namespace)
        with self.host.reading() as r:
            return r.namespace(ns) is not None

    @checked
    def namespace_properties(self, namespace: str) -> dict[str, str]:
        """The namespace's properties as a dict.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name.
            NoSuchNamespaceError: the namespace does not exist.
        """
        ns = names.parse_namespace(namespace)
        with self.host.reading() as r:
            r.require_namespace(ns)
            return r.namespace_properties(ns)

    @checked
    def update_namespace_properties(
        self, namespace: str, updates: dict[str, str] | None = None, removals: list[str] | None = None
    ) -> Any:
        """Set and remove properties.

        Returns ``{"updated", "removed", "missing", "version"}``: the keys set,
        the removals that existed and those that did not, as the commit found
        them (after any rebase), and the new lakehouse version (None inside a
        transaction).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace or property name, or a property both
                updated and removed.
            NoSuchNamespaceError: the namespace does not exist.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns = names.parse_namespace(namespace)
        ups = keys.check_properties(updates, "updates")
        rems = [keys.check_property_name(r, "removals") for r in (removals or [])]
        op = UpdateNamespaceProperties(ns=ns, updates=ups, removals=rems)
        version = self._submit(op)
        return {**op.last_outcome(), "version": version}

    @checked
    def drop_namespace(self, namespace: str, cascade: bool = False) -> Any:
        """Drop a namespace; ``NamespaceNotEmptyError`` if it holds anything, unless ``cascade``.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name.
            NoSuchNamespaceError: the namespace does not exist.
            NamespaceNotEmptyError: it holds namespaces, tables or views and ``cascade`` is false.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns = names.parse_namespace(namespace)
        return self._submit(DropNamespace(ns=ns, cascade=bool(cascade)))

    # -- tables ----------------------------------------------------------------

    @checked
    def create_table(
        self,
        name: str,
        schema: pa.Schema | None = None,
        partition_by: list[str] | None = None,
        properties: dict[str, str] | None = None,
        format: str = "parquet",  # noqa: A002 - the catalog's word
        location: str | None = None,
        metadata_location: str | None = None,
    ) -> Table:
        """Create a table and return it (inside a transaction: staged in it).

        Native tables (``format="parquet"``) need an Arrow ``schema``; field
        ids are assigned here. Iceberg tables (``format="iceberg"``) keep only
        a ``metadata_location`` pointer and a ``location``.

        Raises:
            TypeError: an argument of the wrong type (``metadata_location`` not a str).
            ValueError: a malformed name or property, an unknown ``format``, a bad schema or
                ``partition_by``, or ``location``/``metadata_location`` that do not fit the format.
            NoSuchNamespaceError: the namespace does not exist.
            TableAlreadyExistsError: a table or view of that name exists.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(name)
        props = keys.check_properties(properties)
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        table_id = uuid.uuid4().hex
        if format == "parquet":
            if location is not None or metadata_location is not None:
                raise ValueError("native tables live under the lakehouse: location/metadata_location are for iceberg")
            with_ids, last = assign_field_ids(schema)
            partition_ids = []
            if partition_by and len(set(partition_by)) != len(partition_by):
                raise ValueError(f"partition_by names a column twice: {partition_by}")
            for col in partition_by or []:
                if not isinstance(col, str) or col not in with_ids.names:
                    raise ValueError(f"partition_by: no column {col!r} in the schema ({', '.join(with_ids.names)})")
                ftype = with_ids.field(col).type
                if not (pa.types.is_integer(ftype) or pa.types.is_string(ftype) or pa.types.is_date(ftype)
                        or pa.types.is_boolean(ftype) or pa.types.is_timestamp(ftype) or pa.types.is_decimal(ftype)
                        or pa.types.is_binary(ftype)):
                    raise ValueError(f"partition_by: column {col!r} of type {ftype} cannot be a partition column")
                partition_ids.append(field_id(with_ids.field(col)))
            definition = TableDef(
                id=table_id,
                format=format,
                schema=with_ids,
                last_field_id=last,
                partition_ids=partition_ids,
                location=f"{DATA_PREFIX}/{table_id}",
                created_ms=int(time.time() * 1000),
            )
        else:
            if not isinstance(location, str) or not location:
                raise ValueError("an iceberg table needs a location (str)")
            if metadata_location is not None and not isinstance(metadata_location, str):
                raise TypeError("metadata_location must be a str")
            if partition_by:
                raise ValueError("partition_by is for native tables; an iceberg table's spec is in its metadata")
            definition = TableDef(
                id=table_id,
                format=format,
                schema=None,
                last_field_id=0,
                partition_ids=[],
                location=location,
                created_ms=int(time.time() * 1000),
                metadata_location=metadata_location,
            )
        self._submit(CreateTable(ns=ns, name=short, definition=definition, properties=props))
        return Table(self.host, ns, short, definition, props)

    @checked
    def load_table(self, name: str) -> Table:
        """The table as of this session's view (``NoSuchTableError`` if absent).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
            NoSuchTableError: no such table at this session's view.
        """
        ns, short = names.split_table_name(name)
        host = self.host if self._table_host is None else self._table_host(name)
        with host.resolving() as r:
            pointer, definition = r.require_table(ns, short)
            props = r.table_properties(pointer.id)
        return Table(host, ns, short, definition, props)

    @checked
    def table_exists(self, name: str) -> bool:
        """Whether a table of that name exists at this session's view.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
        """
        try:
            self.load_table(name)
        except NoSuchTableError:
            return False
        return True

    @checked
    def list_tables(self, namespace: str, page_size: int | None = None, page_token: str | None = None) -> NamePage:
        """Full names of the tables directly in ``namespace``, sorted: all, or a page of them.

        The result is a list (a :class:`~catalog.paging.NamePage`). With
        ``page_size``, at most that many names, and ``next_page_token`` says
        where the next page starts (None after the last page); pass it back as
        ``page_token``. Without ``page_size``: every name from the token on.
        A page reads only the keys it returns (see :mod:`catalog.paging`).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name, a ``page_size`` below 1, or a
                ``page_token`` that no listing of this namespace's tables returned.
            NoSuchNamespaceError: the namespace does not exist.
        """
        return self._list_entries(namespace, TABLE, page_size, page_token)

    def _list_entries(self, namespace: str, kind: str, page_size: int | None, page_token: str | None) -> NamePage:
        ns = names.parse_namespace(namespace)
        size = paging.check_page_size(page_size)
        after = None if page_token is None else paging.resume_after(page_token, kind, ns)
        with self.host.reading() as r:
            r.require_namespace(ns)
            found, more = r.entry_names(ns, kind, after=after, limit=size)
        prefix = names.join(ns) + "."
        return NamePage([prefix + n for n in found], paging.token_after(kind, ns, found[-1]) if more else None)

    @checked
    def rename_table(self, old: str, new: str) -> Any:
        """Rename (or move to another existing namespace) a table; its data stays where it is.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
            NoSuchTableError: no table ``old``.
            NoSuchNamespaceError: the namespace of ``new`` does not exist.
            TableAlreadyExistsError: a table or view named ``new`` exists.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(old)
        new_ns, new_short = names.split_table_name(new)
        return self._submit(RenameTable(ns=ns, name=short, new_ns=new_ns, new_name=new_short))

    @checked
    def drop_table(self, name: str, purge: bool = False) -> Any:
        """Drop a table. Its files stay readable by time travel until retention passes,
        then ``gc()`` deletes them; ``purge=True`` lets ``gc()`` delete them at once.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
            NoSuchTableError: no such table.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(name)
        return self._submit(DropTable(ns=ns, name=short, purge=bool(purge)))

    @checked
    def commit_metadata_location(self, name: str, new_location: str, expected_location: str | None) -> Any:
        """Compare-and-set an Iceberg table's metadata pointer (``RetryableConflictError`` if it moved).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name, an empty ``new_location``, or not an iceberg table.
            NoSuchTableError: no such table.
            RetryableConflictError: the pointer is no longer ``expected_location``, or
                another conflict (see :mod:`catalog.conflicts`).
            IncompatibleConflictError: the table was dropped meanwhile.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
        """
        if not isinstance(new_location, str) or not new_location:
            raise ValueError("new_location must be a non-empty str")
        table = self.load_table(name)
        return self._submit(
            CommitMetadata(table=table.name, table_id=table.id, new_location=new_location, expected=expected_location)
        )

    # -- views -----------------------------------------------------------------

    @checked
    def create_view(
        self,
        name: str,
        sql: str,
        dialect: str = "spark",
        properties: dict[str, str] | None = None,
        schema: pa.Schema | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Any:
        """Create a view named ``name`` holding ``sql`` in ``dialect``.

        Returns the new lakehouse version (None inside a transaction).

        Raises:
            TypeError: an argument of the wrong type (``schema`` not a pyarrow.Schema,
                ``metadata`` not a dict).
            ValueError: a malformed name, property or schema column, an empty ``sql`` or
                ``dialect``, or ``metadata`` that is not JSON-serialisable.
            NoSuchNamespaceError: the namespace does not exist.
            ViewAlreadyExistsError: a view or table of that name exists.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(name, "view")
        record = _view_record(sql, dialect, properties, schema, metadata)
        return self._submit(CreateView(ns=ns, name=short, view=record, view_id=uuid.uuid4().hex))

    @checked
    def replace_view(
        self,
        name: str,
        sql: str | None = None,
        dialect: str | None = None,
        properties: dict[str, str] | None = None,
        schema: pa.Schema | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Any:
        """Change a view's definition; arguments left None keep their value.

        Raises:
            TypeError: an argument of the wrong type (as for :meth:`create_view`).
            ValueError: a bad argument (as for :meth:`create_view`).
            NoSuchNamespaceError: the namespace does not exist.
            NoSuchViewError: no such view.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(name, "view")
        record = ViewRecord(
            sql=_check_str(sql, "sql") if sql is not None else None,  # type: ignore[arg-type]
            dialect=_check_str(dialect, "dialect") if dialect is not None else None,  # type: ignore[arg-type]
            properties=keys.check_properties(properties) if properties is not None else None,  # type: ignore[arg-type]
            schema=_check_schema(schema),
            metadata=_check_metadata(metadata),
        )
        record.created_ms = None  # type: ignore[assignment]
        record.version = None  # type: ignore[assignment]
        return self._submit(CreateView(ns=ns, name=short, view=record, view_id="", replace=True))

    @checked
    def load_view(self, name: str) -> View:
        """The view as of this session's view of the lakehouse.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
            NoSuchViewError: no such view.
        """
        ns, short = names.split_table_name(name, "view")
        with self.host.reading() as r:
            pointer = r.require_view(ns, short)
        assert pointer.view is not None
        return View(names.join((*ns, short)), pointer.view)

    @checked
    def view_exists(self, name: str) -> bool:
        """Whether a view of that name exists at this session's view.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
        """
        try:
            self.load_view(name)
        except NoSuchViewError:
            return False
        return True

    @checked
    def list_views(self, namespace: str, page_size: int | None = None, page_token: str | None = None) -> NamePage:
        """Full names of the views directly in ``namespace``, sorted: all, or a page of them
        (as :meth:`list_tables` pages).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed namespace name, a ``page_size`` below 1, or a
                ``page_token`` that no listing of this namespace's views returned.
            NoSuchNamespaceError: the namespace does not exist.
        """
        return self._list_entries(namespace, VIEW, page_size, page_token)

    @checked
    def drop_view(self, name: str) -> Any:
        """Drop a view; returns the new lakehouse version (None inside a transaction).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name.
            NoSuchViewError: no such view.
            ReadOnlyError: the session is a past version (``lake.at(...)``).
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`).
        """
        ns, short = names.split_table_name(name, "view")
        return self._submit(DropView(ns=ns, name=short))


def _check_str(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty str")
    return value


def _check_schema(schema: object) -> pa.Schema | None:
    if schema is not None and not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    if schema is not None:
        for f in schema:
            check_column_name(f.name, "view schema")
            if schema.names.count(f.name) > 1:
                raise ValueError(f"view schema: column {f.name!r} appears twice")
    return schema


def _check_metadata(metadata: object) -> dict[str, Any] | None:
    import json

    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise TypeError("metadata must be a JSON-serialisable dict")
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be JSON-serialisable: {exc}") from None
    return metadata


def _view_record(
    sql: object, dialect: object, properties: object, schema: object, metadata: object
) -> ViewRecord:
    return ViewRecord(
        sql=_check_str(sql, "sql"),
        dialect=_check_str(dialect, "dialect"),
        properties=keys.check_properties(properties),
        schema=_check_schema(schema),
        metadata=_check_metadata(metadata),
        created_ms=int(time.time() * 1000),
    )


_P = ParamSpec("_P")
_R = TypeVar("_R")


class tree_method(Generic[_P, _R]):  # noqa: N801 - used like a decorator
    """A session's method that is the same-named method of the session's ``tree``.

    ``create_table = tree_method(LakeTree.create_table)`` in a class body: on an
    instance it is ``instance.tree.create_table``, with its signature, docstring
    and argument checks; on the class it is ``LakeTree.create_table``. Sessions share the tree's code this way instead of
    inheriting it.
    """

    def __init__(self, method: Callable[Concatenate[LakeTree, _P], _R]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, session: None, owner: type) -> Callable[Concatenate[LakeTree, _P], _R]: ...

    @overload
    def __get__(self, session: object, owner: type) -> Callable[_P, _R]: ...

    def __get__(self, session: object, owner: type) -> Callable[Concatenate[LakeTree, _P], _R] | Callable[_P, _R]:
        if session is None:
            return self._method  # on the class: the tree's function (what help() and inspect show)
        tree: LakeTree = session.tree  # type: ignore[attr-defined]
        # A method bound to the tree: help() shows the tree method's name and docstring.
        return types.MethodType(self._method, tree)


class TreeMethods:
    """The namespace, table and view methods of a session, each forwarded to its ``tree``.

    A session (the lakehouse, a transaction, a past version) has a
    :class:`LakeTree` as ``tree`` and lists this class among its bases to
    offer the tree's methods as its own. It holds no state and no hooks: what
    a session does differently is its tree's host, not an override.
    """

    tree: LakeTree

    create_namespace = tree_method(LakeTree.create_namespace)
    list_namespaces = tree_method(LakeTree.list_namespaces)
    namespace_exists = tree_method(LakeTree.namespace_exists)
    namespace_properties = tree_method(LakeTree.namespace_properties)
    update_namespace_properties = tree_method(LakeTree.update_namespace_properties)
    drop_namespace = tree_method(LakeTree.drop_namespace)
    create_table = tree_method(LakeTree.create_table)
    load_table = tree_method(LakeTree.load_table)
    table_exists = tree_method(LakeTree.table_exists)
    list_tables = tree_method(LakeTree.list_tables)
    rename_table = tree_method(LakeTree.rename_table)
    drop_table = tree_method(LakeTree.drop_table)
    commit_metadata_location = tree_method(LakeTree.commit_metadata_location)
    create_view = tree_method(LakeTree.create_view)
    replace_view = tree_method(LakeTree.replace_view)
    load_view = tree_method(LakeTree.load_view)
    view_exists = tree_method(LakeTree.view_exists)
    list_views = tree_method(LakeTree.list_views)
    drop_view = tree_method(LakeTree.drop_view)
