"""WriteBatch: an atomic set of puts and deletes, plus argument validation
shared by every write entry point."""

from __future__ import annotations

import json
import time
import warnings
from typing import Any, Callable, Final, Iterable, Iterator

from kvstore.format.rows import DELETE, PUT, Row
from kvstore.options import MAX_KEY_BYTES, MAX_VALUE_BYTES
from kvstore.keyrange import prefix_bounds

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
    return key


def check_value(value: object) -> bytes:
    if type(value) is not bytes:
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        else:
            raise TypeError(f"value must be bytes, not {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:
        raise ValueError(f"value is {len(value)} bytes; the limit is {MAX_VALUE_BYTES}")
    return value


def check_limit(limit: object) -> int | None:
    """Return ``limit`` if it is None or a non-negative int, else raise ValueError."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    return limit


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



# A lease id: an int64 > 0, as etcd's (``Lease.id``); leases granted before ids were int64s have
# 32 lowercase hex characters, still accepted while they live.
LeaseId = int | str
MAX_LEASE_ID = (1 << 63) - 1


def check_lease_id(lease: object) -> LeaseId:
    """``lease`` if it is a lease id (``Lease.id``: an int64 > 0, or an older lease's 32 lowercase hex characters).

    Raises:
        TypeError: it is not.
    """
    if isinstance(lease, int) and not isinstance(lease, bool) and 0 < lease <= MAX_LEASE_ID:
        return lease
    if isinstance(lease, str) and len(lease) == 32 and all(c in "0123456789abcdef" for c in lease):
        return lease
    raise TypeError(f"a lease id is an int64 > 0 (Lease.id), not {lease!r}")


def put_mutation(value: object, ttl: float | None = None) -> Mutation:
    """The mutation that sets a key to ``value`` (validated), expiring after ``ttl`` seconds.

    >>> put_mutation(b"v")
    (1, b'v', None)
    """
    return (PUT, check_value(value), expiry_from_ttl(ttl))


# The mutation that deletes a key.
DELETE_MUTATION: Final[Mutation] = (DELETE, None, None)


def put_pairs_py(mutations: dict[bytes, Mutation], pairs: Iterator[Any], put: int, max_key: int, max_value: int) -> Any:
    """Store the plain ``(key, value)`` pairs of ``pairs`` as ``put`` (PUT) mutations.

    Stops at the first item that is not a 2-tuple of ``bytes`` with
    ``0 < len(key) <= max_key`` and ``len(value) <= max_value`` and returns it
    (consumed from ``pairs``) for the caller to validate; None at the end.
    The pure-Python twin of ``cython_ext._writebatch.put_pairs``.
    """
    for item in pairs:
        if type(item) is not tuple or len(item) != 2:
            return item
        key, value = item
        if type(key) is not bytes or type(value) is not bytes or not 0 < len(key) <= max_key or len(value) > max_value:
            return item
        mutations[key] = (put, value, None)
    return None


def mutation_rows_py(groups: list[tuple[int, dict[bytes, Mutation]]]) -> list[Row]:
    """The rows of a commit group in storage order: key ascending, then seq descending.

    ``groups``: ``(seq, mutations)`` per transaction, newest (highest seq)
    first; the sort is stable, so one key's rows stay newest first. The
    pure-Python twin of ``cython_ext._writebatch.mutation_rows``.

    >>> mutation_rows_py([(2, {b"b": (1, b"x", None)}), (1, {b"b": (2, None, None), b"a": (1, b"y", None)})])
    [(b'a', 1, 1, b'y', None), (b'b', 2, 1, b'x', None), (b'b', 1, 2, None, None)]

    Raises:
        TypeError / ValueError: a mutation is not a ``(kind, value, expire)`` triple.
    """
    rows: list[Row] = []
    for seq, mutations in groups:
        rows += [(key, seq, kind, value, expire) for key, (kind, value, expire) in mutations.items()]
    rows.sort(key=_row_key)
    return rows


def _row_key(row: Row) -> bytes:
    return row[0]


def mutation_rows(groups: list[tuple[int, dict[bytes, Mutation]]]) -> list[Row]:
    """:func:`mutation_rows_py`'s result (the committer's rows), built in C when every row is plain."""
    rows = _mutation_rows_compiled(groups) if _mutation_rows_compiled is not None else None
    return rows if rows is not None else mutation_rows_py(groups)


_put_pairs: Callable[[dict[bytes, Mutation], Iterator[Any], int, int, int], Any]
_mutation_rows_compiled: Callable[[list[tuple[int, dict[bytes, Mutation]]]], list[Row] | None] | None
try:
    from cython_ext._writebatch import mutation_rows as _mutation_rows_compiled  # type: ignore[no-redef]
    from cython_ext._writebatch import put_pairs as _put_pairs  # type: ignore[no-redef]
except ImportError as exc:  # a broken build
    warnings.warn(f"lakekv: compiled put_many unavailable ({exc}); using the pure-Python twin", stacklevel=2)
    _put_pairs = put_pairs_py
    _mutation_rows_compiled = None


class WriteBatch:
    """Puts and deletes applied atomically by ``Store.write``; last write per key wins.

    Not thread-safe: build a batch in one thread.
    """

    __slots__ = ("_mutations", "_conditions", "_leases")

    def __init__(self) -> None:
        self._mutations: dict[bytes, Mutation] = {}
        # key -> the revision (seq) it must be at when the batch commits; None: it must have no value.
        self._conditions: dict[bytes, int | None] = {}
        # key -> (lease id, the mutation put with it): the key is leased while that mutation is still
        # its one (a later put or delete replaces it), so no other method has to know about leases.
        self._leases: dict[bytes, tuple[LeaseId, Mutation]] = {}

    def put(
        self,
        key: bytes,
        value: bytes,
        ttl: float | None = None,
        *,
        if_seq: int | None = None,
        if_absent: bool = False,
        lease: LeaseId | None = None,
    ) -> WriteBatch:
        """Set ``key`` to ``value`` (optionally expiring after ``ttl`` seconds).

        ``if_seq=N`` (the key's revision, see ``Store.get_with_revision``) or
        ``if_absent=True`` makes the whole batch a compare-and-set: ``Store.write``
        applies it only if the compare holds when it commits, else raises
        ``PreconditionFailedError`` and writes nothing. ``lease`` (a lease id,
        ``Store.grant_lease``) makes the key live as long as the lease (it
        excludes ``ttl``).
        """
        # Fast path for the bulk-load case (bytes, no TTL): the same checks as
        # check_key/put_mutation without their calls, a third of a put's cost.
        if type(key) is bytes and type(value) is bytes and ttl is None and 0 < len(key) <= MAX_KEY_BYTES \
                and len(value) <= MAX_VALUE_BYTES and if_seq is None and not if_absent and lease is None:
            self._mutations[key] = (PUT, value, None)
            return self
        mutation = put_mutation(value, ttl)  # the value first, as the fast path's assignment does
        key = check_key(key)
        if lease is not None:
            if ttl is not None:
                raise ValueError("ttl and lease exclude each other: a leased key expires with its lease")
            check_lease_id(lease)
        self._require(key, if_seq, if_absent)
        self._mutations[key] = mutation
        if lease is not None:
            self._leases[key] = (lease, mutation)
        return self

    def _require(self, key: bytes, if_seq: object, if_absent: object) -> None:
        """Record the compare of a conditional put or delete (checked before anything changes)."""
        if not isinstance(if_absent, bool):
            raise TypeError(f"if_absent must be a bool, not {type(if_absent).__name__}")
        if if_seq is not None and (isinstance(if_seq, bool) or not isinstance(if_seq, int) or if_seq < 1):
            raise TypeError(f"if_seq must be a revision (an int >= 1), not {if_seq!r}")
        if if_seq is not None and if_absent:
            raise ValueError("if_seq and if_absent exclude each other")
        if if_seq is None and not if_absent:
            return
        expected = None if if_absent else if_seq
        if key in self._conditions and self._conditions[key] != expected:
            raise ValueError(f"key {key!r:.60} already has another condition in this batch")
        self._conditions[key] = expected

    def put_many(self, pairs: Iterable[tuple[bytes, bytes]]) -> WriteBatch:
        """Set each key to its value, for the ``(key, value)`` pairs of ``pairs`` in order.

        The same as :meth:`put` per pair (a later pair of a key wins; no TTL)
        in one call, the bulk-load form: plain ``bytes`` pairs are stored in
        C (compiled ``cython_ext._writebatch``), about twice as fast as a
        loop of ``put`` calls (0.70 -> 0.33 ms per 1000 pairs).

        Raises:
            TypeError: ``pairs`` is not iterable, or an item is not a pair.
            TypeError / ValueError: a bad key or value (as :meth:`put`); the
                pairs before it stay in the batch.
        """
        try:
            items = iter(pairs)
        except TypeError:
            raise TypeError(f"put_many takes an iterable of (key, value) pairs, not {type(pairs).__name__}") from None
        while (item := _put_pairs(self._mutations, items, PUT, MAX_KEY_BYTES, MAX_VALUE_BYTES)) is not None:
            try:
                key, value = item
            except (TypeError, ValueError):
                raise TypeError(f"put_many takes (key, value) pairs, got {item!r:.80}") from None
            self.put(key, value)
        return self

    def delete(self, key: bytes, *, if_seq: int | None = None) -> WriteBatch:
        """Delete ``key`` (a no-op on storage if it does not exist); ``if_seq`` as for :meth:`put`."""
        key = check_key(key)
        self._require(key, if_seq, False)
        self._mutations[key] = DELETE_MUTATION
        return self

    def __len__(self) -> int:
        return len(self._mutations)

    def __iter__(self) -> Iterator[tuple[bytes, Mutation]]:
        return iter(self._mutations.items())

    @property
    def mutations(self) -> dict[bytes, Mutation]:
        return self._mutations

    @property
    def leases(self) -> dict[bytes, LeaseId]:
        """The keys put with a lease and not written again since: key -> lease id."""
        return {key: lease for key, (lease, mutation) in self._leases.items() if self._mutations.get(key) is mutation}

    @property
    def conditions(self) -> dict[bytes, int | None]:
        """The compares of a compare-and-set batch: key -> required revision (None: absent)."""
        return self._conditions

    def __repr__(self) -> str:
        return f"WriteBatch({len(self._mutations)} keys)"
