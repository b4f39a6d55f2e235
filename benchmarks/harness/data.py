"""Keys, values and key choosers shared by every engine in a run.

Everything is generated once per run from a seed and handed to each engine
unchanged, so every engine loads the same rows in the same order and reads
the same keys in the same order, and generation cost is never timed.

* Keys are 16 bytes: the row number in 16 decimal digits, so byte order is
  numeric order and a scan of ``[key(i), key(i + n))`` holds exactly n rows.
* Values are 100 bytes cut from one random buffer at varying offsets: cheap
  to make, and incompressible, so no engine's compression gets free wins.
* The load order is a seeded shuffle (random inserts, the usual case for an
  LSM and the harder one for a B-tree).
"""

from __future__ import annotations

import math
import random
from typing import Final

KEY_BYTES: Final = 16
VALUE_BYTES: Final = 100


def key(i: int) -> bytes:
    """The key of row ``i``.

    >>> key(42)
    b'0000000000000042'
    """
    return b"%016d" % i


class Values:
    """100-byte incompressible values: ``value(i)`` is a slice of one random buffer."""

    def __init__(self, seed: int, size: int = VALUE_BYTES, pool_bytes: int = 1 << 20) -> None:
        self.size = size
        self._pool = random.Random(seed).randbytes(pool_bytes + size)
        self._span = pool_bytes

    def value(self, i: int) -> bytes:
        # 7919 is prime, so consecutive rows start at scattered offsets.
        offset = (i * 7919) % self._span
        return self._pool[offset:offset + self.size]


def load_batches(rows: int, batch_rows: int, seed: int, values: Values) -> list[list[tuple[bytes, bytes]]]:
    """All rows in a seeded random order, cut into batches of ``batch_rows``."""
    order = list(range(rows))
    random.Random(seed).shuffle(order)
    return [
        [(key(i), values.value(i)) for i in order[start:start + batch_rows]]
        for start in range(0, rows, batch_rows)
    ]


def uniform_keys(rows: int, count: int, seed: int) -> list[bytes]:
    """``count`` keys drawn uniformly from the ``rows`` loaded ones."""
    rng = random.Random(seed)
    return [key(rng.randrange(rows)) for _ in range(count)]


class Zipfian:
    """YCSB's scrambled Zipfian chooser over ``[0, n)`` (Gray et al. 1994).

    Rank r is drawn with probability proportional to 1 / (r + 1) ** theta;
    ranks are then scattered over the key space by a bijection, so the hot
    keys are not also neighbours (which would flatter block caches).

    >>> chooser = Zipfian(1000, theta=0.99, seed=1)
    >>> draws = [chooser.next() for _ in range(10_000)]
    >>> all(0 <= d < 1000 for d in draws)
    True
    >>> max(draws.count(d) for d in set(draws)) > 10_000 // 1000 * 20   # a few keys are very hot
    True
    """

    def __init__(self, n: int, theta: float, seed: int) -> None:
        if n < 2 or not 0 < theta < 1:
            raise ValueError(f"need n >= 2 and 0 < theta < 1, got n={n}, theta={theta}")
        self.n = n
        self.theta = theta
        self._rng = random.Random(seed)
        zeta_n = math.fsum(1.0 / (i ** theta) for i in range(1, n + 1))
        zeta_2 = 1.0 + 1.0 / (2 ** theta)
        self._zeta_n = zeta_n
        self._alpha = 1.0 / (1.0 - theta)
        self._eta = (1.0 - (2.0 / n) ** (1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        self._half_pow_theta = 0.5 ** theta
        # Scatter ranks with i -> i * m mod n, a bijection when gcd(m, n) == 1.
        multiplier = 2654435761 % n or 1
        while math.gcd(multiplier, n) != 1:
            multiplier += 1
        self._multiplier = multiplier

    def next_rank(self) -> int:
        """The next draw before scrambling: 0 is the hottest rank."""
        u = self._rng.random()
        uz = u * self._zeta_n
        if uz < 1.0:
            return 0
        if uz < 1.0 + self._half_pow_theta:
            return 1
        return min(self.n - 1, int(self.n * (self._eta * u - self._eta + 1.0) ** self._alpha))

    def next(self) -> int:
        """The next draw: a row number in ``[0, n)``."""
        return (self.next_rank() * self._multiplier) % self.n


def zipfian_keys(rows: int, count: int, theta: float, seed: int) -> list[bytes]:
    """``count`` keys drawn from a scrambled Zipfian over the ``rows`` loaded ones."""
    chooser = Zipfian(rows, theta, seed)
    return [key(chooser.next()) for _ in range(count)]


def scan_ranges(rows: int, count: int, span: int, seed: int) -> list[tuple[bytes, bytes]]:
    """``count`` random ``[start, end)`` ranges each holding exactly ``span`` loaded rows."""
    if rows < span:
        raise ValueError(f"cannot scan {span} rows out of {rows}")
    rng = random.Random(seed)
    ranges = []
    for _ in range(count):
        first = rng.randrange(rows - span + 1)
        ranges.append((key(first), key(first + span)))
    return ranges


def unique_keys(prefix: bytes, count: int) -> list[bytes]:
    """``count`` fresh 16-byte keys for commit workloads (never loaded before).

    >>> unique_keys(b"w2", 2)
    [b'w200000000000000', b'w200000000000001']
    """
    width = KEY_BYTES - len(prefix)
    return [prefix + b"%0*d" % (width, i) for i in range(count)]
