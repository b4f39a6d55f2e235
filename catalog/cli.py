"""``lakekv lake URL ACTION``: the lakehouse from the command line.

Actions: ``ls [NS]``, ``show TABLE``, ``history [--table T] [--limit N]``,
``create-namespace NS [--parents]``, ``drop NAME [--cascade] [--purge]``
(a table, view or namespace), ``compact TABLE [--target-mb N]``,
``gc [--dry-run] [--grace S]``, ``export DEST [--version N]``, ``verify``
(the store and every data file of every retained version; exit 1 if any
is bad), ``iceberg TABLE [--version N]`` (where the table's Iceberg
``metadata.json`` is: derived for a native table, see
:mod:`catalog.iceberg_derived`); plus the
durable-transaction actions of :mod:`catalog.durable.cli` (``txs``,
``locks``, ``abort``). Long work (compact, gc, export) draws a progress bar
on stderr. Exit codes as for every ``lakekv`` command: 0 ok, 1 the command
found a problem (no such object), 2 bad usage or a lakehouse that cannot be
opened.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

import catalog
from catalog import errors

# Short-lived handles: no follower, no maintenance threads.
_OPTIONS: dict[str, Any] = {"poll_interval_s": 0, "background_maintenance": False}


def add_lake_commands(commands: Any) -> None:
    """Add ``lake URL ACTION ...`` to the ``lakekv`` parser's subcommands.

    Raises:
        ModuleNotFoundError: a module that catalog.durable.cli imports is missing
            (a missing catalog.durable package only leaves its actions out).
    """
    lake = commands.add_parser("lake", help="the lakehouse catalog: ls, show, history, compact, gc, export, ...")
    lake.add_argument("url", metavar="URL", help="lakehouse URL: a path, file:///..., memory://name or s3://bucket/prefix")
    actions = lake.add_subparsers(dest="lake_command", required=True, metavar="ACTION")

    ls = actions.add_parser("ls", help="namespaces, tables and views (top level, or in NS)")
    ls.add_argument("namespace", metavar="NS", nargs="?")
    ls.set_defaults(handler=_missing_is_exit_1(_cmd_ls))

    show = actions.add_parser("show", help="a table: schema, partitioning, properties, files, rows")
    show.add_argument("table", metavar="TABLE")
    show.set_defaults(handler=_missing_is_exit_1(_cmd_show))

    hist = actions.add_parser("history", help="versions newest first with their operations")
    hist.add_argument("--table", metavar="T")
    hist.add_argument("--limit", type=_non_negative, default=20)
    hist.set_defaults(handler=_missing_is_exit_1(_cmd_history))

    create = actions.add_parser("create-namespace", help="create a namespace")
    create.add_argument("namespace", metavar="NS")
    create.add_argument("--parents", action="store_true", help="create missing parents too")
    create.set_defaults(handler=_missing_is_exit_1(_cmd_create_namespace))

    drop = actions.add_parser("drop", help="drop a table, view or namespace")
    drop.add_argument("name", metavar="NAME")
    drop.add_argument("--cascade", action="store_true", help="a namespace: drop everything in it")
    drop.add_argument("--purge", action="store_true", help="a table: let gc delete its files at once")
    drop.set_defaults(handler=_missing_is_exit_1(_cmd_drop))

    compact = actions.add_parser("compact", help="rewrite a table's small files into larger ones")
    compact.add_argument("table", metavar="TABLE")
    compact.add_argument("--target-mb", type=_positive, default=128)
    compact.set_defaults(handler=_missing_is_exit_1(_cmd_compact))

    gc = actions.add_parser("gc", help="delete data files no retained version references")
    gc.add_argument("--dry-run", action="store_true")
    gc.add_argument("--grace", type=float, default=None, metavar="S", help="orphan grace period (default: the store's)")
    gc.set_defaults(handler=_missing_is_exit_1(_cmd_gc))

    export = actions.add_parser("export", help="copy the lakehouse at a version to DEST (opens on its own)")
    export.add_argument("dest", metavar="DEST")
    export.add_argument("--version", type=_non_negative)
    export.set_defaults(handler=_missing_is_exit_1(_cmd_export))

    verify = actions.add_parser("verify", help="check the store and every data file of every retained version")
    verify.set_defaults(handler=_cmd_verify)

    iceberg = actions.add_parser("iceberg", help="a table's Iceberg metadata location (derived for a native table)")
    iceberg.add_argument("table", metavar="TABLE")
    iceberg.add_argument("--version", type=_non_negative, help="the lakehouse version (default the newest)")
    iceberg.set_defaults(handler=_missing_is_exit_1(_cmd_iceberg))

    try:
        from catalog.durable.cli import add_durable_actions
    except ModuleNotFoundError as exc:
        if exc.name not in ("catalog.durable", "catalog.durable.cli"):
            raise
    else:
        add_durable_actions(actions)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _open(url: str) -> catalog.Lakehouse:
    return catalog.open(url, create=False, **_OPTIONS)


def _missing_is_exit_1(handler: Any) -> Any:
    """A missing namespace/table/view is "the command found a problem": exit 1, one line."""

    def run(args: argparse.Namespace) -> int:
        import sys

        try:
            return int(handler(args))
        except errors.NoSuchObjectError as exc:
            print(f"lakekv lake: {exc}", file=sys.stderr)
            return 1

    return run


def _cmd_ls(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        if args.namespace is None:
            for ns in lake.list_namespaces():
                print(f"namespace\t{ns}")
            return 0
        for ns in lake.list_namespaces(args.namespace):
            print(f"namespace\t{ns}")
        for name in lake.list_tables(args.namespace):
            print(f"table\t{name}")
        for name in lake.list_views(args.namespace):
            print(f"view\t{name}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        t = lake.load_table(args.table)
        print(f"table\t{t.name}\nid\t{t.id}\nformat\t{t.format}\nlocation\t{t.location}")
        if t.format == "iceberg":
            print(f"metadata\t{t.metadata_location}")
        else:
            files = t.files()
            print(f"partition_by\t{', '.join(t.partition_by) or '-'}")
            print(f"files\t{len(files)}\nrows\t{sum(f.rows for f in files)}\nbytes\t{sum(f.size for f in files)}")
            print("schema:")
            for f in t.schema:
                print(f"  {f.name}\t{f.type}{'' if f.nullable else ' not null'}")
        for k, v in sorted(t.properties.items()):
            print(f"property\t{k}={v}")
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        for entry in lake.history(limit=args.limit, table=args.table):
            when = dt.datetime.fromtimestamp(entry.timestamp, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            for op in entry.operations:
                counts = {k: v for k, v in op.items() if k in ("files_added", "files_removed", "rows_added", "rows_removed") and v}
                detail = " ".join(f"{k}={v}" for k, v in counts.items())
                print(f"{entry.version}\t{when}\t{op.get('kind')}\t{op.get('object')}\t{detail}".rstrip())
    return 0


def _cmd_create_namespace(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        version = lake.create_namespace(args.namespace, parents=args.parents)
    print(f"created namespace {args.namespace} at version {version}")
    return 0


def _cmd_drop(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        if "." in args.name and lake.table_exists(args.name):
            version = lake.drop_table(args.name, purge=args.purge)
            what = "table"
        elif "." in args.name and lake.view_exists(args.name):
            version = lake.drop_view(args.name)
            what = "view"
        elif lake.namespace_exists(args.name):
            version = lake.drop_namespace(args.name, cascade=args.cascade)
            what = "namespace"
        else:
            raise errors.NoSuchObjectError(f"no table, view or namespace named {args.name!r}")
    print(f"dropped {what} {args.name} at version {version}")
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        report = lake.compact_table(args.table, target_file_bytes=args.target_mb << 20, progress=True)
    print(
        f"compacted {report.table}: {report.files_removed} files ({report.bytes_removed} bytes) -> "
        f"{report.files_added} files ({report.bytes_added} bytes), version {report.version}"
    )
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        report = lake.gc(dry_run=args.dry_run, grace_s=args.grace, progress=True)
    verb = "would delete" if report.dry_run else "deleted"
    print(
        f"{verb} {len(report.removed_files)} removed and {len(report.orphan_files)} orphaned data files "
        f"and {len(report.temp_files)} temp files of dead writers ({report.bytes_freed} bytes); {report.pending} removed files still reachable from retained versions "
        f"(floor version {report.floor_version})"
    )
    return 0


def _cmd_iceberg(args: argparse.Namespace) -> int:
    import sys

    from catalog import iceberg_derived
    from kvstore.errors import SnapshotTooOldError

    with _open(args.url) as lake:
        try:
            past = None if args.version is None else lake.at(version=args.version)
            table = (lake if past is None else past).load_table(args.table)
            if past is not None:
                past.close()
            if table.format == "parquet":
                print(iceberg_derived.derive(lake, args.table, args.version).metadata_location)
            else:
                print(table.metadata_location)
        except (ValueError, SnapshotTooOldError) as exc:
            print(f"lakekv lake: {exc}", file=sys.stderr)
            return 1
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        report = lake.verify()
    for problem in report.store.problems:
        print(f"store: {problem}")
    for bad in report.problems:
        print(f"data file {bad}")
    print(
        f"{'ok' if report.ok else 'PROBLEMS'}: versions {report.floor_version}..{report.head_version}, "
        f"{report.files_checked} data files ({report.bytes_checked} bytes) checked, "
        f"{report.unchecksummed} without a checksum (size and Parquet decode only), "
        f"{len(report.problems) + len(report.store.problems)} problems"
    )
    return 0 if report.ok else 1


def _cmd_export(args: argparse.Namespace) -> int:
    with _open(args.url) as lake:
        report = lake.export(args.dest, version=args.version, progress=True)
    print(json.dumps({"version": report.version, "dest": report.dest, "data_files": report.data_files,
                      "data_bytes": report.data_bytes}))
    return 0
