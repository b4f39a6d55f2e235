"""The etcd release whose API lakekv serves: its protos, messages and behaviour are etcd 3.5.1's.

Clients gate features on it (``Maintenance.Status``'s ``version``, the HTTP
``/version`` that etcd3gw reads to pick ``/v3/`` over ``/v3beta/``).
"""

from __future__ import annotations

from typing import Final

ETCD_API_VERSION: Final = "3.5.1"
# etcd's /version also names the cluster version: the minor release every member speaks.
ETCD_CLUSTER_VERSION: Final = "3.5.0"
