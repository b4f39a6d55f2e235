"""kvstore.open reaches the client through the ``lakekv.stores`` entry points
the distribution declares (pyproject.toml), without the engine importing it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import kvstore
from kvclient import RemoteStore, open_remote
from kvstore.registry import opener_for


def test_http_and_https_open_a_remote_store() -> None:
    assert opener_for("http") is open_remote and opener_for("https") is open_remote
    for url in ("http://127.0.0.1:1", "https://127.0.0.1:1/base"):
        db = kvstore.open(url, token="t", retry_s=0)  # no request is made before the first call
        assert isinstance(db, RemoteStore) and db.url == url
        db.close()


def test_options_reach_the_client_unchanged() -> None:
    try:
        kvstore.open("http://127.0.0.1:1", poll_interval_s=0)  # an embedded option: not the client's
    except TypeError as exc:
        assert "poll_interval_s" in str(exc)
    else:
        raise AssertionError("an unknown client option was accepted")


def test_the_engine_imports_the_client_only_when_a_url_needs_it() -> None:
    code = textwrap.dedent(
        """
        import sys
        import kvstore
        with kvstore.open("memory://registration-probe", poll_interval_s=0) as db:
            db.put(b"k", b"v")
        assert "kvclient" not in sys.modules, "an embedded store imported the client"
        db = kvstore.open("http://127.0.0.1:1")
        print(type(db).__module__, type(db).__name__)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["kvclient.remote", "RemoteStore"]
