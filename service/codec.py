"""How keys, values and scan ranges travel over HTTP, and where client keys
live in the store.

* In JSON bodies, keys and values are standard base64 (RFC 4648 §4).
* In paths and query strings, keys are base64url without padding (§5), so
  any byte string fits in one path segment.
* Both are decoded strictly: only the one canonical text of each byte string
  is accepted (no characters of the other alphabet, no missing or extra
  padding, no set bits after the last byte). Otherwise ``a+b`` and ``a-b``,
  or ``YQ`` and ``YR``, would name one key.
* Client keys are stored under :data:`KV_PREFIX`. The server keeps its own
  records (idempotency, and the catalog in phase 2) in the same store under
  other prefixes, and no client key can reach them.
"""

from __future__ import annotations

import base64
import binascii
import json
import string
from collections.abc import Collection
from typing import Any, Callable, Final

from starlette.requests import Request

from kvclient import MAX_REMOTE_KEY_BYTES
from kvstore.batch import scan_bounds
from kvstore.options import MAX_KEY_BYTES
from kvstore.keyrange import prefix_bounds
from service.errors import ApiError

KV_PREFIX: Final = b"kv/"
_BASE64URL: Final = frozenset(string.ascii_letters + string.digits + "-_")
_KV_LO, _KV_HI = prefix_bounds(KV_PREFIX)
# The longest client key: keys travel in URL paths (see kvclient.transport).
MAX_CLIENT_KEY_BYTES: Final = MAX_REMOTE_KEY_BYTES
assert MAX_CLIENT_KEY_BYTES + len(KV_PREFIX) <= MAX_KEY_BYTES


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _canonical(text: str, data: bytes, encode: Callable[[bytes], bytes], padded: bool) -> bool:
    """Whether ``text`` is exactly the encoding of ``data`` it decoded to.

    Groups but the last decode 24 bits each with no choice, so only the
    length (padding) and the last group need comparing: cheap for a large value.
    """
    tail = data[len(data) - (len(data) % 3 or 3):]
    expected_tail = encode(tail).decode("ascii")
    whole = -(-len(data) // 3) * 4
    if not padded:
        expected_tail = expected_tail.rstrip("=")
        whole -= 4 - len(expected_tail) if tail else 0
    return len(text) == whole and text.endswith(expected_tail)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def b64decode(text: object, what: str) -> bytes:
    """Decode standard base64 from a JSON field, or raise ApiError 400 naming ``what``.

    >>> b64decode("YQ==", "value")
    b'a'
    >>> b64decode("YR==", "value")
    Traceback (most recent call last):
    ...
    service.errors.ApiError: value is not valid base64 (RFC 4648 §4): 'YR==' is not canonical, 'YQ==' is
    """
    if not isinstance(text, str):
        raise ApiError(400, "TypeError", f"{what} must be a base64 string, not {type(text).__name__}")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "ValueError", f"{what} is not valid base64 (RFC 4648 §4): {_shown(text)}") from None
    if not _canonical(text, data, base64.b64encode, padded=True):
        raise ApiError(
            400, "ValueError",
            f"{what} is not valid base64 (RFC 4648 §4): {_shown(text)} is not canonical, {_shown(b64encode(data))} is",
        )
    return data


def path_key_encode(key: bytes) -> str:
    """base64url without padding: the form of a key inside a URL.

    >>> path_key_encode(b"\\xfb\\xff"), path_key_decode("-_8", "key")
    ('-_8', b'\\xfb\\xff')
    """
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode("ascii")


def path_key_decode(text: str, what: str) -> bytes:
    """Inverse of :func:`path_key_encode`; ApiError 400 naming ``what`` if malformed.

    Strict: the standard alphabet's ``+`` and ``/``, padding, and set bits
    after the last byte are refused, so each key has exactly one URL form.

    >>> path_key_decode("a+b", "key")
    Traceback (most recent call last):
    ...
    service.errors.ApiError: key is not valid unpadded base64url (RFC 4648 §5): 'a+b' has the character '+' (base64url writes '-' and '_' for '+' and '/')
    """
    bad = next((c for c in text if c not in _BASE64URL), None)
    if bad is not None:
        hint = " (base64url writes '-' and '_' for '+' and '/')" if bad in "+/" else ""
        hint = " (no padding)" if bad == "=" else hint
        raise ApiError(
            400, "ValueError",
            f"{what} is not valid unpadded base64url (RFC 4648 §5): {_shown(text)} has the character {bad!r}{hint}",
        )
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ApiError(400, "ValueError", f"{what} is not valid unpadded base64url (RFC 4648 §5): {_shown(text)}") from None
    if not _canonical(text, data, base64.urlsafe_b64encode, padded=False):
        raise ApiError(
            400, "ValueError",
            f"{what} is not valid unpadded base64url (RFC 4648 §5): {_shown(text)} is not canonical, "
            f"{_shown(path_key_encode(data))} is",
        )
    return data


def store_key(key: bytes, what: str = "key") -> bytes:
    """The store key of a client key; ApiError 400 if empty or too long."""
    if not key:
        raise ApiError(400, "ValueError", f"{what} must not be empty")
    if len(key) > MAX_CLIENT_KEY_BYTES:
        raise ApiError(400, "ValueError", f"{what} is {len(key)} bytes; the limit is {MAX_CLIENT_KEY_BYTES}")
    return KV_PREFIX + key


def client_key(stored: bytes) -> bytes:
    return stored[len(KV_PREFIX):]


def client_keys_in(message: str) -> str:
    """An engine message with stored keys shown as the client's keys.

    >>> client_keys_in("write-write conflict on key b'kv/k'")
    "write-write conflict on key b'k'"
    """
    prefix = KV_PREFIX.decode("ascii")
    return message.replace(f"b'{prefix}", "b'").replace(f'b"{prefix}', 'b"')


def store_range(
    start: bytes | None, end: bytes | None, prefix: bytes | None, cursor: bytes | None, reverse: bool
) -> tuple[bytes, bytes | None]:
    """The store range ``[lo, hi)`` of a client scan, resumed after ``cursor``.

    ``cursor`` is the last key of the previous page: a forward scan resumes
    just after it, a reverse scan just before it.
    """
    lo, hi = scan_bounds(start, end, prefix)
    store_lo = _KV_LO if lo is None else KV_PREFIX + lo
    store_hi = _KV_HI if hi is None else KV_PREFIX + hi
    if cursor is not None:
        resume = KV_PREFIX + cursor
        if reverse:
            store_hi = resume if store_hi is None else min(store_hi, resume)
        else:
            store_lo = max(store_lo, resume + b"\x00")
    return store_lo, store_hi


async def read_json(request: Request, fields: Collection[str] | None = None) -> dict[str, Any]:
    """The request body as a JSON object; ApiError 400 otherwise.

    ``fields``: the fields the endpoint takes. Any other is refused (400
    naming it), never ignored: a typo such as ``"tll"`` for ``"ttl"`` would
    otherwise succeed and do something else (write a key that never
    expires). None: the caller checks the fields itself (nested objects,
    the Iceberg REST schemas).
    """
    body = await request.body()
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        raise ApiError(400, "ValueError", "request body is not valid JSON") from None
    except RecursionError:  # e.g. 100k nested "[": deeper than any request of ours
        raise ApiError(400, "ValueError", "request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "ValueError", "request body must be a JSON object")
    if fields is not None:
        check_fields(data, fields, "request body")
    return data


def check_fields(data: dict[str, Any], fields: Collection[str], what: str) -> None:
    """Refuse (ApiError 400, naming them) the keys of JSON object ``data`` that are not in ``fields``."""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields)) or "none"
        raise ApiError(400, "ValueError", f"{what} has unknown field(s) {unknown}; known: {known}")


def query_bool(request: Request, name: str, error_type: str = "ValueError") -> bool:
    text = request.query_params.get(name, "false").lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no", ""):
        return False
    raise ApiError(400, error_type, f"query parameter {name} must be true or false, got {text!r}")


def query_number(request: Request, name: str, kind: type, default: Any = None) -> Any:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return kind(text)
    except ValueError:
        raise ApiError(400, "ValueError", f"query parameter {name} must be a {kind.__name__}, got {text!r}") from None


def query_key(request: Request, name: str) -> bytes | None:
    text = request.query_params.get(name)
    return None if text is None else path_key_decode(text, name)


def ttl_value(raw: object) -> float | None:
    """A JSON/query ttl: None or a positive number of seconds (else ApiError 400)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ApiError(400, "TypeError", f"ttl must be a number of seconds or null, not {type(raw).__name__}")
    if not raw > 0:
        raise ApiError(400, "ValueError", f"ttl must be > 0 seconds, got {raw!r}")
    return float(raw)
