"""A small real file system to fill up: a tmpfs mounted for one test (issue 35).

Mounting needs root (CAP_SYS_ADMIN). Where it is not permitted the tests that
need it skip, naming the reason; everywhere else they run on a real, full
file system, which no fault injection imitates faithfully (ENOSPC at the
temp file, at the link, for the directory entry ...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, size_mb: int = 20) -> Iterator[Path]:
    """Mount a ``size_mb`` MiB tmpfs at ``where`` (created), unmount it after."""
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) on this machine: cannot make a small file system to fill")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()}): run as root to test a full disk")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer could still use on ``path``'s file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def age_everything(root: Path, seconds: float) -> None:
    """Stamp every file and directory under ``root`` ``seconds`` earlier.

    The storage clock moving on by ``seconds`` as far as every existing object
    is concerned, without a test waiting for it; writing nothing, so it works
    on a full disk.
    """
    for directory, dirs, files in os.walk(root):
        for name in files + dirs:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds), follow_symlinks=False)


_KILLED_MID_WRITE = """
import os, signal, sys
from kvstore.objstore import LocalStore
store = LocalStore(sys.argv[1])
store.compiled_publish = False  # the Python path: its fsync is the kill point
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed after writing, before the link
store.put_if_absent("sst/" + "e" * 32 + ".sst", b"x" * int(sys.argv[2]))
"""


def writer_killed_mid_write(root: Path, size: int) -> None:
    """A second process writes a ``size``-byte object into the local store at
    ``root`` and is killed (SIGKILL) after writing its temp file, before
    publishing it: the temp file stays in ``.tmp/``, its writer dead."""
    done = subprocess.run([sys.executable, "-c", _KILLED_MID_WRITE, str(root), str(size)], env=dict(os.environ))
    assert done.returncode == -9, done
