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


_WRITER = """
import os, signal, sys
from kvstore.objstore import LocalStore
root, size, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = LocalStore(root)
store.compiled_publish = False  # the Python path: its fsync, after the temp file is written, is the stop point


fsync = os.fsync


def stop(fd):
    os.fsync = fsync  # the first fsync only: the temp file's
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)  # killed after writing, before the link
    print("written", flush=True)  # stalled after writing, before the link, until told to go on
    sys.stdin.readline()
    fsync(fd)


os.fsync = stop
store.put_if_absent(WRITTEN_PATH, b"x" * size)
print("published", flush=True)
"""

WRITTEN_PATH = "scratch/written-by-a-second-process"
"""What the writers below write: a name GC never deletes."""


def _writer_command(root: Path, size: int, mode: str) -> list[str]:
    code = f"WRITTEN_PATH = {WRITTEN_PATH!r}\n{_WRITER}"
    return [sys.executable, "-c", code, str(root), str(size), mode]


def writer_killed_mid_write(root: Path, size: int) -> None:
    """A second process writes a ``size``-byte object into the local store at
    ``root`` and is killed (SIGKILL) after writing its temp file, before
    publishing it: the temp file stays in ``.tmp/``, its writer dead."""
    done = subprocess.run(_writer_command(root, size, "kill"), env=dict(os.environ))
    assert done.returncode == -9, done


@contextmanager
def stalled_writer(root: Path, size: int) -> Iterator[subprocess.Popen[str]]:
    """A second process, alive, stopped between writing its temp file and
    publishing it (as a writer descheduled or paused there is). On exit it
    goes on, and must publish its object."""
    writer = subprocess.Popen(
        _writer_command(root, size, "stall"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ),
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline() == "written\n"
        yield writer
        writer.stdin.write("go on\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "published\n"
        assert writer.wait() == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
