"""``lakekv serve --etcd-listen``: the bind and token rules of the HTTP server hold for the etcd API too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from service.config import ServerConfig, check_bind
from tests.service.etcd_peers import LakekvEtcd, etcdctl


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


def test_the_etcd_port_speaks_tls_with_the_serve_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=120,
    )
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log", tls=True,
                        extra_args=("--tls-cert", str(cert), "--tls-key", str(key))).start()
    try:
        etcdctl(server.endpoint, "--cacert", str(cert), "put", "k", "over tls")
        assert etcdctl(server.endpoint, "--cacert", str(cert), "get", "k", "--print-value-only").stdout == "over tls\n"
        plain = etcdctl(server.endpoint, "get", "k", check=False, timeout=120)
        assert plain.returncode != 0  # no clear text on a TLS server
    finally:
        server.stop()


def test_a_put_larger_than_etcd_s_request_limit_is_refused(tmp_path: Path) -> None:
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        big = tmp_path / "big"
        big.write_bytes(b"x" * (1536 * 1024 + 1))
        refused = etcdctl(server.endpoint, "put", "big", stdin=big.read_text(), check=False)
        assert refused.returncode != 0 and "request is too large" in refused.stderr
    finally:
        server.stop()
