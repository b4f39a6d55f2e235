"""The physical reference for W7: a loop of raw conditional PUTs.

A lakekv commit on S3 is one conditional PUT (``If-None-Match: *``) of a
root file, so one conditional PUT of a fresh object per "commit" is the floor
any store built on that primitive can reach with one writer. It goes through
lakekv's own S3 client (:func:`kvstore.objstore.open_store`, s3fs), so the
gap between lakekv and this line is the engine, not the HTTP stack.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kvstore.objstore import ObjectStore, open_store

from harness.engine import S3_PUT


class RawConditionalPut:
    """A :class:`~harness.engine.CommitTarget`: ``put`` = one conditional PUT.

    Args:
        base_url: ``s3://bucket`` of the server; each ``open`` uses a fresh prefix.
        options: ``open_store`` options (endpoint, credentials, region).
    """

    key = "raw-put-s3"
    label = "raw conditional PUT (S3)"
    family = "raw conditional PUT"
    durability = S3_PUT

    def __init__(self, base_url: str, options: dict[str, Any]) -> None:
        self.base_url = base_url
        self.options = options
        self._store: ObjectStore | None = None

    def settings(self) -> dict[str, Any]:
        return {
            "operation": "put_if_absent (If-None-Match: *) of a fresh object per commit",
            "client": "kvstore.objstore.open_store (s3fs), the client lakekv uses",
        }

    def open(self, path: Path) -> None:
        self._store = open_store(f"{self.base_url}/raw-{uuid.uuid4().hex[:12]}", **self.options)

    def put(self, key: bytes, value: bytes) -> None:
        if self._store is None:
            raise RuntimeError("RawConditionalPut: put() before open()")
        # Keys are unique per run, so a lost race would mean a harness bug.
        if not self._store.put_if_absent(f"commit/{key.hex()}", value):
            raise RuntimeError(f"conditional PUT of a fresh object {key!r} lost a race")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
