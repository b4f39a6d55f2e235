"""A full disk (issue 35, acceptance 4): GC frees space with 0 bytes free, writes
resume, and every acknowledged write survives.

A 20 MiB tmpfs holds a lakehouse and a key-value store. Their writers (table
appends and overwrites, store puts with flushes and compactions) fill it to
0 bytes free, keeping a model of what was acknowledged. A write that fails
must fail definitely (the storage proved nothing landed), so it stays out of
the model. Then, at 0 bytes free: the read-only maintenance commands work
(``lakekv gc --dry-run``, ``lakekv lake URL gc --dry-run``, ``lakekv lake URL
verify``, ``lake.gc(dry_run=True)``), and GC (``lakekv gc``, ``lakekv lake
URL gc``) frees space; writes resume, and the stores read back exactly the
model, in this process and in fresh handles.

The grace period and the retention window are on the storage's clock: the
test moves every existing file's stamp two days back
(:func:`full_disk_util.age_everything`) instead of waiting for them.
"""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
import kvstore
from full_disk_util import age_everything, free_bytes, tmpfs, writer_killed_mid_write
from catalog.maintenance import RESERVE_PATH
from kvstore.cli import main
from kvstore.errors import CommitNotLandedError, NotWrittenError

QUIET = {"poll_interval_s": 0, "background_maintenance": False}
SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.binary())])
# ns.t is overwritten (its old files become garbage), ns.log only appended to.
TABLES = ("ns.t", "ns.log")
TWO_DAYS = 2 * 24 * 3600.0  # past the default retention window (1 day) and grace period (1 hour)


def _rows(rng: random.Random, first: int, count: int, size: int = 2000) -> list[tuple[int, bytes]]:
    return [(first + i, rng.randbytes(size)) for i in range(count)]  # incompressible


def _table(rows: list[tuple[int, bytes]]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "payload": [r[1] for r in rows]}, schema=SCHEMA)


def _lake_rows(lake: catalog.Lakehouse) -> dict[str, list[tuple[int, bytes]]]:
    rows = {}
    for name in TABLES:
        data = lake.load_table(name).scan().to_arrow()
        rows[name] = sorted(zip(data.column("id").to_pylist(), data.column("payload").to_pylist()))
    return rows


def _create(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("ns")
    for name in TABLES:
        lake.create_table(name, SCHEMA)


def _refused(exc: BaseException) -> bool:
    """The storage proved the write did not land (or the error says so)."""
    return isinstance(exc, (CommitNotLandedError, NotWrittenError))


def _fill(
    lake: catalog.Lakehouse, db: kvstore.Store, rng: random.Random, strict: bool = True
) -> tuple[dict[str, list[tuple[int, bytes]]], dict[bytes, bytes], int]:
    """Write until the disk is full and both writers were refused; return the
    models of what was acknowledged and the number of refused writes.

    Overwrites of ns.t and of 40 keys make garbage; appends to ns.log and
    new keys accumulate. Once a writer is refused, both write small: the
    last pages fill up too.
    """
    lake_model: dict[str, list[tuple[int, bytes]]] = {name: [] for name in TABLES}
    kv_model: dict[bytes, bytes] = {}
    next_id = refusals = 0
    lake_refused = kv_refused = False
    for step in range(10_000):
        if lake_refused and kv_refused and free_bytes(lake.store.objects.root) == 0:
            return lake_model, kv_model, refusals
        small = lake_refused or kv_refused
        rows = _rows(rng, next_id, 1 if small else 200, 10 if small else 2000)
        next_id += len(rows)
        try:
            if step % 2 == 0:
                lake.load_table("ns.t").overwrite(_table(rows))
                lake_model["ns.t"] = list(rows)
            else:
                lake.load_table("ns.log").append(_table(rows))
                lake_model["ns.log"] += rows
        except Exception as exc:  # the assertion below decides: only a definite refusal is allowed
            assert _refused(exc) or not strict, f"a failed lake write must say it did not land: {exc!r}"
            lake_refused, refusals = True, refusals + 1
        try:
            # An overwritten key and a new one.
            for key, size in ((b"k%03d" % (step % 40), 8000), (b"new%05d" % step, 500)):
                value = rng.randbytes(10 if small else size)
                db.put(key, value)
                kv_model[key] = value
            if step % 10 == 9 and not small:
                db.flush()
                db.compact(full=True)
        except Exception as exc:
            assert _refused(exc) or not strict, f"a failed store write must say it did not land: {exc!r}"
            kv_refused, refusals = True, refusals + 1
    raise AssertionError("10,000 steps did not fill 20 MiB")


def _check(lake_url: str, kv_url: str, lake_model: dict[str, list[tuple[int, bytes]]], kv_model: dict) -> None:
    with catalog.open(lake_url, create=False, **QUIET) as lake:
        assert _lake_rows(lake) == {name: sorted(rows) for name, rows in lake_model.items()}
    with kvstore.open(kv_url, create=False, **QUIET) as db:
        assert dict(db.scan()) == kv_model


def test_gc_frees_a_full_disk_and_every_acknowledged_write_survives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(35)
    with tmpfs(tmp_path / "disk", size_mb=20) as disk:
        lake_url, kv_url = str(disk / "lake"), str(disk / "kv")
        with catalog.open(lake_url, **QUIET) as lake, kvstore.open(kv_url, **QUIET) as db:
            _create(lake)
            for root in (disk / "lake", disk / "kv"):  # writers killed mid-write leave temp files
                for _ in range(3):
                    writer_killed_mid_write(root, 300_000)
            lake_model, kv_model, refusals = _fill(lake, db, rng)
            assert free_bytes(disk) == 0 and refusals >= 2
            # Reading works with 0 bytes free, in the writers' own handles.
            assert _lake_rows(lake) == {name: sorted(rows) for name, rows in lake_model.items()}
            assert dict(db.scan()) == kv_model
        _check(lake_url, kv_url, lake_model, kv_model)

        age_everything(disk, TWO_DAYS)
        assert free_bytes(disk) == 0
        # The read-only maintenance commands, at 0 bytes free.
        capsys.readouterr()
        assert main(["gc", "--dry-run", kv_url]) == 0
        assert main(["lake", lake_url, "gc", "--dry-run"]) == 0
        assert main(["lake", lake_url, "verify"]) == 0
        out = capsys.readouterr().out
        assert "would delete" in out and "ok:" in out
        with catalog.open(lake_url, create=False, **QUIET) as lake:
            would = lake.gc(dry_run=True)
            assert would.dry_run and would.bytes_freed > 0  # the overwritten tables' files
        assert free_bytes(disk) == 0

        # GC itself, at 0 bytes free: the engine's (roots, SSTs, temp files) on
        # both stores, and the lakehouse's (data files).
        assert main(["gc", kv_url]) == 0
        assert main(["lake", lake_url, "gc"]) == 0
        assert main(["gc", lake_url]) == 0
        assert list((disk / "kv" / ".tmp").iterdir()) == [] and list((disk / "lake" / ".tmp").iterdir()) == []
        freed = free_bytes(disk)
        assert freed > 1 << 20, f"GC freed only {freed} bytes"
        _check(lake_url, kv_url, lake_model, kv_model)

        # Writes resume.
        with catalog.open(lake_url, create=False, **QUIET) as lake, kvstore.open(kv_url, create=False, **QUIET) as db:
            rows = _rows(rng, 1_000_000, 50)
            lake.load_table("ns.log").append(_table(rows))
            lake_model["ns.log"] += rows
            db.put(b"after-gc", b"resumed")
            kv_model[b"after-gc"] = b"resumed"
        _check(lake_url, kv_url, lake_model, kv_model)


MAINTENANCE = {
    "lakekv gc --dry-run": lambda lake_url, kv_url: main(["gc", "--dry-run", kv_url]),
    "lakekv gc": lambda lake_url, kv_url: main(["gc", kv_url]),
    "lakekv lake URL gc --dry-run": lambda lake_url, kv_url: main(["lake", lake_url, "gc", "--dry-run"]),
    "lakekv lake URL gc": lambda lake_url, kv_url: main(["lake", lake_url, "gc"]),
    "lakekv lake URL verify": lambda lake_url, kv_url: main(["lake", lake_url, "verify"]),
    "lake.gc(dry_run=True)": lambda lake_url, kv_url: _lake_gc_dry_run(lake_url),
    "lake.history() and at()": lambda lake_url, kv_url: _lake_time_travel(lake_url),
}


def _lake_gc_dry_run(lake_url: str) -> int:
    with catalog.open(lake_url, create=False, **QUIET) as lake:
        return 0 if lake.gc(dry_run=True).dry_run else 1


def _lake_time_travel(lake_url: str) -> int:
    with catalog.open(lake_url, create=False, **QUIET) as lake:
        newest = lake.history(limit=1)[0].version
        with lake.at(version=newest) as past:
            past.load_table("ns.t").scan().to_arrow()
    return 0


@pytest.mark.parametrize("command", sorted(MAINTENANCE))
def test_maintenance_commands_work_with_0_bytes_free(tmp_path: Path, command: str) -> None:
    """Issue 35: each of these exited 2 ("writing '_clock_probe' ... No space left on device")."""
    with tmpfs(tmp_path / "disk", size_mb=8) as disk:
        lake_url, kv_url = str(disk / "lake"), str(disk / "kv")
        with catalog.open(lake_url, **QUIET) as lake, kvstore.open(kv_url, **QUIET) as db:
            _create(lake)
            lake_model, kv_model, _ = _fill(lake, db, random.Random(command), strict=False)
        assert free_bytes(disk) == 0
        assert MAINTENANCE[command](lake_url, kv_url) == 0
        _check(lake_url, kv_url, lake_model, kv_model)


def _fill_up(path: Path) -> None:
    """Take the last free bytes with a file outside any store (as another program would)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


def test_lake_gc_alone_frees_a_full_disk_through_its_reserve(tmp_path: Path) -> None:
    """Nothing else on the disk frees space first: no engine GC, no temp files
    of killed writers. GC must commit its data floor before it deletes a
    removed file (catalog.retention); the lakehouse's reserve makes room for it."""
    rng = random.Random(3535)
    with tmpfs(tmp_path / "disk", size_mb=8) as disk:
        lake_url = str(disk / "lake")
        model: list[tuple[int, bytes]] = []
        with catalog.open(lake_url, **QUIET) as lake:
            lake.create_namespace("ns")
            table = lake.create_table("ns.t", SCHEMA)
            for step in range(10_000):
                rows = _rows(rng, step * 100, 100)
                try:
                    table.overwrite(_table(rows))
                except Exception as exc:  # the assertion decides: only a definite refusal is allowed
                    assert _refused(exc), f"a failed lake write must say it did not land: {exc!r}"
                    break
                model = rows
        _fill_up(disk / "filler")
        age_everything(disk, TWO_DAYS)
        assert free_bytes(disk) == 0
        assert main(["lake", lake_url, "gc"]) == 0
        assert free_bytes(disk) > 1 << 20
        with catalog.open(lake_url, create=False, **QUIET) as lake:
            assert sorted(_rows_of(lake.load_table("ns.t"))) == sorted(model)
            rows = _rows(rng, 10_000_000, 10)
            lake.load_table("ns.t").append(_table(rows))  # writes resume
            assert sorted(_rows_of(lake.load_table("ns.t"))) == sorted(model + rows)
        # The GC that used the reserve put it back once there was room again.
        assert (disk / "lake" / RESERVE_PATH).stat().st_size > 0


def _rows_of(table: catalog.Table) -> list[tuple[int, bytes]]:
    data = table.scan().to_arrow()
    return list(zip(data.column("id").to_pylist(), data.column("payload").to_pylist()))
