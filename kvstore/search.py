"""Gallop-then-bisect: the one search over monotone predicates the engine uses
(finding the latest version, the version at a timestamp, the oldest version
reaching a seq)."""

from __future__ import annotations

from typing import Callable


def last_true(low: int, high: int | None, predicate: Callable[[int], bool], *, low_holds: bool = False) -> int:
    """Largest ``v`` in ``[low, high]`` with ``predicate(v)``, for a predicate that
    is True then False; ``low - 1`` if it is False everywhere.

    Gallops (``low + 1, + 2, + 4, ...``) before bisecting, so the cost is
    ``O(log(answer - low))`` calls, not ``O(log(high - low))``. ``high=None``
    is unbounded (the predicate must turn False eventually); ``low_holds``
    skips the call that would confirm ``predicate(low)``.

    >>> last_true(0, 1000, lambda v: v <= 6)
    6
    >>> last_true(3, None, lambda v: v < 100, low_holds=True)
    99
    >>> last_true(5, 9, lambda v: False)
    4
    """
    if high is not None and low > high:
        return low - 1
    if not low_holds and not predicate(low):
        return low - 1
    lo, step = low, 1  # predicate(lo) holds
    while (high is None or lo + step <= high) and predicate(lo + step):
        lo += step
        step *= 2
    hi = lo + step if high is None else min(lo + step, high + 1)  # predicate(hi) fails, or past the range
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            lo = mid
        else:
            hi = mid
    return lo
