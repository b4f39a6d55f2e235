"""The storage's own clock: "now" as the object store would stamp it.

Ages that decide deletion (GC grace, the retention window) compare object
timestamps (``ObjectMeta.mtime``, set by the storage) with "now". Using the
local clock for "now" mixes two clocks: a skewed or coarse storage clock
then makes fresh files look old. :class:`StorageClock` measures the storage
clock instead: it PUTs a tiny probe object (:data:`PROBE_PATH`, a name only
the engine writes), HEADs it, and keeps the offset between the storage's
stamp and the local clock at the moment of the PUT. ``now()`` is the local
clock plus that offset, re-measured every ``refresh_s`` seconds.

Resolution: the storage's timestamp granularity. S3 and SeaweedFS report
whole seconds (their stamps are truncated), local files nanoseconds. The
probe's stamp is truncated too, so ``now()`` may run up to one resolution
step *behind* the storage clock (and never ahead), and any object's stamp may
be up to one step earlier than its real creation. :meth:`StorageClock.age`
accounts for both, so an age it reports is never larger than the real one.
:attr:`StorageClock.resolution` is 1.0 s once every probe of a measurement
(:data:`_MAX_PROBES` of them) came back with a whole-second stamp, else 1 ms (a
conservative bound for sub-second clocks). One whole-second stamp is not
enough: a local file system stamps with a kernel tick of a few milliseconds,
which lands on a whole second now and then.

Without writing (a full disk, read-only credentials): when the probe's PUT
fails, the clock is measured from stamps the storage already holds, so that
reading, GC and verify work with 0 bytes free.

* A backend with a ``touch``
  (:meth:`~kvstore.objstore.local.LocalStore.touch`: set an existing
  object's stamp to the storage's time, no new bytes) re-stamps the
  existing probe. That is a probe as good as a PUT: the reading stays
  *exact* (behind the storage clock by at most one resolution step).
* Otherwise (or with no probe yet) the newest stamp under ``_`` (root files,
  the hint, the probe) is the reading: a *lower bound* only, behind the
  storage clock by up to the time since that object was written.

Both are stamps the storage made before the HEAD or LIST returned, so the
offset never makes the clock run ahead. Who may use which:

* Deciding to delete (:meth:`StorageClock.cutoff`, :meth:`StorageClock.age`:
  GC's grace, the retention window) needs "certainly older than", and a
  lower bound gives it: a lagging clock makes files look younger, so GC
  keeps them longer than it needs to and never deletes one younger than the
  grace. These use the lower bound when no exact reading can be made.
* Deciding that a file is still young enough to commit (the catalog's
  freshness rule, through ``Store.storage_now``) needs the opposite, a
  clock that does not lag: :meth:`StorageClock.now` gives only exact
  readings and raises when it has only a lower bound.

The next re-measurement tries the PUT again.

Thread-safety: every method may be called from many threads.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

from kvstore.errors import ObjectStoreError
from kvstore.format.names import CLOCK_PROBE_PATH as PROBE_PATH
from kvstore.objstore.base import ObjectStore

log = logging.getLogger(__name__)

# Re-measure the offset this often: local clocks drift (or get stepped by
# NTP) by far less than a second per minute.
DEFAULT_REFRESH_S: Final = 60.0
_WHOLE_SECONDS: Final = 1.0
_SUB_SECOND: Final = 0.001
# A probe whose PUT + HEAD took longer than this is retried (see measure()).
_TIGHT_ROUND_TRIP_S: Final = 0.02
_MAX_PROBES: Final = 3


class StorageClock:
    """See the module docstring."""

    def __init__(self, store: ObjectStore, refresh_s: float = DEFAULT_REFRESH_S) -> None:
        self._store = store
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._measured_at = 0.0  # time.monotonic() of the last probe
        self._resolution = _SUB_SECOND
        # The offset and, when it is only a lower bound, why (None: exact);
        # replaced as one tuple so a reader never pairs one with the other's.
        self._reading: tuple[float, ObjectStoreError | None] | None = None

    def now(self) -> float:
        """Seconds since the epoch on the storage's clock: never ahead of it,
        behind it by at most one resolution step.

        Raises:
            ObjectStoreError: the probe could not be written nor re-stamped
                (only a lower bound could be read; see the module docstring).
        """
        offset, inexact = self._current()
        if inexact is not None:
            raise ObjectStoreError(
                f"cannot read the storage clock of {self._store.url}: its probe could not be written ({inexact})"
            ) from inexact
        return time.time() + offset

    def _lower_bound_now(self) -> float:
        """A reading never ahead of the storage's clock, maybe far behind it.

        Raises:
            ObjectStoreError: not even a lower bound could be read.
        """
        return time.time() + self._current()[0]

    def _current(self) -> tuple[float, ObjectStoreError | None]:
        reading = self._reading
        if reading is None or time.monotonic() - self._measured_at > self._refresh_s:
            self.measure()
            reading = self._reading
            assert reading is not None  # measure() sets it or raises
        return reading

    @property
    def resolution(self) -> float:
        """Granularity of the storage's timestamps in seconds (measures once if needed)."""
        if self._reading is None:
            self.measure()
        return self._resolution

    def age(self, mtime: float) -> float:
        """A lower bound on the age of an object the storage stamped ``mtime``.

        ``mtime`` may have been truncated by one resolution step, so the
        object can be one step younger than ``now() - mtime``; a second
        step absorbs local-clock drift between two measurements. Without an
        exact reading, from the lower bound (see the module docstring).
        """
        return self._lower_bound_now() - mtime - 2 * self.resolution

    def cutoff(self, age_s: float) -> float:
        """Storage timestamps at or before this are certainly more than ``age_s`` old.

        The same bound as :meth:`age`, as a timestamp: compare many ``mtime``
        values with one clock reading. Without an exact reading, from the
        lower bound (see the module docstring).
        """
        return self._lower_bound_now() - age_s - 2 * self.resolution

    def measure(self) -> float:
        """Probe the storage now; return the new offset (storage minus local).

        Every probe gives a lower bound on the offset (see below), so the
        largest of several is one too: when a probe's round trip was long (a
        slow request, or this thread descheduled between the PUT and reading
        the local clock), probe again, up to :data:`_MAX_PROBES` times, and keep
        the tightest bound. A loose bound is safe but makes young files of
        the last round trip look younger still.
        """
        offset = -float("inf")
        probes = whole_stamps = 0
        known_whole = self._resolution == _WHOLE_SECONDS
        for _ in range(_MAX_PROBES):
            started = time.time()
            try:
                self._store.put(PROBE_PATH, b"lakekv storage clock probe\n")
            except ObjectStoreError as exc:
                return self._measure_without_writing(exc)
            stamp = self._store.head(PROBE_PATH).mtime
            # The storage stamped the probe at some moment before this line (and
            # truncated the stamp): pairing it with the local time *now* can only
            # make the offset smaller, so now() never runs ahead of the storage.
            finished = time.time()
            offset = max(offset, stamp - finished)
            probes += 1
            whole_stamps += stamp == int(stamp)
            # A fine clock stamps a whole second whenever its tick lands on
            # one (about 1 probe in 250 with a 4 ms kernel tick): believe a
            # whole-second clock only when every probe, up to the last, agrees.
            unconfirmed = whole_stamps == probes and not known_whole
            if finished - started <= _TIGHT_ROUND_TRIP_S and not unconfirmed:
                break
        whole_seconds = whole_stamps == probes
        with self._lock:
            if whole_seconds:
                self._resolution = _WHOLE_SECONDS
            self._reading = (offset, None)
            self._measured_at = time.monotonic()
        return offset

    def _measure_without_writing(self, cause: ObjectStoreError) -> float:
        """The offset from stamps the storage already holds (the probe's PUT failed).

        Raises:
            ObjectStoreError: ``cause``, when the storage holds no stamp to read either.
        """
        stamp = None
        inexact: ObjectStoreError | None = None
        touch = getattr(self._store, "touch", None)
        if touch is not None:
            try:
                stamp = touch(PROBE_PATH).mtime  # a probe without new bytes: exact
            except (FileNotFoundError, ObjectStoreError):
                stamp = None  # no probe yet, or the touch was refused: the listing below
        if stamp is None:
            inexact = cause
            try:
                stamp = max((meta.mtime for meta in self._store.list("_")), default=None)
            except ObjectStoreError:
                stamp = None
            if stamp is None:
                raise cause
            log.warning(
                "storage clock of %s read from existing stamps (%s): it may lag the storage's; "
                "GC keeps files longer meanwhile",
                self._store.url,
                cause,
            )
        # Stamped before this line: pairing it with the local time now gives a
        # lower bound on the offset, as for a probe.
        offset = stamp - time.time()
        with self._lock:
            if stamp == int(stamp):
                self._resolution = _WHOLE_SECONDS  # unconfirmed, so the larger (safe) step
            self._reading = (offset, inexact)
            self._measured_at = time.monotonic()
        return offset
