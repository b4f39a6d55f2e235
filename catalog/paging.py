"""Pages of a namespace's listing: at most ``page_size`` names, and a token that resumes after them.

``lake.list_tables(ns)`` returns every table of ``ns``; a namespace of
100,000 tables is better read a page at a time::

    token = None
    while True:
        page = lake.list_tables("ns", page_size=1000, page_token=token)
        ...                                   # up to 1,000 names, sorted
        token = page.next_page_token
        if token is None:
            break

A page is a :class:`NamePage`: a plain ``list`` of names that also carries
``next_page_token`` (None on the last page, and always None without
``page_size``). The token is opaque to callers; inside it names the listing
(kind and namespace) and the last name returned, not an offset, so:

* a page reads only the keys from where the last one stopped (its cost does
  not grow with the pages before it, nor with the rest of the catalog);
* tables created or dropped between pages never make another table appear
  twice or be skipped: each name is returned once, in order, if it existed
  for the whole listing (one created behind the cursor is simply not seen).

A token that does not decode, or that another listing (another namespace, or
views instead of tables) returned, is a ``ValueError``; so is a
``page_size`` below 1.
"""

from __future__ import annotations

import base64
import binascii
import json

from catalog import names
from catalog.names import Namespace


class NamePage(list[str]):
    """One page of a listing: the names (a ``list``, shown as one), and where the next page starts.

    ``next_page_token`` is None when no name follows this page.
    """

    def __init__(self, items: list[str], next_page_token: str | None = None) -> None:
        super().__init__(items)
        self.next_page_token = next_page_token


def check_page_size(page_size: int | None) -> int | None:
    """``page_size`` (None: no limit).

    Raises:
        ValueError: it is below 1.
    """
    if page_size is not None and page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    return page_size


def token_after(kind: str, ns: Namespace, last: str) -> str:
    """The token of the page that follows ``last`` in the listing of ``kind`` entries of ``ns``."""
    raw = json.dumps([kind, list(ns), last], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def resume_after(token: str, kind: str, ns: Namespace) -> str | None:
    """The last name the page before ``token`` returned (None for ``""``: the first page).

    Raises:
        ValueError: ``token`` is not one a listing of ``kind`` entries of ``ns`` returned.
    """
    if token == "":
        return None
    shown = token if len(token) <= 40 else token[:37] + "..."
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(raw.decode())
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError(f"page_token {shown!r} is not a page token this catalog returned") from None
    if (
        not isinstance(decoded, list) or len(decoded) != 3 or not isinstance(decoded[0], str)
        or not isinstance(decoded[1], list) or not isinstance(decoded[2], str)
    ):
        raise ValueError(f"page_token {shown!r} is not a page token this catalog returned")
    token_kind, token_ns, last = decoded[0], decoded[1], str(decoded[2])
    if token_kind != kind or tuple(token_ns) != ns:
        raise ValueError(
            f"page_token {shown!r} continues a listing of the {token_kind}s of namespace "
            f"{'.'.join(str(p) for p in token_ns)!r}, not of the {kind}s of {names.join(ns)!r}"
        )
    names.parse([last], "page_token's name")  # a name a key can hold (no separator, no control character)
    return last
