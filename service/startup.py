"""Opening the lakehouse a server serves, and opening it early.

``lakekv serve`` is healthy once its store is open, and on a large store the
open (a tail read per SST, a root per unflushed version) takes about as long
as importing the server's own modules (uvicorn, Starlette, the routes:
~0.3 s). :class:`EarlyOpen` starts the open on a thread before those
imports, and the app's lifespan takes the result instead of opening then;
issue 38 asks for a server healthy within 1 s of start on a store of 10
million keys. Only the subprocess ``lakekv serve`` does this: an app built
without one opens in its lifespan, as before.

This module imports only :mod:`catalog` and the config, never the server
(that would be the import it runs beside).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import catalog
from service.config import ServerConfig


def open_lakehouse(config: ServerConfig) -> catalog.Lakehouse:
    """The lakehouse (and store) at ``config.url`` with the server's store options.

    Raises:
        FileNotFoundError, StoreError, ValueError: as for :func:`catalog.open`.
    """
    return catalog.open(config.url, **dict(config.store_options))


class EarlyOpen:
    """:func:`open_lakehouse` on its own thread, started at once; :meth:`take` waits for it.

    Whoever calls :meth:`take` owns the lakehouse (and closes it); if nobody
    does (the server never started), :meth:`close_unless_taken` closes it.
    Thread-safe.
    """

    def __init__(self, config: ServerConfig) -> None:
        self._future: Future[catalog.Lakehouse] = Future()
        self._lock = threading.Lock()
        self._taken = False
        self._thread = threading.Thread(target=self._run, args=(config,), name="lakekv-open", daemon=True)
        self._thread.start()

    def _run(self, config: ServerConfig) -> None:
        try:
            lake = open_lakehouse(config)
        except BaseException as exc:  # handed to take(), which raises it in the lifespan
            self._future.set_exception(exc)
            return
        self._future.set_result(lake)

    def take(self) -> catalog.Lakehouse:
        """The opened lakehouse, once (blocks until the open finished).

        Raises:
            RuntimeError: it was taken before.
            FileNotFoundError, StoreError, ValueError: the open failed (as :func:`open_lakehouse`).
        """
        with self._lock:
            if self._taken:
                raise RuntimeError("the early-opened lakehouse was taken already")
            self._taken = True
        return self._future.result()

    def close_unless_taken(self) -> None:
        """Close the lakehouse if :meth:`take` never handed it out (waits for the open to end)."""
        with self._lock:
            if self._taken:
                return
            self._taken = True
        self._thread.join()
        if self._future.exception() is None:
            self._future.result().close()
