"""The ASGI application: routes, middleware, error handlers and lifecycle.

Why Starlette and not FastAPI: FastAPI's value is request models and OpenAPI
generated from pydantic types. Here the Iceberg protocol's models already
exist (pyiceberg's own, parsed where needed), KV bodies are raw bytes or
base64 fields checked by hand, and every request passes through the same
small handlers. Starlette gives the routing, request/response types and
middleware without the per-request dependency resolution and validation
layers, and with one dependency fewer.

Middleware order, outermost first: metrics + access log (so 401/413 answers
are counted and logged too), body limit, bearer auth (a request without a
token never has its body read).

Lifecycle: the lifespan opens the store and closes it after uvicorn has
finished in-flight requests on SIGTERM, so a commit that started is either
answered or never started; closing the store drains the committer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import AsyncIterator

import anyio.to_thread
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import catalog
from kvstore.errors import StoreError
from service import durable_api, kv_api, kv_leases, kv_txn, kv_watch, spark_control
from service.etcd import gateway as etcd_gateway
from service.iceberg import routes as iceberg_routes
from service.config import ServerConfig
from service.errors import ApiError, error_response, to_api_error
from service.metrics import Metrics, MetricsAndAccessLog
from service.security import BearerAuth, BodyLimit
from service.txn_registry import TxnRegistry

_log = logging.getLogger("lakekv.serve")

# How often expired interactive transactions are swept in the background.
_SWEEP_EVERY_S = 5.0


async def _handle_error(request: Request, exc: Exception) -> Response:
    error = to_api_error(exc)
    if error is None:  # not ours to translate: a bug, answered by _internal_error
        raise exc
    return error_response(error)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug: 500 with a request id that is in the log line with the traceback too."""
    request_id = uuid.uuid4().hex[:16]
    _log.error("internal error, request id %s: %s %s", request_id, request.method, request.url.path, exc_info=exc)
    body = {
        "error": {
            "message": f"internal server error (request id {request_id}; the server log has the details)",
            "type": "InternalServerError",
            "code": 500,
            "request_id": request_id,
        }
    }
    return JSONResponse(body, status_code=500, headers={"X-Request-Id": request_id})


async def healthz(request: Request) -> JSONResponse:
    state: kv_api.KvState | None = getattr(request.app.state, "kv", None)
    if state is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    return JSONResponse({"status": "ok", "version": state.store.version})


def create_app(config: ServerConfig) -> Starlette:
    """Build the app for ``config``; the store opens when the app starts."""
    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = config.worker_threads
        # One store handle serves both APIs: the catalog's keys and the KV
        # API's (under their own prefix) live in the same lakekv store.
        lake = await run_in_threadpool(lambda: catalog.open(config.url, **dict(config.store_options)))
        store = lake.store
        txns = TxnRegistry(store, config.max_open_txns, config.max_txn_ttl_s)
        app.state.kv = kv_api.KvState(config, store, txns, metrics)
        try:
            from service.iceberg.warehouse import Warehouse

            warehouse: Warehouse | None = Warehouse.for_lakehouse(config.url, config.warehouse)
        except ValueError as exc:
            warehouse = None
            logging.getLogger("lakekv.serve").warning("Iceberg REST API disabled: %s", exc)
        app.state.iceberg = iceberg_routes.IcebergState(lake, warehouse, metrics)

        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(_SWEEP_EVERY_S)
                await run_in_threadpool(txns.sweep)

        sweeper = asyncio.create_task(sweep_forever())
        etcd = None
        if config.etcd_listen is not None:
            from service.etcd import server as etcd_server  # grpc is imported only when the etcd API is served

            etcd = await etcd_server.start(config, store)
            app.state.etcd = etcd
        try:
            yield
        finally:
            if etcd is not None:
                await etcd.stop(config.graceful_shutdown_s)
            sweeper.cancel()
            txns.close()
            await run_in_threadpool(lake.close)

    async def metrics_endpoint(request: Request) -> Response:
        return await metrics.endpoint(request)

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *kv_api.ROUTES,
        *kv_txn.ROUTES,
        *kv_watch.ROUTES,
        *kv_leases.ROUTES,
        *durable_api.ROUTES,
        *spark_control.ROUTES,
        *iceberg_routes.ROUTES,
        *etcd_gateway.ROUTES,
    ]
    middleware = [
        Middleware(MetricsAndAccessLog, metrics=metrics),
        Middleware(BodyLimit, max_bytes=config.max_body_bytes),
        Middleware(BearerAuth, token=config.token),
    ]
    handlers = {
        ApiError: _handle_error, StoreError: _handle_error, ValueError: _handle_error, TypeError: _handle_error,
        Exception: _internal_error,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan)
    # A path no route takes is answered by that route family's error, never by a
    # redirect to the path with its trailing slash flipped: a client following it
    # would reach another object (DELETE /v1/namespaces/a%2F was namespace a).
    app.router.redirect_slashes = False
    app.state.metrics = metrics
    return app
