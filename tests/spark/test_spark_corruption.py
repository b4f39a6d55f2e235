"""Damaged data files through every read path: an error naming the file, or the exact answer (issue 35).

The plugin's JVM reader (Spark's Parquet reader over the planned files)
skips row groups and pages by the statistics in a file's footer and page
indexes, which no Parquet page checksum covers. Each task checks a file's
footer region against the CRC32C in its catalog entry before Spark opens it
(``FileCheck.java``); entries from before footer checksums get a whole-file
CRC32C check. These tests damage the files of two small tables, one written
by the Python writer (pyarrow) and one by Spark's own writer (parquet-mr,
with page indexes and several row groups), and read them every way there is.

One lakehouse, served to the shared session as catalog ``dmg``, holds only
these tables, so export and verify see nothing else. Every test puts the
files back as it found them.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import catalog
from catalog.datafiles import DataFile
from catalog.errors import CorruptDataFileError

pytestmark = pytest.mark.spark

ROWS = 3000
CATALOG = "dmg"
# The queries of the report, and a full scan of every column.
FULL = "SELECT count(*), sum(id), sum(crc32(v)) FROM {t}"
FILTERED = "SELECT count(*), max(id), sum(crc32(v)) FROM {t} WHERE id >= 1990 AND id <= 2010"
POINT = "SELECT count(*) FROM {t} WHERE id = 2000"
MAX_ABOVE = "SELECT max(id) FROM {t} WHERE id > 1000"
# Spark's writer in small row groups and pages, so filters skip row groups and pages.
SMALL_PARQUET = {"parquet.block.size": "16384", "parquet.page.size": "2048", "parquet.page.row.count.limit": "400"}


@dataclass
class Damaged:
    """One table of one data file, its entry and its good bytes."""

    name: str  # ns.t in the lakehouse
    entry: DataFile
    file: Path
    good: bytes

    @property
    def sql(self) -> str:
        return f"{CATALOG}.{self.name}"


@contextmanager
def settings(spark: SparkSession, values: dict[str, str]) -> Iterator[None]:
    before = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the lakehouse of catalog ``dmg`` (its data files' paths are relative to it)."""
    return tmp_path_factory.mktemp("damaged") / "lake"


@pytest.fixture(scope="module")
def lake(spark: SparkSession, root: Path) -> Iterator[catalog.Lakehouse]:
    """The lakehouse of catalog ``dmg``, open in this process too."""
    from catalog.spark.plugin import catalog_conf

    url = str(root)
    handle = catalog.open(url, poll_interval_s=0)
    for key, value in catalog_conf(CATALOG, url, python=sys.executable).items():
        spark.conf.set(key, value)
    try:
        yield handle
    finally:
        handle.close()


def _one_file(lake: catalog.Lakehouse, root: Path, name: str) -> Damaged:
    lake.refresh()
    (entry,) = lake.load_table(name).files()
    file = root / entry.path
    return Damaged(name, entry, file, file.read_bytes())


@pytest.fixture(scope="module")
def tables(spark: SparkSession, lake: catalog.Lakehouse, root: Path) -> dict[str, Damaged]:
    """``py``: written by the Python writer; ``sp``: by Spark's, in small row groups and pages. Rows (id, 'v' || id)."""
    lake.create_namespace("s")
    py = lake.create_table("s.py", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    py.append(pa.table({"id": list(range(ROWS)), "v": [f"v{i}" for i in range(ROWS)]}))
    spark.sql(f"CREATE TABLE {CATALOG}.s.sp (id BIGINT, v STRING)")
    with settings(spark, SMALL_PARQUET):
        spark.sql(f"INSERT INTO {CATALOG}.s.sp SELECT /*+ REPARTITION(1) */ id, concat('v', id) FROM range({ROWS})")
    found = {"py": _one_file(lake, root, "s.py"), "sp": _one_file(lake, root, "s.sp")}
    import pyarrow.parquet as pq

    assert pq.read_metadata(found["sp"].file).num_row_groups > 1  # row groups to skip
    return found


def _error_text(exc: BaseException) -> str:
    return "\n".join(str(e) for e in (exc, getattr(exc, "java_exception", None)) if e is not None)


def _named(exc: BaseException, damaged: Damaged) -> bool:
    """Whether ``exc`` is the plugin's CorruptDataFileError naming the damaged file."""
    text = _error_text(exc)
    return "CorruptDataFileError" in text and damaged.entry.path in text


def _read_failure(exc: BaseException, damaged: Damaged) -> bool:
    """Whether ``exc`` is Spark's failed read of the damaged file (a Parquet page checksum, a decode error), naming it."""
    text = _error_text(exc)
    return "FAILED_READ_FILE" in text and damaged.entry.path in text


def _sql(spark: SparkSession, query: str, damaged: Damaged) -> list[tuple[object, ...]]:
    return [tuple(row) for row in spark.sql(query.format(t=damaged.sql)).collect()]


@contextmanager
def damaged_file(damaged: Damaged, body: bytes) -> Iterator[None]:
    damaged.file.write_bytes(body)
    try:
        yield
    finally:
        damaged.file.write_bytes(damaged.good)


def _statistic_edited(body: bytes) -> bytes:
    """The issue's edit: every copy of the max statistic 2999 (8 bytes, little endian) made 183, one byte each."""
    old, new = (ROWS - 1).to_bytes(8, "little"), (183).to_bytes(8, "little")
    assert body.count(old) >= 2  # footer statistics (max and max_value), and page statistics or indexes
    return body.replace(old, new)


# -- the targeted edit of the issue ------------------------------------------------


@pytest.mark.parametrize("which", ["py", "sp"])
def test_a_damaged_footer_statistic_is_an_error_naming_the_file(spark: SparkSession, tables: dict, which: str) -> None:
    """Before: count(*) WHERE id = 2000 answered 0 and max(id) WHERE id > 1000 NULL, with no error."""
    damaged = tables[which]
    assert _sql(spark, POINT, damaged) == [(1,)] and _sql(spark, MAX_ABOVE, damaged) == [(ROWS - 1,)]
    with damaged_file(damaged, _statistic_edited(damaged.good)):
        for query in (POINT, MAX_ABOVE, FULL):
            with pytest.raises(Exception) as raised:
                _sql(spark, query, damaged)
            assert _named(raised.value, damaged), _error_text(raised.value)[:2000]
            assert "failed its footer checksum" in _error_text(raised.value)
    assert _sql(spark, POINT, damaged) == [(1,)]


def test_an_update_reads_no_damaged_file(spark: SparkSession, lake: catalog.Lakehouse, tables: dict) -> None:
    """The row-level rewrite's scan (UPDATE, MERGE) checks its files too: an error, and nothing committed."""
    damaged = tables["sp"]
    lake.refresh()
    version = lake.version
    with damaged_file(damaged, _statistic_edited(damaged.good)):
        with pytest.raises(Exception) as raised:
            spark.sql(f"UPDATE {damaged.sql} SET v = 'x' WHERE id > 1000")
        assert _named(raised.value, damaged), _error_text(raised.value)[:2000]
    lake.refresh()
    assert lake.version == version


def _with_entry(lake: catalog.Lakehouse, root: Path, name: str, entry: DataFile) -> Damaged:
    """Table ``name`` holding one copy of ``tables['py']``'s file under ``entry`` (an older entry's shape)."""
    table = lake.create_table(name, lake.load_table("s.py").schema)
    (written,) = table.write_files(table_rows())
    table.commit_files([dataclasses.replace(written, crc32c=entry.crc32c, footer_size=entry.footer_size,
                                            footer_crc32c=entry.footer_crc32c)])
    return _one_file(lake, root, name)


def table_rows() -> pa.Table:
    return pa.table({"id": list(range(ROWS)), "v": [f"v{i}" for i in range(ROWS)]})


def test_an_entry_from_before_footer_checksums_is_checked_whole(
    spark: SparkSession, lake: catalog.Lakehouse, root: Path, tables: dict
) -> None:
    """No footer checksum in the entry: the JVM reader checks the whole file's CRC32C instead."""
    py = tables["py"]
    old = _with_entry(lake, root, "s.old", dataclasses.replace(py.entry, footer_size=None, footer_crc32c=None))
    assert old.entry.footer_size is None and old.entry.crc32c is not None
    assert _sql(spark, POINT, old) == [(1,)]
    with damaged_file(old, _statistic_edited(old.good)):
        with pytest.raises(Exception) as raised:
            _sql(spark, POINT, old)
        assert _named(raised.value, old) and "failed its checksum (crc32c" in _error_text(raised.value)


def test_an_entry_from_before_checksums_is_checked_by_size(
    spark: SparkSession, lake: catalog.Lakehouse, root: Path, tables: dict
) -> None:
    bare = _with_entry(lake, root, "s.bare", dataclasses.replace(tables["py"].entry, crc32c=None, footer_size=None, footer_crc32c=None))
    assert bare.entry.crc32c is None
    assert _sql(spark, FULL, bare)[0][0] == ROWS
    with damaged_file(bare, bare.good[:-100]):
        with pytest.raises(Exception) as raised:
            _sql(spark, FULL, bare)
        assert _named(raised.value, bare)
        assert f"has {len(bare.good) - 100} bytes, its entry says {len(bare.good)}" in _error_text(raised.value)


def _dictionary_shortened(body: bytes) -> bytes:
    """The id column's dictionary page header made to say 2000 values, not 3000: no checksum covers a page header."""
    import pyarrow.parquet as pq

    start = pq.read_metadata(pa.BufferReader(body)).row_group(0).column(0).dictionary_page_offset
    # num_values in the header's Thrift compact encoding: zigzag varints, 3000 -> f0 2e, 2000 -> a0 1f.
    at = body.index(bytes([0xF0, 0x2E]), start, start + 40)
    return body[:at] + bytes([0xA0, 0x1F]) + body[at + 2 :]


def test_a_damaged_dictionary_page_header_never_skips_a_row_group(spark: SparkSession, tables: dict) -> None:
    """Found by random flips: with Parquet's dictionary filtering a shortened dictionary hid id 2000 (count 0).

    The plugin turns that filtering off: row groups are skipped by their
    footer statistics (checked) only, and a dictionary is only used to
    decode, where a short one fails the query (an index past the
    dictionary's end: Spark decodes dictionaries lazily, outside its file
    reader, so that error does not name the file) or gives the right values.
    """
    damaged = tables["py"]
    with damaged_file(damaged, _dictionary_shortened(damaged.good)):
        for query, right in ((POINT, [(1,)]), (MAX_ABOVE, [(ROWS - 1,)]), (FULL, None)):
            try:
                answer = _sql(spark, query, damaged)
            except Exception as exc:  # noqa: BLE001 - judged: a read failure or the dictionary index
                text = _error_text(exc)
                # (The JVM drops the message of an exception it has thrown often: the class is all that is sure.)
                assert _read_failure(exc, damaged) or "java.lang.ArrayIndexOutOfBoundsException" in text, text[:2000]
                continue
            assert right is not None and answer == right, query


def test_a_missing_file_is_left_to_sparks_reader(spark: SparkSession, tables: dict) -> None:
    """The check never turns a missing file into an answer: Spark's reader reports it, naming it."""
    damaged = tables["py"]
    damaged.file.unlink()
    try:
        with pytest.raises(Exception) as raised:
            _sql(spark, FULL, damaged)
        assert damaged.entry.path in _error_text(raised.value)
    finally:
        damaged.file.write_bytes(damaged.good)
    assert _sql(spark, POINT, damaged) == [(1,)]


# -- acceptance 2: random flips and truncations through every read path -------------

CASES = 64  # per read path, each case through all five


def _statistic_bytes(good: bytes) -> list[int]:
    """Positions of the footer's copies of the id column's min and max (0 and 2999, 8 bytes little endian)."""
    footer_start = len(good) - 8 - int.from_bytes(good[-8:-4], "little")
    positions = []
    for value in (0, ROWS - 1):
        encoded, at = value.to_bytes(8, "little"), good.find(value.to_bytes(8, "little"), footer_start)
        while at >= 0:
            positions.extend(range(at, at + 8))
            at = good.find(encoded, at + 8)
    return positions


def _corruptions(tables: dict[str, Damaged]) -> Iterator[tuple[str, Damaged, bytes]]:
    """Seeded damage: flips anywhere, in the footer, in its id statistics; truncations; alternating tables."""
    rng = random.Random(35)
    for case in range(CASES):
        damaged = tables["py" if case % 2 == 0 else "sp"]
        good = damaged.good
        kind = ("flip", "footer flip", "statistic flip", "truncate")[case // 2 % 4]
        if kind == "truncate":
            yield f"{damaged.name} truncated to {(cut := rng.randrange(len(good)))}", damaged, good[:cut]
            continue
        footer = int.from_bytes(good[-8:-4], "little") + 8  # the Thrift footer, its length and the magic
        if kind == "statistic flip":
            position = rng.choice(_statistic_bytes(good))
        else:
            position = rng.randrange(len(good) - footer if kind == "footer flip" else 0, len(good))
        mask = rng.randrange(1, 256)
        body = bytearray(good)
        body[position] ^= mask
        yield f"{damaged.name} byte {position} ^ {mask:#04x} ({kind})", damaged, bytes(body)


def test_random_damage_is_detected_naming_the_file_or_answered_exactly(
    spark: SparkSession, lake: catalog.Lakehouse, tables: dict, tmp_path: Path
) -> None:
    expected: dict[tuple[str, str], object] = {}
    for damaged in tables.values():
        lake.refresh()
        expected[damaged.name, "python scan"] = lake.load_table(damaged.name).scan().to_arrow().sort_by("id")
        expected[damaged.name, "spark full scan"] = _sql(spark, FULL, damaged)
        expected[damaged.name, "spark filtered scan"] = _sql(spark, FILTERED, damaged)
        assert expected[damaged.name, "spark full scan"][0][0] == ROWS
        assert expected[damaged.name, "spark filtered scan"][0][:2] == (21, 2010)
    exports = iter(range(CASES))

    def export(damaged: Damaged) -> object:
        dest = tmp_path / f"export-{next(exports)}"
        lake.export(str(dest))
        return (dest / damaged.entry.path).read_bytes() == damaged.good  # exported: only the good bytes are right

    def verify(damaged: Damaged) -> object:
        report = lake.verify()
        problems = [p for p in report.problems if p.path == damaged.entry.path]
        if problems:
            raise CorruptDataFileError(problems[0].problem, path=damaged.entry.path)
        return report.ok and damaged.file.read_bytes() == damaged.good

    paths: dict[str, Callable[[Damaged], object]] = {
        "python scan": lambda d: lake.load_table(d.name).scan().to_arrow().sort_by("id"),
        "spark full scan": lambda d: _sql(spark, FULL, d),
        "spark filtered scan": lambda d: _sql(spark, FILTERED, d),
        "export": export,
        "verify": verify,
    }
    detected = {path: 0 for path in paths}
    exact = {path: 0 for path in paths}
    silent_wrong: list[str] = []
    for what, damaged, body in _corruptions(tables):
        with damaged_file(damaged, body):
            for path, read in paths.items():
                try:
                    answer = read(damaged)
                except Exception as exc:  # noqa: BLE001 - every error is judged: it must name the file
                    # A damaged page fails its Parquet page checksum in Spark's reader, after the footer passed.
                    if isinstance(exc, CorruptDataFileError) and exc.path == damaged.entry.path or _named(exc, damaged) or (
                        path.startswith("spark") and _read_failure(exc, damaged)
                    ):
                        detected[path] += 1
                    else:
                        silent_wrong.append(f"{path}, {what}: an error not naming the file: {_error_text(exc)[:300]}")
                    continue
                right = answer is True if path in ("export", "verify") else answer == expected[damaged.name, path]
                if right:
                    exact[path] += 1
                else:
                    silent_wrong.append(f"{path}, {what}: {str(answer)[:200]}")
    assert silent_wrong == [], f"{len(silent_wrong)} silent wrong answers"
    for path in paths:
        assert detected[path] + exact[path] == CASES, path
    # Export and verify copy and check every byte: nothing damaged gets past them.
    assert detected["export"] == detected["verify"] == CASES
