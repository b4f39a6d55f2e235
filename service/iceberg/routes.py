"""The Apache Iceberg REST Catalog protocol, ``/v1/...``, over the catalog.

Every handler parses and validates names first (:mod:`service.iceberg.names`),
then runs its catalog work in a worker thread, translating catalog errors into
the protocol's error types and codes (:func:`iceberg_error`). Lists page with
``pageToken``/``pageSize``: tables with the catalog's own tokens (a page reads
only its keys), namespaces and views with an offset. No path prefix is used:
``/v1/config`` returns no ``prefix`` override.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

import catalog
from catalog import errors as catalog_errors
from catalog.maintenance import purge_dropped
from catalog.lazy_module import LazyModule
from catalog.records import ICEBERG
from kvstore.errors import ConflictError, StoreError
from service.codec import query_bool, read_json
from service.routing import route
from service.errors import ApiError
from service.iceberg.names import (
    identifier_from_json,
    identifier_to_json,
    namespace_from_parts,
    namespace_from_path,
    parts_of,
    table_name,
)
from service.metrics import Metrics

if TYPE_CHECKING:
    from service.iceberg import tables, views
    from service.iceberg.warehouse import Warehouse
else:
    # The handlers' modules import pyiceberg (about 1 s): loaded at the first
    # Iceberg request, not when the server starts, so `lakekv serve` listens
    # (and its etcd and KV APIs answer) without waiting for it.
    tables = LazyModule("service.iceberg.tables")
    views = LazyModule("service.iceberg.views")

T = TypeVar("T")


_log = logging.getLogger("lakekv.serve")

DEFAULT_PAGE_SIZE: Final = 1000
MAX_PAGE_SIZE: Final = 10_000

# Checked in order: subclasses first.
_CATALOG_ERRORS: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (catalog_errors.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (catalog_errors.NoSuchTableError, 404, "NoSuchTableException"),
    (catalog_errors.NoSuchViewError, 404, "NoSuchViewException"),
    (catalog_errors.NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (catalog_errors.TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (catalog_errors.ViewAlreadyExistsError, 409, "AlreadyExistsException"),
    (catalog_errors.NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (ConflictError, 409, "CommitFailedException"),
    (catalog_errors.ReadOnlyError, 400, "BadRequestException"),
    (ValueError, 400, "BadRequestException"),
    (TypeError, 400, "BadRequestException"),
)


def iceberg_error(exc: BaseException) -> ApiError | None:
    """The protocol error for a catalog or argument exception, or None (a bug: 500)."""
    if isinstance(exc, ApiError):
        return exc
    for cls, status, error_type in _CATALOG_ERRORS:
        if isinstance(exc, cls):
            return ApiError(status, error_type, str(exc))
    return None


@dataclass
class IcebergState:
    """What the Iceberg handlers share; built by the app's lifespan."""

    lake: catalog.Lakehouse
    warehouse: Warehouse | None  # None: no place clients can share, API disabled
    metrics: Metrics


@dataclass
class _Enabled:
    lake: catalog.Lakehouse
    warehouse: Warehouse
    metrics: Metrics


def _state(request: Request) -> _Enabled:
    state: IcebergState = request.app.state.iceberg
    if state.warehouse is None:
        raise ApiError(
            503, "ServiceUnavailableException",
            "the Iceberg REST API needs a warehouse clients can reach: start the server with --warehouse",
        )
    return _Enabled(state.lake, state.warehouse, state.metrics)


async def _run(fn: Callable[..., T], *args: Any) -> T:
    try:
        return await run_in_threadpool(fn, *args)
    except Exception as exc:
        error = iceberg_error(exc)
        if error is None:
            raise
        raise error from exc


def _page(request: Request, items: list[Any]) -> tuple[list[Any], str | None]:
    try:
        offset = int(request.query_params.get("pageToken") or 0)
        size = int(request.query_params.get("pageSize") or DEFAULT_PAGE_SIZE)
    except ValueError:
        raise ApiError(400, "BadRequestException", "pageToken and pageSize must be integers") from None
    if offset < 0 or not 1 <= size <= MAX_PAGE_SIZE:
        raise ApiError(400, "BadRequestException", f"pageToken must be >= 0 and pageSize in 1..{MAX_PAGE_SIZE}")
    page = items[offset:offset + size]
    return page, (str(offset + size) if offset + size < len(items) else None)


def _table_response(location: str | None, metadata: Any) -> JSONResponse:
    body = {"metadata": metadata.model_dump(mode="json", by_alias=True, exclude_none=True), "config": {}}
    if location is not None:
        body["metadata-location"] = location
    return JSONResponse(body)


def _ns(request: Request) -> str:
    return namespace_from_path(request.path_params["namespace"])


# -- config --------------------------------------------------------------------

_ENDPOINTS: Final = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
]


async def get_config(request: Request) -> JSONResponse:
    # ?warehouse= names the warehouse a client asks about (DuckDB sends its
    # catalog's name): this server has one, so every name gets its config.
    _state(request)  # 503 when the Iceberg API is disabled
    return JSONResponse({"defaults": {}, "overrides": {}, "endpoints": _ENDPOINTS})


# -- namespaces ----------------------------------------------------------------


async def _run_on_namespace(namespace: str, fn: Callable[..., T], *args: Any) -> T:
    """:func:`_run` for work on one namespace, with its absence and existence
    worded as Iceberg's reference catalog words them ("Namespace does not
    exist: a.b"): Iceberg's clients and its REST compatibility kit match on
    that text, and the spec leaves the message to the server."""
    try:
        return await _run(fn, *args)
    except ApiError as exc:
        if isinstance(exc.__cause__, catalog_errors.NoSuchNamespaceError):
            raise ApiError(404, "NoSuchNamespaceException", f"Namespace does not exist: {namespace}") from exc.__cause__
        if isinstance(exc.__cause__, catalog_errors.NamespaceAlreadyExistsError):
            raise ApiError(409, "AlreadyExistsException", f"Namespace already exists: {namespace}") from exc.__cause__
        raise


async def list_namespaces(request: Request) -> JSONResponse:
    lake = _state(request).lake
    parent_text = request.query_params.get("parent")
    parent = namespace_from_path(parent_text) if parent_text else None
    if parent is None:
        names = await _run(lambda: sorted(lake.list_namespaces()))
    else:
        names = await _run_on_namespace(parent, lambda: sorted(lake.list_namespaces(parent=parent)))
    page, token = _page(request, names)
    return JSONResponse({"namespaces": [parts_of(n) for n in page], "next-page-token": token})


async def create_namespace(request: Request) -> JSONResponse:
    data = await read_json(request)
    namespace = namespace_from_parts(data.get("namespace"))
    properties = data.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise ApiError(400, "BadRequestException", "properties must be an object of strings")
    lake = _state(request).lake
    try:
        await _run(lambda: lake.create_namespace(namespace, properties=properties))
    except ApiError as exc:
        # A missing parent keeps the catalog's message, which names the parent.
        if isinstance(exc.__cause__, catalog_errors.NamespaceAlreadyExistsError):
            raise ApiError(409, "AlreadyExistsException", f"Namespace already exists: {namespace}") from exc.__cause__
        raise
    return JSONResponse({"namespace": parts_of(namespace), "properties": properties})


async def load_namespace(request: Request) -> JSONResponse:
    namespace, lake = _ns(request), _state(request).lake
    properties = await _run_on_namespace(namespace, lake.namespace_properties, namespace)
    return JSONResponse({"namespace": parts_of(namespace), "properties": properties})


async def namespace_exists(request: Request) -> Response:
    namespace, lake = _ns(request), _state(request).lake
    return Response(status_code=204 if await _run(lake.namespace_exists, namespace) else 404)


async def drop_namespace(request: Request) -> Response:
    namespace, lake = _ns(request), _state(request).lake
    await _run_on_namespace(namespace, lake.drop_namespace, namespace)
    return Response(status_code=204)


async def update_namespace_properties(request: Request) -> JSONResponse:
    namespace, lake = _ns(request), _state(request).lake
    data = await read_json(request)
    updates, removals = data.get("updates") or {}, data.get("removals") or []
    if not isinstance(updates, dict) or not isinstance(removals, list):
        raise ApiError(400, "BadRequestException", "updates must be an object and removals a list")
    overlap = set(updates) & set(removals)
    if overlap:
        raise ApiError(422, "UnprocessableEntityException", f"keys both updated and removed: {sorted(overlap)}")
    summary = await _run_on_namespace(
        namespace, lambda: lake.update_namespace_properties(namespace, updates=updates, removals=removals)
    )
    return JSONResponse({k: sorted(summary[k]) for k in ("updated", "removed", "missing")})


# -- tables --------------------------------------------------------------------


def _table_page_params(request: Request) -> tuple[int | None, str | None]:
    """``(page size, page token)`` of a table listing; ``(None, None)``: every table.

    As Iceberg's reference server does: a ``pageSize`` pages (the token may be
    absent or empty on the first request); a ``pageToken`` alone pages at
    :data:`DEFAULT_PAGE_SIZE`; neither returns everything. ``pageSize`` is an
    upper bound, so one above :data:`MAX_PAGE_SIZE` gets pages of that size.
    The token is the catalog's (:mod:`catalog.paging`): it resumes after the
    last name returned, so a page reads only its own keys.
    """
    token = request.query_params.get("pageToken")
    size_text = request.query_params.get("pageSize")
    if size_text is None:
        return (None, None) if token is None else (DEFAULT_PAGE_SIZE, token)
    try:
        size = int(size_text)
    except ValueError:
        raise ApiError(400, "BadRequestException", f"pageSize must be an integer, got {size_text[:40]!r}") from None
    if size < 1:
        raise ApiError(400, "BadRequestException", f"pageSize must be at least 1, got {size}")
    return min(size, MAX_PAGE_SIZE), token


async def list_tables(request: Request) -> JSONResponse:
    namespace, lake = _ns(request), _state(request).lake
    size, token = _table_page_params(request)
    page = await _run(lambda: lake.list_tables(namespace, page_size=size, page_token=token))
    return JSONResponse({"identifiers": [identifier_to_json(n) for n in page], "next-page-token": page.next_page_token})


async def create_table(request: Request) -> JSONResponse:
    namespace, state = _ns(request), _state(request)
    body = await read_json(request)
    location, metadata = await _run(tables.create_table, state.lake, state.warehouse, namespace, body)
    if location is not None:
        state.metrics.commits.labels("iceberg").inc()
    return _table_response(location, metadata)


async def register_table(request: Request) -> JSONResponse:
    namespace, state = _ns(request), _state(request)
    body = await read_json(request)
    current = await _run(tables.register_table, state.lake, state.warehouse, namespace, body)
    return _table_response(current.metadata_location, current.metadata)


def _table(request: Request) -> str:
    return table_name(_ns(request), request.path_params["table"])


async def load_table(request: Request) -> JSONResponse:
    name, state = _table(request), _state(request)
    current = await _run(tables.load_current, state.lake, state.warehouse, name)
    return _table_response(current.metadata_location, current.metadata)


async def table_exists(request: Request) -> Response:
    name, lake = _table(request), _state(request).lake
    return Response(status_code=204 if await _run(lake.table_exists, name) else 404)


async def commit_table(request: Request) -> JSONResponse:
    name, state = _table(request), _state(request)
    body = await read_json(request)
    # The REST spec makes the identifier optional here (the path names the
    # table); one that names another table is refused, never applied here.
    if body.get("identifier") is None:
        body["identifier"] = identifier_to_json(name)
    elif identifier_from_json(body["identifier"], "identifier") != name:
        raise ApiError(
            400, "BadRequestException",
            f"the body's identifier {identifier_from_json(body['identifier'], 'identifier')!r} is not "
            f"the table of the path {name!r}",
        )
    commit = tables.parse_commit(body)
    try:
        current = await _run(tables.commit_table, state.lake, state.warehouse, name, commit)
    except ApiError as exc:
        if exc.status == 409:
            state.metrics.conflicts.labels("iceberg").inc()
        raise
    state.metrics.commits.labels("iceberg").inc()
    return JSONResponse({
        "metadata-location": current.metadata_location,
        "metadata": current.metadata.model_dump(mode="json", by_alias=True, exclude_none=True),
    })


async def drop_table(request: Request) -> Response:
    name, state = _table(request), _state(request)
    purge = query_bool(request, "purgeRequested", "BadRequestException")
    await _run(_drop_table, state, name, purge)
    return Response(status_code=204)


def _drop_table(state: _Enabled, name: str, purge: bool) -> None:
    table = state.lake.load_table(name)
    locations: list[str] = []
    if purge and table.format == ICEBERG:
        # Checked before anything is dropped: a location from before
        # confinement that escapes the warehouse, or overlaps another table's
        # or the store, refuses the purge (drop without purge still works).
        current = tables.load_current(state.lake, state.warehouse, name).metadata.location
        locations = sorted({tables.check_location(state.lake, state.warehouse, loc, name, "table location")
                            for loc in (table.location, current) if loc})
    # A native table's files are the catalog's: the drop records them as
    # purged and purge_dropped deletes them before the answer, as Spark's
    # DROP TABLE ... PURGE does. An Iceberg table's files are known only to
    # its metadata: its location is deleted here.
    native_purge = purge and table.format != ICEBERG
    state.lake.drop_table(name, purge=native_purge)
    if native_purge:
        purge_dropped(state.lake.context, table.id)
    for location in locations:
        # Files leave only after the pointer is gone; older lakehouse
        # versions that still name this table can no longer read it.
        _purge_location(state, location)


def _store_intact(lake: catalog.Lakehouse) -> bool:
    """Whether the store's identity object and its newest root file are still there."""
    from kvstore.format.names import IDENTITY_PATH

    try:
        lake.store.objects.head(IDENTITY_PATH)
        lake.refresh()
    except (FileNotFoundError, StoreError):
        return False
    return True


def _purge_location(state: _Enabled, location: str) -> None:
    """Delete everything under one confined table location; a failure that damaged the store stops the server's writes."""
    import pyarrow.fs as pafs

    filesystem, path = pafs.FileSystem.from_uri(location)
    try:
        filesystem.delete_dir(path)
    except FileNotFoundError:
        return  # nothing was ever written there
    except BaseException:
        if not _store_intact(state.lake):
            _log.critical("a purge of %s failed and the store is damaged: closing it, no more writes", location)
            state.lake.close()
        raise


async def rename_table(request: Request) -> Response:
    data = await read_json(request)
    source = identifier_from_json(data.get("source"), "source")
    destination = identifier_from_json(data.get("destination"), "destination")
    lake = _state(request).lake
    await _reworded(lake, _Wording("Table", source, destination), lake.rename_table, source, destination)
    return Response(status_code=204)


@dataclass(frozen=True)
class _Wording:
    """Names for an error message in the reference catalog's words: what is acted on, and a rename's target."""

    kind: str  # "Table" or "View"
    name: str
    destination: str | None = None


async def _reworded(lake: catalog.Lakehouse, wording: _Wording, fn: Callable[..., T], *args: Any) -> T:
    """:func:`_run` for work on one table or view, with a missing or existing object worded as
    Iceberg's reference catalog words it ("View does not exist: ns.v", "Cannot rename ns.a to ns.b.
    View already exists"): its clients and its REST compatibility kit match on that text, and the
    spec leaves the message to the server."""
    try:
        return await _run(fn, *args)
    except ApiError as exc:
        cause, target = exc.__cause__, wording.destination or wording.name
        if isinstance(cause, catalog_errors.NoSuchNamespaceError):
            namespace = target.rsplit(".", 1)[0]
            raise ApiError(404, "NoSuchNamespaceException", f"Namespace does not exist: {namespace}") from cause
        if isinstance(cause, (catalog_errors.NoSuchTableError, catalog_errors.NoSuchViewError)):
            raise ApiError(exc.status, exc.error_type, f"{wording.kind} does not exist: {wording.name}") from cause
        if isinstance(cause, (catalog_errors.TableAlreadyExistsError, catalog_errors.ViewAlreadyExistsError)):
            other = "Table" if await _run(lake.table_exists, target) else "View"
            if wording.destination is not None:
                message = f"Cannot rename {wording.name} to {target}. {other} already exists"
            elif other == wording.kind:
                message = f"{other} already exists: {target}"
            else:
                message = f"{other} with same name already exists: {target}"
            raise ApiError(409, "AlreadyExistsException", message) from cause
        raise


async def commit_transaction(request: Request) -> Response:
    data = await read_json(request)
    changes = data.get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise ApiError(400, "BadRequestException", "table-changes must be a non-empty list")
    requests = [tables.parse_commit(change) for change in changes]
    state = _state(request)
    try:
        await _run(tables.commit_transaction, state.lake, state.warehouse, requests)
    except ApiError as exc:
        if exc.status == 409:
            state.metrics.conflicts.labels("iceberg").inc()
        raise
    state.metrics.commits.labels("iceberg").inc()
    return Response(status_code=204)


# -- views ---------------------------------------------------------------------


def _view(request: Request) -> str:
    return table_name(_ns(request), request.path_params["view"])


async def list_views(request: Request) -> JSONResponse:
    namespace, lake = _ns(request), _state(request).lake
    names = await _run(lambda: sorted(lake.list_views(namespace)))
    page, token = _page(request, names)
    return JSONResponse({"identifiers": [identifier_to_json(n) for n in page], "next-page-token": token})


def _view_response(loaded: views.Loaded) -> JSONResponse:
    """A ``LoadViewResult``: the metadata and the location of its file (which the spec requires)."""
    return JSONResponse({
        "metadata-location": loaded.metadata_location,
        "metadata": loaded.metadata.model_dump(mode="json", by_alias=True, exclude_none=True),
        "config": {},
    })


async def create_view(request: Request) -> JSONResponse:
    namespace, state = _ns(request), _state(request)
    body = await read_json(request)
    name = table_name(namespace, body.get("name"))  # validates before anything runs
    loaded = await _reworded(
        state.lake, _Wording("View", name), views.create, state.lake, state.warehouse, namespace, name.rsplit(".", 1)[1], body
    )
    return _view_response(loaded)


async def register_view(request: Request) -> JSONResponse:
    namespace, state = _ns(request), _state(request)
    body = await read_json(request)
    name = table_name(namespace, body.get("name"))  # validates before anything runs
    loaded = await _reworded(
        state.lake, _Wording("View", name), views.register, state.lake, state.warehouse, name, body.get("metadata-location")
    )
    return _view_response(loaded)


async def load_view(request: Request) -> JSONResponse:
    name, state = _view(request), _state(request)
    return _view_response(await _reworded(state.lake, _Wording("View", name), views.load, state.lake, state.warehouse, name))


async def view_exists(request: Request) -> Response:
    name, lake = _view(request), _state(request).lake
    return Response(status_code=204 if await _run(lake.view_exists, name) else 404)


async def replace_view(request: Request) -> JSONResponse:
    name, state = _view(request), _state(request)
    body = await read_json(request)
    return _view_response(
        await _reworded(state.lake, _Wording("View", name), views.replace, state.lake, state.warehouse, name, body)
    )


async def drop_view(request: Request) -> Response:
    name, lake = _view(request), _state(request).lake
    await _reworded(lake, _Wording("View", name), lake.drop_view, name)
    return Response(status_code=204)


async def rename_view(request: Request) -> Response:
    data = await read_json(request)
    source = identifier_from_json(data.get("source"), "source")
    destination = identifier_from_json(data.get("destination"), "destination")
    lake = _state(request).lake

    def rename() -> None:
        view = lake.load_view(source)
        with lake.transaction() as tx:  # one version: never both or neither name
            tx.create_view(
                destination, view.sql, dialect=view.dialect, properties=view.properties, metadata=view.metadata
            )
            tx.drop_view(source)

    await _reworded(lake, _Wording("View", source, destination), rename)
    return Response(status_code=204)


# -- any other /v1 path -------------------------------------------------------


async def unmatched(request: Request) -> Response:
    """A ``/v1`` path no route takes: a REST error body, never a redirect.

    Starlette matches routes on the percent-decoded path and redirects a
    path that matches only without its trailing slash: ``GET
    /v1/namespaces/%2F`` was a 307 to ``/v1/namespaces``, and ``DELETE
    /v1/namespaces/a%2F`` one to namespace ``a``. An encoded ``/`` or ``\\``,
    an empty or dot segment is a malformed name (400; namespace parts are
    separated by ``%1F``), a path another route takes with another method is
    405, anything else 404.
    """
    for other in request.app.router.routes:
        if other is not _UNMATCHED and other.matches(request.scope)[0] is Match.PARTIAL:
            raise ApiError(405, "MethodNotAllowedException", f"{request.method} is not allowed on {request.url.path}")
    raw = bytes(request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
    segments = raw.split("/")[2:]  # after "" and "v1"
    if "%2f" in raw.lower() or "%5c" in raw.lower():
        problem = "an encoded '/' or '\\' in a namespace or name (namespace parts are separated by %1F)"
    elif "" in segments:
        problem = "an empty namespace, table or view name (an empty path segment or a trailing '/')"
    elif any(s in (".", "..") or s.lower() in ("%2e", "%2e%2e", ".%2e", "%2e.") for s in segments):
        problem = "a '.' or '..' path segment"
    else:
        raise ApiError(404, "NotFoundException", f"no Iceberg REST endpoint {request.method} {raw}")
    raise ApiError(400, "BadRequestException", f"{request.method} {raw}: {problem}")


# Last: it takes every /v1 path (any method) that no route above takes.
_UNMATCHED: Final = Route(
    "/v1/{path:path}", unmatched, methods=["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
)

NS = "/v1/namespaces/{namespace}"
# HEAD routes come before GET ones: Starlette also answers HEAD from a GET
# route, which for a table would read its metadata just to send no body.
ROUTES = [
    route("/v1/config", get_config, "GET", params=("warehouse",), error_type="BadRequestException"),
    route("/v1/namespaces", list_namespaces, "GET", params=('parent', 'pageToken', 'pageSize'), error_type="BadRequestException"),
    route("/v1/namespaces", create_namespace, "POST", error_type="BadRequestException"),
    route(NS, namespace_exists, "HEAD", error_type="BadRequestException"),
    route(NS, load_namespace, "GET", error_type="BadRequestException"),
    route(NS, drop_namespace, "DELETE", error_type="BadRequestException"),
    route(NS + "/properties", update_namespace_properties, "POST", error_type="BadRequestException"),
    route(NS + "/tables", list_tables, "GET", params=('pageToken', 'pageSize'), error_type="BadRequestException"),
    route(NS + "/tables", create_table, "POST", error_type="BadRequestException"),
    route(NS + "/register", register_table, "POST", error_type="BadRequestException"),
    route(NS + "/tables/{table}", table_exists, "HEAD", error_type="BadRequestException"),
    route(NS + "/tables/{table}", load_table, "GET", params=('snapshots',), error_type="BadRequestException"),
    route(NS + "/tables/{table}", commit_table, "POST", error_type="BadRequestException"),
    route(NS + "/tables/{table}", drop_table, "DELETE", params=('purgeRequested',), error_type="BadRequestException"),
    route("/v1/tables/rename", rename_table, "POST", error_type="BadRequestException"),
    route("/v1/transactions/commit", commit_transaction, "POST", error_type="BadRequestException"),
    route(NS + "/views", list_views, "GET", params=('pageToken', 'pageSize'), error_type="BadRequestException"),
    route(NS + "/views", create_view, "POST", error_type="BadRequestException"),
    route(NS + "/views/{view}", view_exists, "HEAD", error_type="BadRequestException"),
    route(NS + "/views/{view}", load_view, "GET", error_type="BadRequestException"),
    route(NS + "/views/{view}", replace_view, "POST", error_type="BadRequestException"),
    route(NS + "/views/{view}", drop_view, "DELETE", error_type="BadRequestException"),
    route("/v1/views/rename", rename_view, "POST", error_type="BadRequestException"),
    route(NS + "/register-view", register_view, "POST", error_type="BadRequestException"),
    _UNMATCHED,
]
