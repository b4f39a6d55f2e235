"""Data files are checked end to end: CRC32C in the entry, on scan, verify and export."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import catalog
from catalog.datafiles import DataFile
from catalog.errors import CorruptDataFileError
from catalog_util import ORDERS, orders
from kvstore.errors import CorruptionError


def _table(lake: catalog.Lakehouse, rows: int = 8) -> catalog.Table:
    lake.create_namespace("s")
    t = lake.create_table("s.o", ORDERS)
    t.append(orders(list(range(rows)), amount=2.5))
    return t


def test_every_written_entry_carries_the_files_crc32c(lake: catalog.Lakehouse) -> None:
    from kvstore.format.checksum import crc32c

    (entry,) = _table(lake).files()
    assert entry.crc32c == crc32c(lake.objects.get(entry.path))


def test_a_flipped_byte_anywhere_is_a_corruption_error_naming_file_and_table(lake: catalog.Lakehouse) -> None:
    # Before checksums, flips gave silently wrong scans and errors naming nothing.
    t = _table(lake)
    (entry,) = t.files()
    good = lake.objects.get(entry.path)
    expected = t.scan().to_arrow()
    undetected: list[int] = []  # positions whose flip was read without an error
    wrong: list[int] = []  # ... and of those, the ones that changed the answer
    for position in range(len(good)):
        bad = bytearray(good)
        bad[position] ^= 0xFF
        lake.objects.put(entry.path, bytes(bad))
        try:
            got = t.scan().to_arrow()
        except CorruptDataFileError as exc:
            assert isinstance(exc, CorruptionError)
            assert exc.path == entry.path and exc.table == "s.o"
            assert entry.path in str(exc) and "'s.o'" in str(exc)
            continue
        undetected.append(position)
        if not got.equals(expected):
            wrong.append(position)
    assert (wrong, undetected) == ([], []), f"of {len(good)} positions"
    lake.objects.put(entry.path, good)
    assert t.scan().to_arrow().equals(expected)


def test_a_truncated_file_is_named_too(lake: catalog.Lakehouse) -> None:
    t = _table(lake)
    (entry,) = t.files()
    lake.objects.put(entry.path, lake.objects.get(entry.path)[:-10])
    with pytest.raises(CorruptDataFileError, match=f"{entry.path} of table 's.o' has .* bytes, its entry says"):
        t.scan().count()


def _old_style_table(lake: catalog.Lakehouse) -> tuple[catalog.Table, DataFile]:
    """A table whose one entry has no checksum, as lakehouses from before checksums stored them."""
    lake.create_namespace("s")
    t = lake.create_table("s.o", ORDERS)
    (written,) = t.write_files(orders(list(range(8)), amount=2.5))
    t.commit_files([dataclasses.replace(written, crc32c=None)])
    (old,) = t.files()
    assert old.crc32c is None
    return t, old


def test_an_entry_from_before_checksums_still_reads_and_verifies_by_size_and_decode(lake: catalog.Lakehouse) -> None:
    t, old = _old_style_table(lake)
    assert t.scan().count() == 8
    report = lake.verify()
    assert report.ok and report.unchecksummed == 1 and report.files_checked == 1
    # Its data pages still carry Parquet page checksums: a flip in a page's
    # data is caught (the end of the first column chunk is its one page's data).
    body = bytearray(lake.objects.get(old.path))
    chunk = pq.ParquetFile(pa.BufferReader(bytes(body))).metadata.row_group(0).column(0)
    body[chunk.data_page_offset + chunk.total_compressed_size - 2] ^= 0x01
    lake.objects.put(old.path, bytes(body))
    with pytest.raises(CorruptDataFileError, match=old.path):
        t.scan().to_arrow()


def test_verify_checks_every_retained_version_and_reports_each_bad_file(lake: catalog.Lakehouse) -> None:
    t = _table(lake, rows=2)
    t.append(orders([10]))
    t.append(orders([20]))
    first, second, third = t.files()
    t.overwrite(orders([30]))  # the three files are removed but retained versions still read them
    assert lake.verify().ok
    flipped = bytearray(lake.objects.get(first.path))
    flipped[5] ^= 0xFF
    lake.objects.put(first.path, bytes(flipped))
    lake.objects.delete(second.path)
    report = lake.verify()
    assert not report.ok
    assert {p.path for p in report.problems} == {first.path, second.path}
    assert all(p.table == "s.o" for p in report.problems)
    problems = {p.path: p.problem for p in report.problems}
    assert "failed its checksum" in problems[first.path] and "missing" in problems[second.path]
    assert report.files_checked == 3  # the two others and the overwrite's new file
    assert third.path not in problems


def test_verify_from_the_command_line_exits_1_naming_the_bad_file(local_lake: catalog.Lakehouse) -> None:
    t = _table(local_lake)
    (entry,) = t.files()
    body = bytearray(local_lake.objects.get(entry.path))
    body[-20] ^= 0xFF
    local_lake.objects.put(entry.path, bytes(body))
    url = local_lake.url
    local_lake.close()
    done = subprocess.run(
        [sys.executable, "-m", "kvstore.cli", "lake", url, "verify"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert entry.path in done.stdout and "s.o" in done.stdout and "PROBLEMS" in done.stdout


def test_export_refuses_a_corrupt_source(lake: catalog.Lakehouse, tmp_path: Path) -> None:
    # Before: export checked only the size, so a same-size flip was copied.
    t = _table(lake)
    (entry,) = t.files()
    body = bytearray(lake.objects.get(entry.path))
    body[len(body) // 2] ^= 0xFF
    lake.objects.put(entry.path, bytes(body))
    with pytest.raises(CorruptDataFileError, match=entry.path):
        lake.export(str(tmp_path / "copy"))


def test_a_dropped_and_purged_tables_files_are_not_missing(lake: catalog.Lakehouse) -> None:
    _table(lake)
    lake.drop_table("s.o", purge=True)
    lake.gc()
    report = lake.verify()
    assert report.ok and report.problems == []


def test_the_entry_refuses_a_checksum_that_is_not_32_bits() -> None:
    record = {"id": "f", "path": "data/x.parquet", "size": 1, "rows": 1, "crc32c": 1 << 40}
    with pytest.raises(ValueError, match="crc32c"):
        DataFile.from_json(record)
