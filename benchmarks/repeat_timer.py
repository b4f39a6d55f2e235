"""Timing a call the way the scale benchmarks report it: once cold, then warm repeats as median, min and max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """``fn`` run once to warm (its time is ``first_ms``), then ``repeats`` times.

    Returns ``ms`` (the median), ``min_ms``, ``max_ms``, ``first_ms`` and the
    last call's ``result``.
    """
    start = time.perf_counter()
    result = fn()
    first_ms = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "first_ms": first_ms,
            "result": result}
