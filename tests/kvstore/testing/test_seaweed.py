"""The SeaweedFS test server: it keeps taking writes on a large disk below 1 % free,
and a dead server or a full disk fails a test at once instead of in timeouts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvstore.objstore import open_store
from kvstore.testing.seaweed import MIN_FREE_BYTES, SeaweedServer

# Large enough that 1 % of it is well above the server's floor, as on the
# shared 252 GB disk that made `weed mini` refuse writes with gigabytes free.
_DISK_BYTES = 40 * 2**30
_FREE_FRACTION = 0.009


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@pytest.fixture
def nearly_full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40 GiB ext4 filesystem (a sparse image on a loop device) with 0.9 % of it free."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or shutil.which("fallocate") is None:
        pytest.skip("needs root, mkfs.ext4 and fallocate to mount a loop device")
    image, mount = tmp_path / "disk.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(_DISK_BYTES)
    made = _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
    assert made.returncode == 0, made.stderr
    mounted = _run("mount", "-o", "loop", str(image), str(mount))
    if mounted.returncode != 0:
        pytest.skip(f"this machine does not allow loop mounts: {mounted.stderr.strip()}")
    try:
        usage = shutil.disk_usage(mount)
        keep = int(usage.total * _FREE_FRACTION)
        filled = _run("fallocate", "-l", str(usage.free - keep), str(mount / "filler"))
        assert filled.returncode == 0, filled.stderr
        yield mount
    finally:
        unmounted = _run("umount", str(mount))
        assert unmounted.returncode == 0, unmounted.stderr
        image.unlink()  # about 150 MB of ext4 metadata; pytest keeps old temp dirs


def test_writes_are_taken_on_a_large_disk_below_one_percent_free(nearly_full_disk: Path) -> None:
    usage = shutil.disk_usage(nearly_full_disk)
    assert usage.free < usage.total // 100 and usage.free > MIN_FREE_BYTES + 64 * 2**20
    with SeaweedServer(nearly_full_disk / "weed") as server:
        time.sleep(6)  # weed checks its disk every 5 s; let it see this one first
        url, options = server.new_url()
        store = open_store(url, **options)
        try:
            payloads = {f"object-{i}": os.urandom(100_000) for i in range(3)}
            for path, data in payloads.items():
                store.put(path, data)
            assert {path: store.get(path) for path in payloads} == payloads
        finally:
            store.close()


def test_new_url_fails_at_once_when_weed_has_exited(tmp_path: Path) -> None:
    with SeaweedServer(tmp_path / "weed") as server:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                server.new_url()
            except RuntimeError as exc:
                assert "exited with code -9" in str(exc)
                break
            assert time.monotonic() < deadline, "new_url() kept answering after weed was killed"
            time.sleep(0.05)


def test_new_url_fails_at_once_when_the_disk_is_below_the_floor(tmp_path: Path) -> None:
    floor = shutil.disk_usage(tmp_path).free + 2**40
    server = SeaweedServer(tmp_path / "weed", min_free_bytes=floor).start()
    try:
        with pytest.raises(RuntimeError, match=r"SeaweedFS refuses writes: \d+ MiB free .* below its floor of \d+ MiB"):
            server.new_url()
    finally:
        # A weed whose volumes are all read-only does not finish a graceful
        # stop (it outlasted 20 s); stop() warns and kills it. That is weed's
        # business, not this test's.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            server.stop(grace=2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "256MiB", True])
def test_a_bad_floor_is_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="min_free_bytes must be a positive int"):
        SeaweedServer(min_free_bytes=bad)  # type: ignore[arg-type]
