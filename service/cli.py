"""``lakekv serve``: arguments and the uvicorn launch.

:mod:`kvstore.cli` registers the subcommand through :func:`add_serve_arguments`
and calls :func:`run_serve`; the server's dependencies (Starlette, uvicorn)
are imported only here, when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from service.config import ServerConfig, check_bind

TOKEN_ENV = "LAKEKV_TOKEN"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``serve`` options to ``parser``."""
    parser.add_argument("url", metavar="URL", help="store URL: a path, file:///..., memory://name or s3://bucket/prefix")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need a token)")
    parser.add_argument("--port", type=int, default=8181, help="TCP port (default 8181)")
    parser.add_argument(
        "--token", help=f"bearer token clients must send (prefer the {TOKEN_ENV} environment variable: "
        "arguments are visible to other users in the process list)",
    )
    parser.add_argument("--tls-cert", metavar="FILE", help="PEM certificate: serve HTTPS")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    parser.add_argument("--warehouse", metavar="LOCATION", help="where Iceberg tables live (default: under URL)")
    parser.add_argument(
        "--max-body-bytes", type=int, default=ServerConfig.max_body_bytes, help="largest request body (default 16 MiB)"
    )
    parser.add_argument(
        "--etcd-listen", metavar="HOST:PORT",
        help="also serve etcd's v3 gRPC API there (etcdctl, clientv3...); same bind and token rules as --host",
    )
    parser.add_argument(
        "--etcd-progress-interval", type=float, metavar="SECONDS", default=ServerConfig.etcd_progress_interval_s,
        help="how often an idle etcd watch with progress_notify hears the current revision (default 600)",
    )
    parser.add_argument(
        "--retention", type=float, metavar="SECONDS",
        help="how long history stays readable (reads and watches at old revisions, time travel); "
        "default 24 h. etcd's Compact can only raise the floor sooner",
    )
    parser.add_argument("--quiet", action="store_true", help="no access log")


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Parse ``serve`` arguments (and ``LAKEKV_TOKEN``) into a checked config.

    Raises:
        ValueError: a bad option, or a non-loopback bind without a token.
    """
    store_options: tuple[tuple[str, object], ...] = ()
    if args.retention is not None:
        if not args.retention > 0:
            raise ValueError(f"--retention must be a positive number of seconds, not {args.retention}")
        store_options = (("retention_window_s", args.retention),)
    config = ServerConfig(
        url=args.url, host=args.host, port=args.port, token=args.token or os.environ.get(TOKEN_ENV) or None,
        max_body_bytes=args.max_body_bytes, warehouse=args.warehouse, tls_cert=args.tls_cert, tls_key=args.tls_key,
        etcd_listen=args.etcd_listen, etcd_progress_interval_s=args.etcd_progress_interval, store_options=store_options,
    )
    check_bind(config)
    return config


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; return the exit code."""
    config = config_from_args(args)
    import uvicorn

    from service.app import create_app
    from service.http_protocol import CoalescingHttpToolsProtocol

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("lakekv.access").setLevel(logging.WARNING if args.quiet else logging.INFO)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config), host=config.host, port=config.port, ssl_certfile=config.tls_cert,
            ssl_keyfile=config.tls_key, access_log=False, log_level="info", lifespan="on",
            timeout_graceful_shutdown=int(config.graceful_shutdown_s), server_header=False,
            http=CoalescingHttpToolsProtocol,
        )
    )
    # uvicorn handles SIGTERM/SIGINT itself (stop accepting, finish in-flight
    # requests, run the lifespan shutdown that closes the store), then
    # re-raises the signal to whatever handler was installed before it. With
    # the default handler the process would die of the signal after a clean
    # shutdown; this one lets it exit 0 instead.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _after_graceful_shutdown)
    server.run()
    # uvicorn sets started only once listening: a failed bind or a store that
    # did not open ends run() without it.
    return 0 if server.started else 1


def _after_graceful_shutdown(signum: int, frame: object) -> None:
    logging.getLogger("lakekv.serve").info("stopped by %s after finishing in-flight requests", signal.Signals(signum).name)
