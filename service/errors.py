"""HTTP errors: one JSON shape for every failure, and the mapping from engine
exceptions to status codes.

The body is the Iceberg REST ``ErrorModel`` shape, used by the KV API too, so
a client needs one parser::

    {"error": {"message": "...", "type": "ConflictError", "code": 409}}

``type`` is the exception class name; :mod:`kvclient.transport` turns it back
into the same exception the embedded store raises. A class renamed after its
name went on the wire keeps its old name there (:data:`WIRE_TYPES`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from catalog.errors import ArgumentTypeError, DurableTransactionExpiredError

from kvstore.errors import (
    CommitError,
    ConflictError,
    CorruptionError,
    LeaseNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    SnapshotTooOldError,
    StoreClosedError,
    StoreError,
    TransactionClosedError,
    TransactionExpiredError,
)


class ApiError(Exception):
    """An error with its HTTP status and the ``type`` the client sees."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers


# Checked in order: subclasses before their bases.
_STATUS_BY_EXCEPTION: tuple[tuple[type[BaseException], int], ...] = (
    (ConflictError, 409),
    (PreconditionFailedError, 412),
    (LeaseNotFoundError, 404),
    (TransactionExpiredError, 410),
    (TransactionClosedError, 410),
    (SnapshotTooOldError, 410),
    (StoreClosedError, 503),  # only while shutting down
    (CommitError, 503),
    (ObjectStoreError, 503),
    (CorruptionError, 500),
    (StoreError, 500),
    (ValueError, 400),
    # A wrong argument type a public catalog method refused. Any other
    # TypeError is a bug in the server: a 500 with a request id, never a 4xx.
    (ArgumentTypeError, 400),
)


# The ``type`` a renamed class keeps in answers, so clients that match on it
# (kvclient's ERROR_TYPES) see no change.
WIRE_TYPES: dict[type[BaseException], str] = {
    DurableTransactionExpiredError: "TransactionExpiredError",
}


def to_api_error(exc: BaseException) -> ApiError | None:
    """The ApiError for an engine or argument exception, or None if it is a bug."""
    if isinstance(exc, ApiError):
        return exc
    for cls, status in _STATUS_BY_EXCEPTION:
        if isinstance(exc, cls):
            return ApiError(status, WIRE_TYPES.get(type(exc), type(exc).__name__), str(exc))
    return None


def error_response(error: ApiError) -> JSONResponse:
    body = {"error": {"message": error.message, "type": error.error_type, "code": error.status}}
    return JSONResponse(body, status_code=error.status, headers=error.headers)
