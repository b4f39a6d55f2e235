"""Run sizes of the catalog benchmark, as one frozen dataclass.

The full sizes are the issue's (a 10,000-file table, 10,000 tables, 4 writer
processes) and finish in about 10 minutes on 2 cores; :meth:`quick` shrinks
every count so the whole bench runs in the test suite in well under a minute.
Every number is recorded with the results.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CatalogBenchConfig:
    mode: str = "full"
    seed: int = 42
    # (a) small appends: rows per append, appends by the single writer, and
    # writer processes x appends each for the concurrent run.
    append_rows: int = 10
    single_writer_appends: int = 40
    writers: int = 4
    appends_per_writer: int = 25
    # A caller-level retry bound per append: an append that still fails after
    # this many attempts is counted as given up (and reported).
    max_attempts: int = 20
    # (b), (c): the planned table has `files` files of `rows_per_file` rows,
    # committed `files_per_commit` at a time; the "old version" is the one
    # after the first half of the commits.
    files: int = 10_000
    rows_per_file: int = 10
    files_per_commit: int = 1000
    # (d) tables listed in one namespace.
    tables: int = 10_000
    tables_per_commit: int = 1000
    # Repeats of each timed read (the median is reported), capped in time so a
    # slow system cannot stretch the run.
    read_repeats: int = 7
    read_seconds: float = 8.0

    @classmethod
    def quick(cls) -> CatalogBenchConfig:
        """CI sizes: every phase runs, on tiny counts."""
        return replace(
            cls(), mode="quick", single_writer_appends=4, appends_per_writer=3, files=60,
            files_per_commit=20, tables=30, tables_per_commit=10,
            read_repeats=2, read_seconds=2.0,
        )

    def __post_init__(self) -> None:
        for name in ("append_rows", "single_writer_appends", "writers", "appends_per_writer", "max_attempts",
                     "files", "rows_per_file", "files_per_commit", "tables", "tables_per_commit",
                     "read_repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.files % self.files_per_commit or self.files // self.files_per_commit < 2:
            raise ValueError(
                f"files ({self.files}) must be a multiple of files_per_commit ({self.files_per_commit}) "
                "with at least two commits, so that an older version exists"
            )
