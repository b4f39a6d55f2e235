"""Background follower: tails the version chain for other writers' commits."""

from __future__ import annotations

import logging
import threading

from kvstore.errors import StoreError
from kvstore.state import EngineState

log = logging.getLogger(__name__)


class Follower:
    """Calls ``state.catch_up()`` every ``interval_s`` seconds until closed.

    Errors are logged and retried at the next tick: a flaky network must not
    kill the thread, and readers simply stay on the last version they saw.
    """

    def __init__(self, state: EngineState, interval_s: float, stale_after_s: float | None = None) -> None:
        self._state = state
        self._stale_after_s = stale_after_s
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name="lakekv-follower", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._state.catch_up(stale_after_s=self._stale_after_s)
            except StoreError as exc:
                self.errors += 1
                log.warning("following %s failed (will retry): %s", self._state.store.url, exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
