"""WriteBatch: an atomic set of puts and deletes, plus argument validation
shared by every write entry point."""

from __future__ import annotations

import json
import time
from typing import Any, Final, Iterator

from kvstore.format.rows import DELETE, PUT
from kvstore.options import MAX_KEY_BYTES, MAX_VALUE_BYTES
from kvstore.reader import prefix_bounds

# key -> (kind, value, expire_at_ms); the last operation on a key wins.
Mutation = tuple[int, "bytes | None", "int | None"]


def check_key(key: object, name: str = "key") -> bytes:
    """Return ``key`` if it is a valid user key, else raise TypeError/ValueError."""
    if type(key) is not bytes:
        if isinstance(key, (bytearray, memoryview)):
            key = bytes(key)
        else:
            raise TypeError(f"{name} must be bytes, not {type(key).__name__}")
    if not key:
        raise ValueError(f"{name} must not be empty")
    if len(key) > MAX_KEY_BYTES:
        raise ValueError(f"{name} is {len(key)} bytes; the limit is {MAX_KEY_BYTES}")
    return key  # type: ignore[return-value]


def check_value(value: object) -> bytes:
    if type(value) is not bytes:
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        else:
            raise TypeError(f"value must be bytes, not {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:  # type: ignore[arg-type]
        raise ValueError(f"value is {len(value)} bytes; the limit is {MAX_VALUE_BYTES}")  # type: ignore[arg-type]
    return value  # type: ignore[return-value]


def check_limit(limit: object) -> int | None:
    """Return ``limit`` if it is None or a non-negative int, else raise ValueError."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    return limit  # type: ignore[return-value]


# Longest accepted TTL: a century. The expiry is stored as int64 ms, and a
# value that is meant to outlive that should simply have no TTL.
MAX_TTL_S: Final = 100 * 366 * 86400


def expiry_from_ttl(ttl: float | None) -> int | None:
    """Absolute expiry (ms since epoch) for a TTL in seconds; None = never.

    >>> expiry_from_ttl(None) is None
    True
    >>> expiry_from_ttl(float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: ttl must be > 0 and at most 3162240000 seconds (100 years), got inf

    Raises:
        TypeError: ``ttl`` is not a number.
        ValueError: ``ttl`` is not positive, not finite, or over :data:`MAX_TTL_S`.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be a number of seconds or None, not {type(ttl).__name__}")
    if not 0 < ttl <= MAX_TTL_S:  # also false for NaN and infinities
        raise ValueError(f"ttl must be > 0 and at most {MAX_TTL_S} seconds (100 years), got {ttl!r}")
    return int(time.time() * 1000 + ttl * 1000)


# A commit summary is stored in the root file, which every reader of the
# chain loads: keep it small (the catalog records operation counts, not data).
MAX_SUMMARY_BYTES: Final = 64 * 1024


def check_summary(summary: object) -> dict[str, Any]:
    """Return a JSON-round-tripped copy of ``summary`` for a commit descriptor.

    The copy is what the root file will hold (tuples become lists), and later
    changes to the caller's dict do not reach the commit.

    >>> check_summary({"op": "append", "rows": 3})
    {'op': 'append', 'rows': 3}

    Raises:
        TypeError: ``summary`` is not a dict, or holds something JSON cannot encode.
        ValueError: it holds NaN/infinity, a circular reference, or encodes
            to more than :data:`MAX_SUMMARY_BYTES`.
    """
    if not isinstance(summary, dict):
        raise TypeError(f"summary must be a dict, not {type(summary).__name__}")
    try:
        encoded = json.dumps(summary, allow_nan=False, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError(f"summary must be JSON-serialisable: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"summary must be JSON-serialisable: {exc}") from None
    size = len(encoded.encode())
    if size > MAX_SUMMARY_BYTES:
        raise ValueError(f"summary encodes to {size} bytes; the limit is {MAX_SUMMARY_BYTES}")
    decoded: dict[str, Any] = json.loads(encoded)
    return decoded


def scan_bounds(start: bytes | None, end: bytes | None, prefix: bytes | None) -> tuple[bytes | None, bytes | None]:
    """Combine ``start``/``end``/``prefix`` into one validated ``[lo, hi)`` range."""
    lo = None if start is None else check_key(start, "start")
    hi = None if end is None else check_key(end, "end")
    if prefix is not None:
        p_lo, p_hi = prefix_bounds(check_key(prefix, "prefix"))
        lo = p_lo if lo is None else max(lo, p_lo)
        hi = p_hi if hi is None else (hi if p_hi is None else min(hi, p_hi))
    return lo, hi



def put_mutation(value: object, ttl: float | None = None) -> Mutation:
    """The mutation that sets a key to ``value`` (validated), expiring after ``ttl`` seconds.

    >>> put_mutation(b"v")
    (1, b'v', None)
    """
    return (PUT, check_value(value), expiry_from_ttl(ttl))


# The mutation that deletes a key.
DELETE_MUTATION: Final[Mutation] = (DELETE, None, None)


class WriteBatch:
    """Puts and deletes applied atomically by ``Store.write``; last write per key wins.

    Not thread-safe: build a batch in one thread.
    """

    __slots__ = ("_mutations",)

    def __init__(self) -> None:
        self._mutations: dict[bytes, Mutation] = {}

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> WriteBatch:
        """Set ``key`` to ``value`` (optionally expiring after ``ttl`` seconds)."""
        # Fast path for the bulk-load case (bytes, no TTL): the same checks as
        # check_key/put_mutation without their calls, a third of a put's cost.
        if type(key) is bytes and type(value) is bytes and ttl is None and 0 < len(key) <= MAX_KEY_BYTES \
                and len(value) <= MAX_VALUE_BYTES:
            self._mutations[key] = (PUT, value, None)
        else:
            self._mutations[check_key(key)] = put_mutation(value, ttl)
        return self

    def delete(self, key: bytes) -> WriteBatch:
        """Delete ``key`` (a no-op on storage if it does not exist)."""
        self._mutations[check_key(key)] = DELETE_MUTATION
        return self

    def __len__(self) -> int:
        return len(self._mutations)

    def __iter__(self) -> Iterator[tuple[bytes, Mutation]]:
        return iter(self._mutations.items())

    @property
    def mutations(self) -> dict[bytes, Mutation]:
        return self._mutations

    def __repr__(self) -> str:
        return f"WriteBatch({len(self._mutations)} keys)"
