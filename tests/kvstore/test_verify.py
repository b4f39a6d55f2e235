"""verify: every live file read and checked; problems reported, never raised."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import kvstore
from kvstore.cli import main
from kvstore.chain import VersionChain
from kvstore.format.root import root_path
from kvstore.format.tree import decode_tree
from kvstore.objstore.memory import MemoryStore
from kvstore.verify import verify_store
from maintenance_util import QUIET, wait_for


def _store_with_history(inner: MemoryStore) -> kvstore.Store:
    db = kvstore.open(inner, inline_delta_bytes=64, **QUIET)
    for round_ in range(4):
        for i in range(10):
            db.put(b"k%d" % i, b"round %d" % round_)
        db.flush()
    db.compact(full=True)
    db.put(b"tail", b"x" * 200)  # a delta SST referenced by an unflushed root
    return db


def _referenced_ssts(db: kvstore.Store) -> list[str]:
    tree = decode_tree(db.objects.get(db.stats()["tree"]), db.stats()["tree"])  # the head's tree: SSTs to damage
    return [info["path"] for run in tree.runs for info in run]


def test_a_healthy_store_verifies_clean() -> None:
    inner = MemoryStore()
    with _store_with_history(inner) as db:
        report = db.verify()
        assert report.ok and report.problems == ()
        assert (report.oldest_version, report.latest_version) == (0, db.version)
        assert report.roots_checked == db.version + 1 and report.ssts_checked >= 5 and report.bytes_checked > 0


def test_a_flipped_byte_in_an_sst_is_reported() -> None:
    inner = MemoryStore()
    with _store_with_history(inner) as db:
        victim = _referenced_ssts(db)[0]
        data = bytearray(inner.get(victim))
        data[len(data) // 3] ^= 0x40
        inner.put(victim, bytes(data))
        report = db.verify()
        assert not report.ok and any(victim in problem for problem in report.problems)


def test_a_missing_sst_tree_or_root_is_reported() -> None:
    inner = MemoryStore()
    with _store_with_history(inner) as db:
        inner.delete(_referenced_ssts(db)[0])
        older_tree = VersionChain(inner).read_root(11).tree  # the first flush's tree, to damage
        assert older_tree is not None and older_tree != db.stats()["tree"]
        inner.delete(older_tree)
        inner.delete(root_path(3))
        problems = "\n".join(db.verify().problems)
    assert "sst/" in problems and "tree/" in problems and "gap" in problems and "missing" in problems


def test_a_corrupt_root_and_a_missing_identity_are_reported() -> None:
    inner = MemoryStore()
    with _store_with_history(inner) as db:
        root = bytearray(inner.get(root_path(2)))
        root[-20] ^= 0xFF
        inner.put(root_path(2), bytes(root))
        inner.delete("_lakekv_store")
        problems = db.verify().problems
    assert any(problem.startswith("root 2") for problem in problems)
    assert any("_lakekv_store" in problem for problem in problems)


def test_unreferenced_files_are_listed_but_are_not_problems() -> None:
    inner = MemoryStore()
    with _store_with_history(inner) as db:
        inner.put("sst/stray.sst", b"from a flush that lost its race")
        report = db.verify()
        assert report.ok and report.unreferenced == ("sst/stray.sst",)


def test_an_empty_location_is_not_a_store() -> None:
    report = verify_store(MemoryStore())
    assert not report.ok and report.latest_version == -1


def test_cli_verify_gc_compact_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, dest = str(tmp_path / "store"), str(tmp_path / "copy")
    with kvstore.open(url, **QUIET) as db:
        for i in range(30):
            db.put(b"k%d" % i, b"v%d" % i)
    assert main(["compact", url, "--once"]) == 0
    assert "flushed versions up to 30" in capsys.readouterr().out
    assert main(["compact", url, "--once", "--full"]) == 0
    assert "compacted (full)" in capsys.readouterr().out
    assert main(["gc", url, "--dry-run"]) == 0
    assert "would delete 0 root files" in capsys.readouterr().out
    assert main(["export", url, dest, "--version", "30"]) == 0
    captured = capsys.readouterr()
    assert "exported version 30" in captured.out and "files" in captured.err  # progress on stderr
    assert main(["verify", dest]) == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")
    with kvstore.open(dest, create=False, **QUIET) as copy:
        assert copy.version == 30 and copy.get(b"k29") == b"v29"
    sst = next((tmp_path / "store" / "sst").iterdir())
    data = bytearray(sst.read_bytes())
    data[100] ^= 1
    sst.write_bytes(bytes(data))
    assert main(["verify", url]) == 1
    assert "PROBLEM: sst/" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_compact_runs_continuously_until_stopped(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, **QUIET) as db:
        for i in range(300):  # past flush_max_versions: the compactor process must flush
            db.put(b"k%d" % (i % 40), b"v%d" % i)
    process = subprocess.Popen(
        [sys.executable, "-m", "kvstore.cli", "compact", url, "--interval", "0.1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with kvstore.open(url, create=False, **QUIET) as db:
            wait_for(lambda: db.refresh() > 300 and db.stats()["flushed_upto"] >= 300)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "stopped" in err
    assert main(["verify", url]) == 0
