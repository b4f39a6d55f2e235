"""Snapshot export: version N and all it needs, copied to a store of its own."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

import kvstore
from kvstore.chain import VersionChain
from kvstore.errors import SnapshotTooOldError
from kvstore.export import TextProgress
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET


def _grow(db: kvstore.Store, rounds: int, per_round: int, flush_every: int = 2) -> None:
    for round_ in range(rounds):
        batch = kvstore.WriteBatch()
        for i in range(per_round):
            batch.put(b"k%06d" % ((round_ * 37 + i * 11) % (rounds * per_round)), b"r%d-%d" % (round_, i))
        if round_ % 4 == 3:
            batch.delete(b"k%06d" % round_)
        db.write(batch)
        if round_ % flush_every == flush_every - 1:
            db.flush()
    db.compact()


def test_export_of_the_head_opens_on_its_own() -> None:
    source, dest = MemoryStore(), MemoryStore()
    with kvstore.open(source, **QUIET) as db:
        _grow(db, 9, 50)
        db.put(b"unflushed", b"yes")  # a version after the last flush: its root is copied too
        expected = list(db.scan())
        report = db.export(dest)
        assert report.version == db.version and report.files > 0
    with kvstore.open(dest, create=False, **QUIET) as copy:
        assert copy.version == report.version
        assert list(copy.scan()) == expected
        assert copy.verify().ok
        identity = json.loads(dest.get("_lakekv_store"))
        assert identity["exported_from"]["version"] == report.version
        assert identity["store_id"] != json.loads(source.get("_lakekv_store"))["store_id"]
    versions = VersionChain(dest).list_versions()
    assert versions == list(range(report.oldest_version, report.version + 1))  # dense


def test_export_of_an_older_version() -> None:
    source, dest = MemoryStore(), MemoryStore()
    with kvstore.open(source, **QUIET) as db:
        _grow(db, 6, 30)
        version = db.version
        expected = list(db.scan())
        _grow(db, 6, 30)  # later history the export must not contain
        db.export(dest, version=version)
    with kvstore.open(dest, create=False, **QUIET) as copy:
        assert copy.version == version and list(copy.scan()) == expected
        copy.put(b"new", b"1")  # the export is a live store
        assert copy.get(b"new") == b"1"


def test_export_of_a_never_flushed_store_copies_from_version_zero() -> None:
    source, dest = MemoryStore(), MemoryStore()
    with kvstore.open(source, inline_delta_bytes=64, **QUIET) as db:
        for i in range(5):
            db.put(b"k%d" % i, b"v" * 100)  # delta SSTs, not inline
        report = db.export(dest)
    assert report.oldest_version == 0
    with kvstore.open(dest, create=False, **QUIET) as copy:
        assert copy.get(b"k4") == b"v" * 100


def test_export_refuses_a_non_empty_destination_and_bad_versions() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db, kvstore.open(MemoryStore(), **QUIET) as other:
        db.put(b"k", b"v")
        with pytest.raises(ValueError, match="not empty"):
            db.export(other.objects)
        with pytest.raises(ValueError, match="does not exist yet"):
            db.export(MemoryStore(), version=99)
        with pytest.raises(TypeError, match="dest_url"):
            db.export(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="version"):
            db.export(MemoryStore(), version="1")  # type: ignore[arg-type]


def test_export_of_a_collected_version_raises_snapshot_too_old() -> None:
    with kvstore.open(MemoryStore(), **dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)) as db:
        _grow(db, 6, 20)
        _grow(db, 6, 20)
        old = db.gc().deleted_roots[-1]
        with pytest.raises(SnapshotTooOldError):
            db.export(MemoryStore(), version=old)


def test_export_draws_progress() -> None:
    stream = io.StringIO()
    progress = TextProgress(stream=stream, interval_s=0)
    progress(1, 3, 10, 30)
    progress(3, 3, 30, 30)
    assert stream.getvalue() == "\rexport: 1/3 files, 0.0/0.0 MiB\rexport: 3/3 files, 0.0/0.0 MiB\n"


@pytest.mark.slow
def test_export_of_100k_keys_matches_the_source_and_needs_no_access_to_it(tmp_path: Path) -> None:
    source_dir, dest_dir = tmp_path / "source", tmp_path / "dest"
    options = dict(QUIET, fsync=False, sst_target_bytes=1 << 20)
    with kvstore.open(str(source_dir), **options) as db:
        for start in range(0, 100_000, 5_000):
            batch = kvstore.WriteBatch()
            for i in range(start, start + 5_000):
                batch.put(b"key%07d" % (i * 7919 % 100_000), b"value-%d" % i)
            db.write(batch)
            if start % 20_000 == 15_000:
                db.flush()
        db.compact()
        for i in range(0, 100_000, 997):  # unflushed updates and deletes on top
            db.delete(b"key%07d" % i) if i % 2 else db.put(b"key%07d" % i, b"updated")
        version = db.version
        db.put(b"after-export-version", b"x")
        with db.at(version=version) as view:
            expected = list(view.scan())
        assert len(expected) >= 99_900
        db.export(f"file://{dest_dir}", version=version, progress=True)
    shutil.rmtree(source_dir)  # the export must not need the source
    with kvstore.open(str(dest_dir), create=False, **options) as copy:
        assert copy.version == version
        assert list(copy.scan()) == expected
        assert copy.verify().ok


def _corrupt_one_sst(store: MemoryStore, where: str) -> str:
    """Flip one byte of the first referenced SST: in its head or in a data block."""
    from kvstore.format.sst import SSTReader

    path = sorted(meta.path for meta in store.list("sst/"))[0]
    data = bytearray(store.get(path))
    if where == "head":
        offset = 10  # inside magic + schema
    else:
        reader = SSTReader.open(store, path)
        offset = reader.meta.offsets[0] + reader.meta.lengths[0] // 2  # middle of block 0
    data[offset] ^= 0x40
    store.put(path, bytes(data))
    return path


@pytest.mark.parametrize("where", ["head", "block"])
def test_export_refuses_to_copy_a_corrupt_sst(where: str) -> None:
    from kvstore.errors import CorruptionError

    source, dest = MemoryStore(), MemoryStore()
    with kvstore.open(source, **QUIET) as db:
        for n in range(50):
            db.put(b"k%03d" % n, b"v" * 100)
        db.flush()
        path = _corrupt_one_sst(source, where)
        with pytest.raises(CorruptionError, match=path):
            db.export(dest)
    assert not any(meta.path == "_lakekv_store" for meta in dest.list(""))  # never opens as a store
    assert path not in {meta.path for meta in dest.list("sst/")}


def test_cli_export_of_a_corrupt_sst_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstore.cli import main
    from kvstore.objstore.local import LocalStore

    url = str(tmp_path / "src")
    with kvstore.open(url, **QUIET) as db:
        for n in range(50):
            db.put(b"k%03d" % n, b"v" * 100)
        db.flush()
    local = LocalStore(url)
    path = sorted(meta.path for meta in local.list("sst/"))[0]
    data = bytearray(local.get(path))
    data[len(data) // 3] ^= 0x01
    local.put(path, bytes(data))
    assert main(["export", url, str(tmp_path / "dest")]) != 0
    assert "sst/" in capsys.readouterr().err


def test_fsync_option_is_accepted_on_every_backend() -> None:
    with kvstore.open("memory://fsync-off", fsync=False, poll_interval_s=0) as db:
        db.put(b"k", b"v")
    from kvstore.objstore import open_store

    open_store("memory://fsync-off?fsync=false").close()


def test_export_options_need_a_url() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"k", b"v")
        with pytest.raises(ValueError, match="dest_options"):
            db.export(MemoryStore(), endpoint_url="http://127.0.0.1:1")


@pytest.mark.s3
def test_export_to_s3_takes_backend_options(seaweedfs) -> None:
    url, options = seaweedfs.new_url()
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"k", b"v")
        db.flush()
        db.put(b"k2", b"v2")
        report = db.export(url, **options)
    with kvstore.open(url, create=False, **dict(options, **QUIET)) as copy:
        assert copy.version == report.version and copy.get(b"k") == b"v" and copy.get(b"k2") == b"v2"
