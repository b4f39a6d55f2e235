"""Where durable transactions and locks live in the lakekv key space.

Every key starts with ``sys/txn/`` (DESIGN.md §7), so the catalog's own prefix
scans never see them and one prefix holds the whole transaction system::

    sys/txn/config                              store-wide limits (JSON, see records.DurableConfig)
    sys/txn/tx/<txid>                           one transaction record (JSON, records.TxnRecord)
    sys/txn/child/<parent txid>/<child txid>    "" : parent -> open child index
    sys/txn/lock/<node>\\x00<seq>                one lock (JSON, records.LockRecord); <seq> orders
                                                the node's locks (the FIFO queue), fixed width hex
    sys/txn/held/<txid>/<node>\\x00<seq>          "" : transaction -> its locks index
    sys/txn/op/<txid>/<seq>                     one staged catalog operation (JSON), in order

Node names, child keys and attribute keys are validated before they reach a key:
non-empty, at most ``MAX_NAME_CHARS`` characters, no control characters and no
``/``. The ``\\x00`` separator therefore cannot occur inside a name, and a scan of
``lock/<node>\\x00`` returns exactly the locks of ``node``, never of ``node.x``.
Transaction ids are 32 lowercase hex digits (uuid4), so they cannot contain ``/``.

>>> lock_key("sales.eu.orders", 5)
b'sys/txn/lock/sales.eu.orders\\x000000000000000005'
>>> parse_lock_key(lock_key("a.b", 17))
('a.b', 17)
"""

from __future__ import annotations

import re
from typing import Final

PREFIX: Final = b"sys/txn/"
CONFIG_KEY: Final = PREFIX + b"config"
TXN_PREFIX: Final = PREFIX + b"tx/"
CHILD_PREFIX: Final = PREFIX + b"child/"
LOCK_PREFIX: Final = PREFIX + b"lock/"
HELD_PREFIX: Final = PREFIX + b"held/"
OP_PREFIX: Final = PREFIX + b"op/"

# Long enough for deeply nested dotted names, short enough that a lock key stays
# a small fraction of the engine's key limit.
MAX_NAME_CHARS: Final = 1024
SEQ_DIGITS: Final = 16  # fixed width hex keeps byte order == numeric order

_TXID = re.compile(r"[0-9a-f]{32}")
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f/]")


def check_name(value: object, what: str) -> str:
    """Validate a node name, child key or attribute key; return it.

    Raises:
        TypeError: not a str.
        ValueError: empty, too long, or containing a control character or ``/``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    bad = _FORBIDDEN.search(value)
    if bad:
        raise ValueError(f"{what} {value!r} contains the forbidden character {bad.group()!r}")
    return value


def check_txid(value: object) -> str:
    """Validate a transaction id (32 lowercase hex digits); return it.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: it is not 32 lowercase hex digits.
    """
    if not isinstance(value, str):
        raise TypeError(f"transaction id must be a str, got {type(value).__name__}")
    if not _TXID.fullmatch(value):
        raise ValueError(f"transaction id must be 32 lowercase hex digits, got {value!r}")
    return value


def txn_key(txid: str) -> bytes:
    """The key of transaction ``txid``'s record."""
    return TXN_PREFIX + txid.encode()


def child_prefix(parent: str) -> bytes:
    """Prefix of the keys listing the children of transaction ``parent``."""
    return CHILD_PREFIX + parent.encode() + b"/"


def child_key(parent: str, child: str) -> bytes:
    """The key recording ``child`` as a child of transaction ``parent``."""
    return child_prefix(parent) + child.encode()


def node_lock_prefix(node: str) -> bytes:
    """Prefix of every lock on ``node``, in queue order."""
    return LOCK_PREFIX + node.encode() + b"\x00"


def _seq(seq: int) -> bytes:
    return b"%0*x" % (SEQ_DIGITS, seq)


def lock_key(node: str, seq: int) -> bytes:
    """The key of the lock with sequence number ``seq`` on ``node``."""
    return node_lock_prefix(node) + _seq(seq)


def parse_lock_key(key: bytes) -> tuple[str, int]:
    """``(node, seq)`` of a ``lock/`` key (or of the tail of a ``held/`` key)."""
    body = key[len(LOCK_PREFIX) :] if key.startswith(LOCK_PREFIX) else key
    node, _, seq = body.rpartition(b"\x00")
    return node.decode(), int(seq, 16)


def held_prefix(txid: str) -> bytes:
    """Prefix of the keys listing the locks transaction ``txid`` holds."""
    return HELD_PREFIX + txid.encode() + b"/"


def held_key(txid: str, node: str, seq: int) -> bytes:
    """The key recording that transaction ``txid`` holds lock ``seq`` on ``node``."""
    return held_prefix(txid) + node.encode() + b"\x00" + _seq(seq)


def op_prefix(txid: str) -> bytes:
    """Prefix of transaction ``txid``'s staged operation records, in order."""
    return OP_PREFIX + txid.encode() + b"/"


def op_key(txid: str, seq: int) -> bytes:
    """The key of transaction ``txid``'s staged operation number ``seq``."""
    return op_prefix(txid) + _seq(seq)
