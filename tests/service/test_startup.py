"""service.startup: ``lakekv serve`` opens its store while the server imports (issue 38).

The open starts on a thread before uvicorn and the app are imported; the
app's lifespan takes the lakehouse. What must not change: a store that
fails to open still fails the start (uvicorn's startup-failure exit code,
the error in the log), so does a port in use, and a lakehouse nobody took
is closed, not left with its threads running.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from uvicorn.config import STARTUP_FAILURE

import catalog
from kvstore.errors import StoreError
from service.config import ServerConfig
from service.startup import EarlyOpen
from service.testing import free_port


def engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("lakekv-")}


def test_the_lifespan_takes_the_early_lakehouse_once(tmp_path: Path) -> None:
    early = EarlyOpen(ServerConfig(url=str(tmp_path / "lake")))
    lake = early.take()
    try:
        assert isinstance(lake, catalog.Lakehouse)
        lake.create_namespace("ns")
        assert lake.list_namespaces() == ["ns"]
        with pytest.raises(RuntimeError, match="taken already"):
            early.take()
        early.close_unless_taken()  # taken: the taker's to close
        assert lake.list_namespaces() == ["ns"]
    finally:
        lake.close()


def test_a_lakehouse_nobody_took_is_closed(tmp_path: Path) -> None:
    before = engine_threads()
    early = EarlyOpen(ServerConfig(url=str(tmp_path / "lake")))
    early.close_unless_taken()
    assert engine_threads() - before == set()  # its committer, follower and housekeeper stopped
    with pytest.raises(RuntimeError, match="taken already"):
        early.take()


def test_a_failed_open_is_raised_by_take(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    early = EarlyOpen(ServerConfig(url=str(tmp_path)))
    with pytest.raises(StoreError, match="not empty and holds no lakekv store"):
        early.take()
    early.close_unless_taken()  # nothing to close


def serve(url: str, port: int, log: Path) -> subprocess.CompletedProcess[str]:
    with open(log, "w") as out:
        return subprocess.run(
            [sys.executable, "-m", "kvstore.cli", "serve", url, "--host", "127.0.0.1", "--port", str(port), "--quiet"],
            stdout=out, stderr=subprocess.STDOUT, text=True, timeout=120,
        )


def test_serve_on_a_directory_that_is_no_store_fails_to_start(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    result = serve(str(tmp_path), free_port(), tmp_path.parent / f"{tmp_path.name}.log")
    assert result.returncode == STARTUP_FAILURE
    assert "not empty and holds no lakekv store" in (tmp_path.parent / f"{tmp_path.name}.log").read_text()
    assert (tmp_path / "notes.txt").read_text() == "not a store"


def test_serve_on_a_port_in_use_fails_to_start_with_its_store_whole(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        result = serve(str(tmp_path / "lake"), taken.getsockname()[1], tmp_path / "serve.log")
    assert result.returncode == STARTUP_FAILURE
    assert "address already in use" in (tmp_path / "serve.log").read_text().lower()
    with catalog.open(str(tmp_path / "lake"), create=False) as lake:  # opened, then closed cleanly
        assert lake.store.verify().ok
