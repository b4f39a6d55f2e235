"""``lakekv serve --etcd-listen``: the bind and token rules of the HTTP server hold for the etcd API too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from service.config import ServerConfig, check_bind


def test_a_non_loopback_etcd_bind_needs_a_token() -> None:
    with pytest.raises(ValueError, match="without a token"):
        check_bind(ServerConfig(url="memory://x", etcd_listen="0.0.0.0:2379"))
    check_bind(ServerConfig(url="memory://x", etcd_listen="127.0.0.1:2379"))
    check_bind(ServerConfig(url="memory://x", etcd_listen="[::1]:2379"))
    check_bind(ServerConfig(url="memory://x", etcd_listen="0.0.0.0:2379", token="t" * 16))


@pytest.mark.parametrize("listen", ["2379", "localhost:", ":2379", "host:99999", "host:port"])
def test_a_bad_etcd_listen_is_refused(listen: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        ServerConfig(url="memory://x", etcd_listen=listen)


def test_serve_refuses_an_unprotected_etcd_bind_before_opening_anything(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvstore.cli", "serve", str(tmp_path / "s"), "--etcd-listen", "0.0.0.0:1"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0 and "without a token" in result.stderr
    assert not (tmp_path / "s").exists()


def test_serve_refuses_a_bad_retention(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvstore.cli", "serve", str(tmp_path / "s"), "--retention", "0"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0 and "--retention" in result.stderr
