"""etcd's gRPC errors: the status code and exact message each client matches on.

clientv3 and etcdctl turn these messages back into typed errors
(``rpctypes.ErrCompacted`` ...) by their text, and retry or give up by their
code, so both are etcd's own (``api/v3rpc/rpctypes/error.go`` of etcd 3.5).
Handlers raise :class:`EtcdError`; the servicers' wrapper answers with it.
"""

from __future__ import annotations

import grpc


class EtcdError(Exception):
    """An answer with etcd's ``code`` and ``message``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _error(code: grpc.StatusCode, message: str) -> EtcdError:
    return EtcdError(code, message)


EMPTY_KEY = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided")
KEY_NOT_FOUND = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key not found")
VALUE_PROVIDED = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: value is provided")
LEASE_PROVIDED = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: lease is provided")
TOO_MANY_OPS = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: too many operations in txn request")
DUPLICATE_KEY = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request")
COMPACTED = _error(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted")
FUTURE_REV = _error(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision")
LEASE_NOT_FOUND = _error(grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found")
REQUEST_TOO_LARGE = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: request is too large")
USER_EMPTY = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: user name is empty")
AUTH_FAILED = _error(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password")
AUTH_NOT_ENABLED = _error(grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: authentication is not enabled")
INVALID_AUTH_TOKEN = _error(grpc.StatusCode.UNAUTHENTICATED, "etcdserver: invalid auth token")
STOPPED = _error(grpc.StatusCode.UNAVAILABLE, "etcdserver: server stopped")
TIMEOUT = _error(grpc.StatusCode.UNAVAILABLE, "etcdserver: request timed out")


class EtcdLeaseNotFoundError(EtcdError):
    """The lease was never granted, was revoked, or its deadline has passed (:mod:`service.etcd.lease_table`)."""

    def __init__(self) -> None:
        super().__init__(LEASE_NOT_FOUND.code, LEASE_NOT_FOUND.message)


class EtcdLeaseLateError(EtcdLeaseNotFoundError):
    """A keepalive whose write landed after the old deadline: others may have seen the lease expire."""


class EtcdLeaseExistsError(EtcdError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: lease already exists")


class EtcdLeaseTTLTooLargeError(EtcdError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: too large lease TTL")
