"""Creating a store and checking what a location holds before using it.

A store is its identity file (``_lakekv_store``: JSON with the store format,
a store id and the creation time) plus the version chain starting at the
genesis root, version 0. Creation writes both with put-if-absent, so any
number of processes may create the same store at once: one wins, the others
find it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

from kvstore.chain import VersionChain, encode_for_publish
from kvstore.errors import StoreError
from kvstore.format.names import IDENTITY_PATH, STORE_FORMAT, SUPPORTED_STORE_FORMATS, is_engine_name
from kvstore.format.root import RootFile
from kvstore.objstore.base import ObjectStore

log = logging.getLogger(__name__)


def create_store(objects: ObjectStore, chain: VersionChain, writer_id: str) -> int:
    """Create the store at ``objects`` (or join a concurrent creator); return version 0.

    Raises:
        StoreError: ``objects`` already holds objects that are not a store's
            (a store is only created where nothing else is), or a store of an
            unsupported format.
    """
    # Never turn someone's directory (or bucket prefix) into a store: GC
    # and export would then treat it as ours. Engine names are fine: a
    # concurrent creator may be half-way through.
    foreign = next((meta.path for meta in objects.list("") if not is_engine_name(meta.path)), None)
    if foreign is not None:
        raise StoreError(
            f"{objects.url} is not empty and holds no lakekv store (found {foreign!r}); "
            "refusing to create a store there: use an empty directory or prefix"
        )
    created_ms = int(time.time() * 1000)
    identity = {"format": STORE_FORMAT, "store_id": uuid.uuid4().hex, "created_ms": created_ms}
    objects.put_if_absent(IDENTITY_PATH, json.dumps(identity).encode())
    check_identity(objects)
    genesis = RootFile(
        version=0, parent=None, first_seq=1, last_seq=0, writer_id=writer_id,
        writer_clock_ms=created_ms, commit_id=uuid.uuid4().hex, tree=None,
        flushed_upto=0, delta=None, rows=(),
    )
    chain.publish(encode_for_publish(genesis), 0)  # a concurrent creator may win: fine
    return 0


def check_identity(objects: ObjectStore) -> None:
    """Check the identity file; upgrade a format-1 or -2 store to format 3.

    Raises:
        StoreError: no identity (root files without one are not a store),
            unreadable JSON, or an unsupported format.
    """
    try:
        identity = json.loads(objects.get(IDENTITY_PATH))
    except FileNotFoundError:
        raise StoreError(f"{objects.url} has root files but no {IDENTITY_PATH}: not a lakekv store") from None
    except ValueError as exc:
        raise StoreError(f"{objects.url}/{IDENTITY_PATH} is not valid JSON") from exc
    if not isinstance(identity, dict) or identity.get("format") not in SUPPORTED_STORE_FORMATS:
        found = identity.get("format") if isinstance(identity, dict) else identity
        raise StoreError(f"{objects.url}: unsupported store format {found!r}")
    if identity["format"] != STORE_FORMAT:
        # This version writes root format 3: mark the store so that older
        # versions refuse it cleanly (see names.STORE_FORMAT).
        log.info("%s: upgrading store format %s -> %s", objects.url, identity["format"], STORE_FORMAT)
        objects.put(IDENTITY_PATH, json.dumps(dict(identity, format=STORE_FORMAT)).encode())
