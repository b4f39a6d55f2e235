"""Routes that refuse what they do not honour: every query parameter a route
accepts is declared with it, and any other is a 400 naming it.

``PUT /kv/v1/keys/k?cas=5`` used to write unconditionally, and
``GET ...?version=1`` read the head: an option nobody honours must be an
error, never silence. Declaring the accepted names beside the route keeps
the rule in one place for the KV, durable and Iceberg APIs alike.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.errors import ApiError

Endpoint = Callable[[Request], Awaitable[Response]]


def route(
    path: str, endpoint: Endpoint, method: str, params: Iterable[str] = (), error_type: str = "ValueError"
) -> Route:
    """A Route for ``method path`` whose requests may carry only the query ``params`` named."""
    accepted = frozenset(params)

    @functools.wraps(endpoint)
    async def checked(request: Request) -> Response:
        unknown = sorted(set(request.query_params.keys()) - accepted)
        if unknown:
            allowed = ", ".join(sorted(accepted)) or "none"
            raise ApiError(
                400,
                error_type,
                f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                f"for {method} {path} (accepted: {allowed})",
            )
        return await endpoint(request)

    checked.accepted_params = accepted  # type: ignore[attr-defined]
    return Route(path, checked, methods=[method])
