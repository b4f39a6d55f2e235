"""Key ranges: the half-open ``[start, end)`` a key prefix covers, and the
fold of ``start``/``end``/``prefix`` scan arguments into one range.

Keys compare as bytes. The keys starting with ``prefix`` are exactly
``[prefix, successor)``, where the successor strips trailing ``0xff`` bytes
and increments the last byte left; a prefix made only of ``0xff`` bytes has
no upper bound. The compiled merge (``cython_ext._merge``) computes the same
successor in C.
"""

from __future__ import annotations

__all__ = ["prefix_bounds", "merge_bounds"]


def prefix_bounds(prefix: bytes) -> tuple[bytes, bytes | None]:
    """``[start, end)`` covering exactly the keys that start with ``prefix``.

    >>> prefix_bounds(b"ab")
    (b'ab', b'ac')
    >>> prefix_bounds(b"a\\xff")
    (b'a\\xff', b'b')
    >>> prefix_bounds(b"\\xff\\xff")
    (b'\\xff\\xff', None)
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return prefix, None
    return prefix, stripped[:-1] + bytes([stripped[-1] + 1])


def merge_bounds(start: bytes | None, end: bytes | None, prefix: bytes | None) -> tuple[bytes | None, bytes | None]:
    """Fold ``start``, ``end`` and ``prefix`` into one half-open range ``[lo, hi)``.

    Args:
        start: Inclusive lower bound, or None.
        end: Exclusive upper bound, or None.
        prefix: Required key prefix, or None (an empty prefix is no constraint).

    Returns:
        ``(lo, hi)``; None means unbounded on that side.

    >>> merge_bounds(b"a", None, b"ab\\xff")
    (b'ab\\xff', b'ac')
    >>> merge_bounds(None, b"b", b"\\xff")
    (b'\\xff', b'b')
    """
    lo, hi = start, end
    if prefix:
        p_lo, successor = prefix_bounds(prefix)
        lo = p_lo if lo is None else max(lo, p_lo)
        if successor is not None:
            hi = successor if hi is None else min(hi, successor)
    return lo, hi
