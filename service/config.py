"""Server options, parsed once into a frozen dataclass, and the bind rule.

The bind rule is the first line of the security model: a server that listens
on anything but loopback without a token would hand the whole store to anyone
who can reach the port, so :func:`check_bind` refuses to start it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Final

KiB: Final = 1024
MiB: Final = 1024 * KiB

# Names that always mean "this machine only".
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})

# A bearer token shorter than this is guessable by brute force over HTTP.
MIN_TOKEN_CHARS: Final = 16


@dataclass(frozen=True)
class ServerConfig:
    """What one ``lakekv serve`` process serves and how it guards it."""

    # Store (phase 1) or lakehouse (phase 2) URL the server opens.
    url: str
    host: str = "127.0.0.1"
    port: int = 8181
    # Bearer token; None = no authentication (allowed on loopback only).
    token: str | None = None
    # Requests larger than this get 413 before their body is read: the value
    # limit of the engine (64 MiB) is for embedded use; over HTTP a smaller
    # bound keeps one client from holding the server's memory.
    max_body_bytes: int = 16 * MiB
    # Interactive transactions may not outlive this (a client cannot pin the
    # oracle and retention for longer than an embedded default transaction).
    max_txn_ttl_s: float = 3600.0
    # Open interactive transactions across all clients: each pins memory.
    max_open_txns: int = 10_000
    # Scan pages: the default and the cap of rows per response.
    scan_page_rows: int = 1000
    max_scan_page_rows: int = 10_000
    # Worker threads for blocking store calls (commits wait on a PUT): enough
    # that 64+ concurrent committers can all be in one group commit.
    worker_threads: int = 128
    # SIGTERM: in-flight requests (commits) get this long to finish.
    graceful_shutdown_s: float = 30.0
    # Where Iceberg table metadata and data live (phase 2); None = under url.
    warehouse: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    # HOST:PORT of etcd's v3 gRPC API (service.etcd.server); None: not served.
    etcd_listen: str | None = None
    # How often a watch with progress_notify that got no events hears the current revision
    # (etcd's --experimental-watch-progress-notify-interval, 10 minutes by default).
    etcd_progress_interval_s: float = 600.0
    # Extra kvstore.open options (tests use poll_interval_s etc.).
    store_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, got {self.port!r}")
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ValueError(f"token must be at least {MIN_TOKEN_CHARS} characters")
        if self.max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be positive, got {self.max_body_bytes}")
        if not self.etcd_progress_interval_s > 0:
            raise ValueError(f"etcd_progress_interval_s must be positive, got {self.etcd_progress_interval_s!r}")
        if self.etcd_listen is not None:
            host, sep, port = self.etcd_listen.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
                raise ValueError(f"etcd_listen must be HOST:PORT, not {self.etcd_listen!r}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")


def is_loopback(host: str) -> bool:
    """True if ``host`` only accepts connections from this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("127.8.0.1"), is_loopback("0.0.0.0"), is_loopback("::")
    (True, True, False, False)
    """
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def check_bind(config: ServerConfig) -> None:
    """Refuse a non-loopback bind without a token.

    Raises:
        ValueError: ``config.host`` is not loopback and ``config.token`` is None.
    """
    if config.token is None and not is_loopback(config.host):
        raise ValueError(
            f"refusing to bind {config.host!r} without a token: pass --token or set LAKEKV_TOKEN "
            "(only loopback addresses may run unauthenticated)"
        )
    if config.token is None and config.etcd_listen is not None:
        etcd_host = config.etcd_listen.rpartition(":")[0].strip("[]")
        if not is_loopback(etcd_host):
            raise ValueError(
                f"refusing to serve the etcd API on {etcd_host!r} without a token: pass --token or set "
                "LAKEKV_TOKEN (only loopback addresses may run unauthenticated)"
            )
