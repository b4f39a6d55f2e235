"""Scale benchmark, catalog-size part: how creating, listing and loading tables grow with the table count.

Each system's catalog grows to each checkpoint size (10k and 100k tables by
default) in 1,000 namespaces: namespace ``big`` takes the first 10,000
tables, the rest are spread evenly over ``ns001`` .. ``ns999``. So the listed
namespace holds 10,000 tables at every size, and a listing or a load that
grows from one size to the next grows with the rest of the catalog, which
it should not read. At each size:

- **create**: tables per second while the catalog grew to this size, by the
  cheapest path the system offers (``System.create_tables``: lakekv one
  ``lake.transaction()`` per ``--per-commit`` tables, DuckLake one SQL
  transaction, pyiceberg its metadata writer and one catalog-row insert per
  commit; see ``benchmarks/lakehouse``), and the p50 of one ``create_table``
  committed on its own (``--single-creates`` of them, in namespace ``ns001``);
- **list 10,000**: list namespace ``big`` (median of ``--repeats``, min-max);
- **load one**: look one table up by name and read its definition (lakekv
  ``load_table``, pyiceberg ``load_table``, DuckLake ``DESCRIBE``).

And two large transactions, each on a fresh catalog:

- **10,000 creates in one transaction** (it must commit: lakekv checks one
  new lakehouse version and 10,000 listed tables);
- **100,000 files in one commit** to one table, grown by steps (10k, then
  100k files): lakekv's ``Table.commit_files`` of entries whose statistics a
  writer computed (each file a placeholder object, as in
  ``scale_bench.py``: the commit HEADs every file), the peers' own
  registration of existing Parquet files (DuckLake
  ``ducklake_add_data_files``, pyiceberg ``Table.add_files``; both read each
  file's footer). Writing the files is not timed.

lakekv, DuckLake and pyiceberg's SQL catalog run as ``catalog_bench.py``
runs them, on local disk. Each peer builds until ``--peer-limit-s`` seconds
of building have passed and is reported as giving up at the size it reached.

Run: ``.venv/bin/python benchmarks/scale_tables.py [--sizes 10000,100000]
[--systems lakekv,ducklake,pyiceberg] [--files 10000,100000] [--out DIR]``;
writes ``scale_tables.json`` under ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalog  # noqa: E402
from catalog.datafiles import DataFile, new_file_id  # noqa: E402
from catalog.schema import field_id  # noqa: E402
from lakehouse.data import SCHEMA, file_contents  # noqa: E402
from lakehouse.system import System, make_system  # noqa: E402
from results_file import run_header, write_results  # noqa: E402
from repeat_timer import timed  # noqa: E402

NAMESPACES = 1_000
LISTED = "big"
LISTED_TABLES = 10_000
FILE_ROWS = 4
Log = Callable[[str], None]


def namespace_names() -> list[str]:
    """``big`` and the 999 others, ``ns001`` .. ``ns999``."""
    return [LISTED] + [f"ns{i:03d}" for i in range(1, NAMESPACES)]


def table_names(first: int, last: int) -> list[str]:
    """The names of tables ``first`` .. ``last - 1`` of the catalog (see the module docstring)."""
    out = []
    for i in range(first, last):
        if i < LISTED_TABLES:
            out.append(f"{LISTED}.t{i:06d}")
        else:
            j = i - LISTED_TABLES
            out.append(f"ns{1 + j % (NAMESPACES - 1):03d}.t{j:06d}")
    return out




# -- what the System interface lacks: a load, and a commit of existing files --------


def load_one(system: System, name: str) -> Callable[[], Any]:
    """Look ``name`` up and read its definition, as a query planner would first."""
    key = system.key
    if key == "lakekv":
        lake = system.lake  # type: ignore[attr-defined]
        return lambda: len(lake.load_table(name).schema)
    if key == "pyiceberg":
        cat = system.catalog  # type: ignore[attr-defined]
        return lambda: len(cat.load_table(name).schema().fields)
    if key == "ducklake":
        con = system.con  # type: ignore[attr-defined]
        namespace, table = name.split(".")
        return lambda: len(con.execute(f'DESCRIBE lake."{namespace}"."{table}"').fetchall())
    raise ValueError(f"no load for system {key!r}")


class FileCommit:
    """One table grown by single commits of many existing files; only the commit is timed."""

    def __init__(self, system: System, root: Path) -> None:
        self.system = system
        self.root = root
        self.files = 0
        system.create_namespace("files")
        system.create_table("files.t")
        if system.key == "lakekv":
            table = system.lake.load_table("files.t")  # type: ignore[attr-defined]
            self.table = table
            self.ids = {f.name: str(field_id(f)) for f in table.schema}

    def commit(self, count: int) -> float:
        """Add ``count`` new files in one commit; returns the commit's seconds."""
        first = self.files
        if self.system.key == "lakekv":
            entries = self._lakekv_entries(first, count)
            start = time.perf_counter()
            self.table.commit_files(entries)
        else:
            folder = self.root / "incoming" / f"from{first:07d}"
            folder.mkdir(parents=True)
            paths = []
            for i in range(first, first + count):
                path = folder / f"f{i:07d}.parquet"
                pq.write_table(file_contents(i, FILE_ROWS, seed=3), path)
                paths.append(path)
            start = time.perf_counter()
            if self.system.key == "ducklake":
                self.system.con.execute(  # type: ignore[attr-defined]
                    "CALL ducklake_add_data_files(?, ?, ?, schema => ?)", ["lake", "t", f"{folder}/*.parquet", "files"]
                )
            else:
                self.system.catalog.load_table("files.t").add_files([f"file://{p}" for p in paths])  # type: ignore[attr-defined]
        seconds = time.perf_counter() - start
        self.files += count
        return seconds

    def _lakekv_entries(self, first: int, count: int) -> list[DataFile]:
        objects = self.system.lake.objects  # type: ignore[attr-defined]
        entries = []
        for i in range(first, first + count):
            fid = new_file_id()
            path = f"{self.table.location}/{fid}.parquet"
            objects.put(path, b"")  # a placeholder: the commit HEADs it; nothing reads it
            lo = i * FILE_ROWS
            entries.append(DataFile(
                id=fid, path=path, size=0, rows=FILE_ROWS, partition={},
                stats={
                    self.ids["id"]: [lo, lo + FILE_ROWS - 1, 0],
                    self.ids["amount"]: [0.0, 999.0, 0],
                    self.ids["tag"]: ["t0", "t99", 0],
                },
            ))
        return entries

    def count(self) -> int:
        """Live files of the table, as the system plans them (the commit's check)."""
        return self.system.plan("files.t", None, None)


# -- the runs ------------------------------------------------------------------------------


def run_catalog(
    key: str, root: Path, sizes: list[int], per_commit: int, repeats: int, single_creates: int,
    limit_s: float | None, log: Log,
) -> dict[str, Any]:
    """Grow ``key``'s catalog through ``sizes``, measuring at each."""
    system = make_system(key, root)
    system.open()
    results: dict[str, Any] = {"label": system.label, "sizes": {}, "gave_up_at": None, "build_s": 0.0}
    try:
        for ns in namespace_names():
            system.create_namespace(ns)
        tables = 0
        probes = 0
        for size in sizes:
            start = time.perf_counter()
            while tables < size:
                spent = results["build_s"] + time.perf_counter() - start
                if limit_s is not None and spent > limit_s:
                    results["build_s"] = spent
                    results["gave_up_at"] = tables
                    log(f"{key}: gave up building at {tables:,} tables after {spent:.0f} s")
                    return results
                step = min(per_commit, size - tables)
                system.create_tables(table_names(tables, tables + step), step)
                tables += step
            grew = time.perf_counter() - start
            results["build_s"] += grew
            first = sizes[sizes.index(size) - 1] if sizes.index(size) else 0
            listed = timed(lambda: system.list_tables(LISTED), repeats)
            if listed["result"] != LISTED_TABLES:
                raise AssertionError(f"{key} listed {listed['result']} tables in {LISTED}, not {LISTED_TABLES}")
            singles = []
            for _ in range(single_creates):
                name = f"ns001.single{probes:05d}"
                probes += 1
                t0 = time.perf_counter()
                system.create_table(name)
                singles.append((time.perf_counter() - t0) * 1000)
            measured = {
                "create_per_s": (size - first) / grew if grew > 0 else None,
                "create_one_ms": {"ms": statistics.median(singles), "min_ms": min(singles), "max_ms": max(singles)},
                "list": listed,
                "load": timed(load_one(system, f"{LISTED}.t{LISTED_TABLES // 2:06d}"), repeats),
            }
            results["sizes"][str(size)] = measured
            log(f"{key} @ {size:,} tables: {measured['create_per_s']:.0f} creates/s, create one "
                f"{measured['create_one_ms']['ms']:.1f} ms, list {LISTED_TABLES:,} {listed['ms']:.1f} ms, "
                f"load {measured['load']['ms']:.2f} ms")
        notes = system.notes().get("create_tables")
        if notes:
            results["notes"] = notes
    finally:
        system.close()
    return results


def run_create_transaction(key: str, root: Path, count: int, log: Log) -> dict[str, Any]:
    """One transaction (one commit) creating ``count`` tables in a fresh catalog."""
    system = make_system(key, root)
    system.open()
    try:
        system.create_namespace("tx")
        names = [f"tx.t{i:06d}" for i in range(count)]
        before = system.lake.version if key == "lakekv" else None  # type: ignore[attr-defined]
        start = time.perf_counter()
        system.create_tables(names, count)
        seconds = time.perf_counter() - start
        listed = system.list_tables("tx")
        if listed != count:
            raise AssertionError(f"{key}: {listed} tables after a {count}-table transaction")
        result: dict[str, Any] = {"tables": count, "s": seconds, "committed": True}
        if key == "lakekv":
            result["versions"] = system.lake.version - before  # type: ignore[attr-defined, operator]
            if result["versions"] != 1:
                raise AssertionError(f"lakekv: {count} creates made {result['versions']} versions, not one")
        notes = system.notes().get("create_tables")
        if notes:
            result["notes"] = notes
        log(f"{key}: {count:,} creates in one transaction: {seconds:.2f} s")
        return result
    finally:
        system.close()


def run_file_commits(key: str, root: Path, steps: list[int], limit_s: float | None, log: Log) -> dict[str, Any]:
    """Commit ``steps`` files at a time to one table, one commit per step, until the limit."""
    system = make_system(key, root)
    system.open()
    out: dict[str, Any] = {"commits": [], "gave_up_at": None}
    spent = 0.0
    try:
        grower = FileCommit(system, root)
        for count in steps:
            if limit_s is not None and spent > limit_s:
                out["gave_up_at"] = count
                log(f"{key}: gave up before a {count:,}-file commit after {spent:.0f} s")
                break
            t0 = time.perf_counter()
            seconds = grower.commit(count)
            spent += time.perf_counter() - t0
            out["commits"].append({"files": count, "s": seconds, "table_files": grower.files})
            log(f"{key}: one commit of {count:,} files: {seconds:.2f} s ({grower.files:,} in the table)")
        live = grower.count()
        if live != grower.files:
            raise AssertionError(f"{key}: {live} live files after committing {grower.files}")
    finally:
        system.close()
    return out


def _ms(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "n/a"
    return f"{cell['ms']:.1f} ({cell['min_ms']:.1f}–{cell['max_ms']:.1f})"


def markdown(results: dict[str, Any]) -> str:
    """The results as three tables: the growing catalog, the 10k-create transaction, the file commits."""
    lines = [
        f"Catalog of N tables in {NAMESPACES:,} namespaces; listed namespace: {LISTED_TABLES:,} tables. "
        "Times in ms, median (min–max).",
        "",
        "| tables | system | creates/s (bulk) | create one, p50 | list 10,000 | load one | list ÷ best peer |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    systems = results["catalog"]
    for size in results["sizes"]:
        peers = [r["sizes"][str(size)]["list"]["ms"] for k, r in systems.items()
                 if k != "lakekv" and str(size) in r["sizes"]]
        for key, r in systems.items():
            m = r["sizes"].get(str(size))
            if m is None:
                if r["gave_up_at"] is not None and r["gave_up_at"] < size:
                    lines.append(f"| {size:,} | {r['label']} | gave up at {r['gave_up_at']:,} tables "
                                 f"({r['build_s']:.0f} s) | | | | |")
                continue
            ratio = f"{m['list']['ms'] / min(peers):.2f}×" if key == "lakekv" and peers else ""
            lines.append(
                f"| {size:,} | {r['label']} | {m['create_per_s']:,.0f} | {_ms(m['create_one_ms'])} | "
                f"{_ms(m['list'])} | {_ms(m['load'])} | {ratio} |"
            )
    if results.get("create_transaction"):
        lines += ["", "| one transaction | system | seconds | committed |", "|---|---|---:|---|"]
        for key, r in results["create_transaction"].items():
            label = systems.get(key, {}).get("label", key)
            if "error" in r:
                lines.append(f"| creates | {label} | failed: {r['error']} | no |")
            else:
                lines.append(f"| {r['tables']:,} creates | {label} | {r['s']:.2f} | yes |")
    if results.get("file_commits"):
        lines += ["", "| one commit of | system | seconds | files in the table after |", "|---:|---|---:|---:|"]
        for key, r in results["file_commits"].items():
            label = systems.get(key, {}).get("label", key)
            for c in r["commits"]:
                lines.append(f"| {c['files']:,} files | {label} | {c['s']:.2f} | {c['table_files']:,} |")
            if r["gave_up_at"] is not None:
                lines.append(f"| {r['gave_up_at']:,} files | {label} | gave up (time limit) | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="catalog sizes (tables) measured at")
    parser.add_argument("--systems", default="lakekv,ducklake,pyiceberg")
    parser.add_argument("--per-commit", type=int, default=10_000, help="tables per transaction while growing")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--single-creates", type=int, default=20)
    parser.add_argument("--transaction-tables", type=int, default=10_000)
    parser.add_argument("--files", default="10000,100000", help="file counts of the successive one-commit steps")
    parser.add_argument("--peer-limit-s", type=float, default=300.0, help="seconds of building each peer gets per part")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--dir", default=None, help="where the catalogs are built (default: a temporary directory)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if sizes[0] < LISTED_TABLES:
        parser.error(f"every size must be at least {LISTED_TABLES} (the listed namespace's tables)")
    steps = [int(s) for s in args.files.split(",") if s]
    keys = args.systems.split(",")
    results = run_header(sizes=sizes, catalog={}, create_transaction={}, file_commits={})

    def log(line: str) -> None:
        print(line, flush=True)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for key in keys:
            limit = None if key == "lakekv" else args.peer_limit_s
            results["catalog"][key] = run_catalog(
                key, Path(tmp) / "catalog" / key, sizes, args.per_commit, args.repeats, args.single_creates, limit, log
            )
            try:
                results["create_transaction"][key] = run_create_transaction(
                    key, Path(tmp) / "tx" / key, args.transaction_tables, log
                )
            except Exception as exc:  # a peer that cannot do it is reported, not fatal
                results["create_transaction"][key] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            if steps:
                results["file_commits"][key] = run_file_commits(key, Path(tmp) / "files" / key, steps, limit, log)
    write_results(args.out, "scale_tables", results)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
