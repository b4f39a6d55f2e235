"""One data file of a scan plan as the plugin's reader takes it (shared by plain and incremental scans)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from catalog.datafiles import DataFile


def planned_file(entry: DataFile) -> dict[str, Any]:
    """One file of a scan plan: path, size, rows and the checksums its JVM reader checks.

    ``footer_size`` and ``footer_crc32c``: the file's footer region (page
    indexes, footer, its length and magic), which the reader checks with
    one read at the end of the file before Spark reads the footer; the
    pages are then checked by their Parquet page checksums. ``crc32c``:
    the whole file's, checked whole by the reader only for a file from
    before footer checksums were recorded. A checksum the entry lacks is
    left out.
    """
    planned: dict[str, Any] = {"path": entry.path, "size": entry.size, "rows": entry.rows}
    if entry.footer_size is not None:
        planned["footer_size"] = entry.footer_size
        planned["footer_crc32c"] = entry.footer_crc32c
    elif entry.crc32c is not None:
        planned["crc32c"] = entry.crc32c
    return planned


def planned_files(plan: pa.Table) -> list[dict[str, Any]]:
    """:func:`planned_file` of every row of a plan table (``Table.files_table()``), read column by column.

    A scan of every file of a large table takes this: no ``DataFile`` per file.
    """
    out = []
    columns = [plan.column(name).to_pylist() for name in ("path", "size", "rows", "footer_size", "footer_crc32c", "crc32c")]
    for path, size, rows, footer_size, footer_crc32c, crc32c in zip(*columns):
        planned: dict[str, Any] = {"path": path, "size": size, "rows": rows}
        if footer_size is not None:
            planned["footer_size"] = footer_size
            planned["footer_crc32c"] = footer_crc32c
        elif crc32c is not None:
            planned["crc32c"] = crc32c
        out.append(planned)
    return out
