"""Store URL schemes that other packages open, found through entry points.

:func:`kvstore.open` opens ``file://``, ``memory://``, ``s3://`` and plain
paths itself (:func:`~kvstore.objstore.open_store`). A URL with any other
scheme goes to the opener a distribution registers for that scheme in the
entry-point group ``lakekv.stores``, so the engine reaches a layer above it
without importing it. lakekv's own HTTP client registers ``http`` and
``https`` (pyproject.toml)::

    [project.entry-points."lakekv.stores"]
    http = "kvclient.remote:open_remote"

An opener is a :class:`kvstore.api.StoreOpener`. Entry points are read from
the installed distributions' metadata once per process, on the first URL
that needs them; a registered scheme that kvstore also opens itself is
ignored (the built-in backend wins).
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points
from typing import Final

from kvstore.api import StoreOpener

ENTRY_POINT_GROUP: Final = "lakekv.stores"
# The schemes kvstore.objstore.open_store opens: they never reach the registry.
BUILT_IN_SCHEMES: Final = frozenset({"file", "memory", "s3"})
# What to install for a scheme this project's own packages register, should
# their entry points be missing (a checkout used without being installed).
_INSTALL_HINTS: Final = {
    "http": "lakekv's HTTP client (the kvclient package of the lakekv distribution)",
    "https": "lakekv's HTTP client (the kvclient package of the lakekv distribution)",
}


def registered_scheme(url: str) -> str | None:
    """The scheme of ``url`` if a registered opener must open it, else None.

    None for a path without ``scheme://`` and for the built-in schemes.

    >>> registered_scheme("HTTP://127.0.0.1:8181"), registered_scheme("s3://b/p"), registered_scheme("./dir")
    ('http', None, None)
    """
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        return None
    scheme = scheme.lower()
    return None if scheme in BUILT_IN_SCHEMES else scheme


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    return {entry.name.lower(): entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def registered_schemes() -> list[str]:
    """The schemes with an installed opener, sorted."""
    return sorted(_entry_points())


def opener_for(scheme: str) -> StoreOpener:
    """The opener registered for ``scheme`` (loaded: its module is imported now).

    Raises:
        ValueError: no installed distribution registers ``scheme``; the
            message names the scheme, what to install, and the registered ones.
        ImportError: the registered opener's module failed to import.
    """
    entry = _entry_points().get(scheme.lower())
    if entry is None:
        hint = _INSTALL_HINTS.get(scheme.lower(), f"a package that registers the {scheme!r} scheme")
        registered = ", ".join(f"{name}://" for name in registered_schemes()) or "none"
        raise ValueError(
            f"no store opener is installed for URL scheme {scheme!r}: install {hint}, which registers "
            f"it in the entry-point group {ENTRY_POINT_GROUP!r} (in a lakekv checkout: pip install -e .). "
            f"Built in: file://, memory://, s3:// and paths; registered: {registered}"
        )
    opener: StoreOpener = entry.load()
    if not callable(opener):
        raise TypeError(f"entry point {entry.name} = {entry.value!r} of {ENTRY_POINT_GROUP!r} is not callable")
    return opener


__all__ = ["BUILT_IN_SCHEMES", "ENTRY_POINT_GROUP", "opener_for", "registered_scheme", "registered_schemes"]
