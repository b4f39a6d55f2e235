"""Jittered exponential backoff: the one formula every retry loop uses.

The cap doubles per attempt from ``min_s`` up to ``max_s``; the delay is
uniform between ``min_s`` and the cap ("full jitter" above the floor), so
writers that collided once spread out instead of colliding again.

>>> all(0.001 <= backoff_delay(n, 0.001, 0.05) <= 0.05 for n in range(40))
True
>>> backoff_delay(0, 0.01, 0.01)
0.01
"""

from __future__ import annotations

import random


def backoff_delay(attempt: int, min_s: float, max_s: float) -> float:
    """Seconds to sleep before retry number ``attempt`` (0 = the first retry).

    Requires: ``0 <= min_s <= max_s``.
    """
    cap = min(max_s, min_s * 2 ** min(attempt, 30))
    return random.uniform(min_s, max(min_s, cap))
