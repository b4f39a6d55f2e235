"""The physical reference for W2: a new-file commit on this filesystem.

A lakekv commit on a local directory is a conditional create of a new root
file: write it under a temporary name, fsync it, ``link(2)`` it to its final
name (which fails if the name is taken: the atomic check), fsync the directory
so the new name is durable, and drop the temporary name. This target does
exactly those system calls and nothing else, so the gap between lakekv's W2
p50 and this one's is the engine, not the filesystem.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from harness.engine import FSYNC

# A single-key lakekv root file is ~2 KB (Arrow IPC schema + one-row delta +
# metadata); either way the file fits one 4 KiB filesystem block.
FILE_BYTES: Final = 2048


class NewFileCommitFloor:
    """A :class:`~harness.engine.CommitTarget`: ``put`` = temp file + fsync + link + directory fsync."""

    key = "fs-floor"
    label = "new-file commit floor"
    family = "floor"
    durability = FSYNC

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._count = 0

    def settings(self) -> dict[str, Any]:
        return {
            "operation": "write a temp file, fsync it, link it to a fresh name, fsync the directory, unlink the temp",
            "file_bytes": FILE_BYTES,
        }

    def open(self, path: Path) -> None:
        self._dir = path / "commits"
        (path / "tmp").mkdir()
        self._dir.mkdir()

    def put(self, key: bytes, value: bytes) -> None:
        if self._dir is None:
            raise RuntimeError("NewFileCommitFloor: put() before open()")
        self._count += 1
        data = (key + value).ljust(FILE_BYTES, b"\0")
        temp = self._dir.parent / "tmp" / f"{self._count}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temp, self._dir / key.hex())
        dir_fd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        os.unlink(temp)

    def close(self) -> None:
        self._dir = None
