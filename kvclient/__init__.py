"""lakekv's HTTP client: the engine's API on a ``lakekv serve`` server.

A layer above the engine: it uses the public names of :mod:`kvstore` only,
and :mod:`kvstore` never imports it. ``kvstore.open("http(s)://...")``
reaches it through the ``lakekv.stores`` entry points this distribution
declares (:mod:`kvstore.registry`).

* :mod:`kvclient.remote`: :class:`RemoteStore`, its transactions and leases;
* :mod:`kvclient.watch`: :class:`RemoteWatch`, a watch streamed by the server;
* :mod:`kvclient.transport`: requests, transport retries, error decoding, and
  the key bound of the HTTP API (:data:`MAX_REMOTE_KEY_BYTES`, which the
  server enforces too).
"""

from kvclient.remote import RemoteLease, RemoteStore, RemoteTransaction, open_remote
from kvclient.transport import MAX_REMOTE_KEY_BYTES
from kvclient.watch import RemoteWatch

__all__ = [
    "MAX_REMOTE_KEY_BYTES",
    "RemoteLease",
    "RemoteStore",
    "RemoteTransaction",
    "RemoteWatch",
    "open_remote",
]
