"""The ``lakekv`` command line.

One small function per subcommand (``_cmd_<name>``), registered in
:func:`build_parser`; each returns the process exit code. Keys and values are
UTF-8 text on the command line, or hex with ``--hex``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone

import kvstore
from kvstore.chain import VersionChain
from kvstore.demo import run_demo
from kvstore.doctor import run_doctor
from kvstore.errors import CorruptionError, StoreError
from kvstore.format.root import parse_root_path, root_path
from kvstore.objstore import open_store
from kvstore.verify import verify_store

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and found a problem (e.g. an unsafe store)
EXIT_USAGE = 2  # bad arguments or a store that cannot be opened (argparse uses 2 too)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.threads < 1 or args.rounds < 1:
        print("lakekv doctor: --threads and --rounds must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    safe = run_doctor(
        args.url, threads=args.threads, processes=args.processes, rounds=args.rounds, samples=args.samples
    )
    return EXIT_OK if safe else EXIT_FAILED


# -- engine commands -----------------------------------------------------------


def _encode(text: str, hex_mode: bool) -> bytes:
    if not hex_mode:
        return text.encode("utf-8")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"--hex: {text!r} is not hex (two hex digits per byte, e.g. 00ff)") from None


# Control characters (tab and newline included: they separate fields and
# lines) are printed escaped, like invalid UTF-8.
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]}


def _decode(data: bytes, hex_mode: bool) -> str:
    r"""Text for one key or value: hex, or UTF-8 with everything ambiguous escaped.

    A literal backslash is doubled, so the key ``b"\\xff"`` (four
    characters) and the key ``b"\xff"`` (one invalid byte) print differently.

    >>> _decode(b"a\\xff", False), _decode(b"a\xff", False), _decode(b"a\tb", False)
    ('a\\\\xff', 'a\\xff', 'a\\x09b')
    """
    if hex_mode:
        return data.hex()
    # 0x5C never occurs inside a multi-byte UTF-8 sequence: safe to double first.
    text = data.replace(b"\\", b"\\\\").decode("utf-8", errors="backslashreplace")
    return text.translate(_ESCAPES)


def _open_existing(url: str) -> kvstore.Store:
    return kvstore.open_embedded(url, create=False, poll_interval_s=0)


def _cmd_put(args: argparse.Namespace) -> int:
    with kvstore.open(args.url, poll_interval_s=0) as db:
        seq = db.put(_encode(args.key, args.hex), _encode(args.value, args.hex), ttl=args.ttl)
        print(f"committed at version {db.version}, seq {seq}")
    return EXIT_OK


def _cmd_get(args: argparse.Namespace) -> int:
    with _open_existing(args.url) as db:
        value = db.get(_encode(args.key, args.hex))
    if value is None:
        print(f"lakekv get: key {args.key!r} not found", file=sys.stderr)
        return EXIT_FAILED
    print(_decode(value, args.hex))
    return EXIT_OK


def _cmd_delete(args: argparse.Namespace) -> int:
    with _open_existing(args.url) as db:
        seq = db.delete(_encode(args.key, args.hex))
        print(f"deleted at version {db.version}, seq {seq}")
    return EXIT_OK


def _cmd_scan(args: argparse.Namespace) -> int:
    def opt(text: str | None) -> bytes | None:
        return None if text is None else _encode(text, args.hex)

    with _open_existing(args.url) as db:
        rows = db.scan(opt(args.start), opt(args.end), opt(args.prefix), args.reverse, args.limit)
        for key, value in rows:
            print(f"{_decode(key, args.hex)}\t{_decode(value, args.hex)}")
    return EXIT_OK


def _cmd_info(args: argparse.Namespace) -> int:
    with _open_existing(args.url) as db:
        sizes: dict[str, list[int]] = {}
        for meta in db.objects.list():
            if parse_root_path(meta.path) is not None:
                kind = "roots"
            else:
                kind = meta.path.split("/", 1)[0] if "/" in meta.path else "metadata"
            sizes.setdefault(kind, []).append(meta.size)
        stats = db.stats()
        print(f"store      {db.url}")
        print(f"version    {db.version}")
        print(f"seq        {db.seq}")
        print(f"memtable   {stats['memtable_keys']} keys, {stats['memtable_rows']} rows (unflushed versions)")
        print(f"tree       {stats['tree'] or '(none: nothing flushed yet)'}")
        for kind in sorted(sizes):
            print(f"{kind:<10} {len(sizes[kind])} objects, {sum(sizes[kind]):,} bytes")
    return EXIT_OK


def _cmd_log(args: argparse.Namespace) -> int:
    with _open_existing(args.url) as db:
        chain = VersionChain(db.objects)
        newest = db.version
        oldest = 0 if args.all else newest - args.limit + 1
        print("version  committed (storage time)        seqs            rows  writer")
        for version in range(newest, max(0, oldest) - 1, -1):
            root = chain.try_read_root(version)
            if root is None:
                print(f"{version:>7}  (removed by retention)")
                continue
            mtime = db.objects.head(root_path(version)).mtime
            when = datetime.fromtimestamp(mtime, tz=timezone.utc).isoformat(timespec="milliseconds")
            seqs = f"{root.first_seq}..{root.last_seq}" if root.last_seq >= root.first_seq else "-"
            rows = root.delta_sst["row_count"] if root.delta_sst else root.delta_row_count
            print(f"{version:>7}  {when:<30}  {seqs:<14}  {rows:>5}  {root.writer_id[:12]}")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(args.url, sys.stdout)


def _cmd_bench(args: argparse.Namespace) -> int:
    # The harness lives in the source tree (benchmarks/harness), not in the
    # installed package: it needs the peers of the "bench" extra and a checkout.
    from pathlib import Path

    benchmarks = Path(kvstore.__file__).resolve().parent.parent / "benchmarks"
    if not (benchmarks / "harness" / "run.py").is_file():
        print(f"lakekv bench: needs a source checkout; no benchmark harness at {benchmarks}", file=sys.stderr)
        return EXIT_USAGE
    sys.path.insert(0, str(benchmarks))
    from harness.run import main as run_bench

    return int(run_bench((["--quick"] if args.quick else []) + ([f"--out={args.out}"] if args.out else [])))


# -- maintenance commands (kvstore.housekeeping, kvstore.timetravel) ---------------------------------

_MIB = 1024 * 1024


def _open_for_maintenance(url: str, **options: object) -> kvstore.Store:
    # No background threads: the command does the work in the foreground.
    return kvstore.open_embedded(url, create=False, poll_interval_s=0, background_maintenance=False, **options)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops `lakekv compact` as cleanly as Ctrl-C


def _cmd_compact(args: argparse.Namespace) -> int:
    if args.full and not args.once:
        print("lakekv compact: --full needs --once (a full compaction is a one-off)", file=sys.stderr)
        return EXIT_USAGE
    if not args.once:
        # Continuous: a handle whose background threads follow the chain,
        # flush and compact (and GC, if asked) until interrupted.
        options = {"poll_interval_s": args.interval, "gc_interval_s": args.gc_interval}
        signal.signal(signal.SIGTERM, _interrupt)
        with kvstore.open(args.url, create=False, **options) as db:
            print(f"lakekv compact: maintaining {db.url}; Ctrl-C to stop", file=sys.stderr)
            try:
                while True:
                    time.sleep(max(args.interval, 1.0))
            except KeyboardInterrupt:
                print(f"lakekv compact: stopped; {db.maintenance_stats()}", file=sys.stderr)
        return EXIT_OK
    with _open_for_maintenance(args.url) as db:
        flushed = db.flush()
        if flushed is not None:
            print(f"flushed versions up to {flushed.flushed_upto}")
        results = db.compact(full=args.full)
        for result in results:
            print(
                f"compacted ({result.reason}): {result.inputs} SSTs, {result.bytes_read / _MIB:.1f} MiB -> "
                f"{result.outputs} SSTs, {result.bytes_written / _MIB:.1f} MiB in {result.seconds:.2f} s"
            )
        if not results:
            print("nothing to compact")
    return EXIT_OK


def _cmd_gc(args: argparse.Namespace) -> int:
    with _open_for_maintenance(args.url) as db:
        report = db.gc(dry_run=args.dry_run)
    verb = "would delete" if report.dry_run else "deleted"
    print(f"retention floor: seq {report.floor.seq} (version {report.floor.version}, set by {report.floor.reason})")
    print(
        f"{verb} {len(report.deleted_roots)} root files, {len(report.deleted_trees)} trees, "
        f"{len(report.deleted_ssts)} SSTs, {len(report.deleted_temp_files)} temp files "
        f"({report.bytes_freed / _MIB:.1f} MiB); "
        f"oldest version kept: {report.oldest_kept}; {report.live_files} live files"
    )
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    with _open_for_maintenance(args.url) as db:
        try:
            report = db.export(args.dest, version=args.version, progress=True)
        except CorruptionError as exc:
            print(f"lakekv export: the source is corrupt; nothing usable was exported: {exc}", file=sys.stderr)
            return EXIT_FAILED
    print(
        f"exported version {report.version} (roots {report.oldest_version}..{report.version}) to {args.dest}: "
        f"{report.files} files, {report.bytes / _MIB:.1f} MiB"
    )
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    objects = open_store(args.url, create=False)
    try:
        if next(iter(objects.list("_")), None) is None:
            raise FileNotFoundError(f"no lakekv store at {objects.url}")
        report = verify_store(objects)
    finally:
        objects.close()
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    print(
        f"checked versions {report.oldest_version}..{report.latest_version}: {report.roots_checked} roots, "
        f"{report.trees_checked} trees, {report.ssts_checked} SSTs ({report.bytes_checked / _MIB:.1f} MiB); "
        f"{len(report.unreferenced)} unreferenced files (GC removes them)"
    )
    print("ok" if report.ok else f"{len(report.problems)} problem(s)")
    return EXIT_OK if report.ok else EXIT_FAILED


def _cmd_serve(args: argparse.Namespace) -> int:
    from service.cli import run_serve  # the server's dependencies load only for `serve`

    return run_serve(args)


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="lakekv", description="lakekv: a key-value store on object storage")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    doctor = commands.add_parser(
        "doctor", help="check that a store's conditional create is safe and measure its latency"
    )
    doctor.add_argument("url", metavar="URL", help="store URL: a path, file:///..., memory://name or s3://bucket/prefix")
    doctor.add_argument("--threads", type=_non_negative, default=8, help="racing threads per round (default 8)")
    doctor.add_argument("--processes", type=_non_negative, default=4, help="racing processes per round, 0 to skip (default 4)")
    doctor.add_argument("--rounds", type=_non_negative, default=20, help="race rounds (default 20)")
    doctor.add_argument("--samples", type=_non_negative, default=200, help="ops per latency figure, 0 to skip (default 200)")
    doctor.set_defaults(handler=_cmd_doctor)

    def url_command(name: str, help_text: str, handler: object) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("url", metavar="URL", help="store URL: a path, file:///..., memory://name or s3://bucket/prefix")
        sub.set_defaults(handler=handler)
        return sub

    put = url_command("put", "durably set KEY to VALUE", _cmd_put)
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    put.add_argument("--ttl", type=float, help="seconds until the value expires")
    get = url_command("get", "print the value of KEY (exit 1 if absent)", _cmd_get)
    get.add_argument("key", metavar="KEY")
    delete = url_command("delete", "durably delete KEY", _cmd_delete)
    delete.add_argument("key", metavar="KEY")
    scan = url_command("scan", "print KEY<TAB>VALUE lines in key order", _cmd_scan)
    scan.add_argument("--start", help="first key (inclusive)")
    scan.add_argument("--end", help="last key (exclusive)")
    scan.add_argument("--prefix", help="only keys with this prefix")
    scan.add_argument("--reverse", action="store_true", help="descending key order")
    scan.add_argument("--limit", type=_non_negative, help="at most this many rows")
    for sub in (put, get, delete, scan):
        sub.add_argument("--hex", action="store_true", help="keys and values are hex, not UTF-8 text")
    url_command("info", "version, seq, objects and sizes of a store", _cmd_info)
    log = url_command("log", "one line per version, newest first", _cmd_log)
    log.add_argument("--limit", type=_non_negative, default=20, help="at most this many versions (default 20)")
    log.add_argument("--all", action="store_true", help="every version that retention kept")
    demo = commands.add_parser("demo", help="a short tour: write, read, snapshot, scan, reopen")
    demo.add_argument("url", metavar="URL", nargs="?", default="./data/demo", help="store URL (default ./data/demo)")
    demo.set_defaults(handler=_cmd_demo)
    bench = commands.add_parser("bench", help="benchmark lakekv against LMDB, RocksDB, SQLite and SlateDB")
    bench.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes)")
    bench.add_argument("--out", metavar="DIR", help="where to write results (default benchmarks/results)")
    bench.set_defaults(handler=_cmd_bench)
    compact = url_command("compact", "flush and compact a store (continuously, or --once)", _cmd_compact)
    compact.add_argument("--once", action="store_true", help="flush and compact once, then exit")
    compact.add_argument("--full", action="store_true", help="with --once: merge everything into one run")
    compact.add_argument("--interval", type=float, default=1.0, help="seconds between looks at the chain (default 1)")
    compact.add_argument("--gc-interval", type=float, default=600.0, help="seconds between GC passes, 0 for none (default 600)")
    gc = url_command("gc", "delete files and root files retention no longer needs", _cmd_gc)
    gc.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    export = url_command("export", "copy one version and all it needs to an empty store at DEST", _cmd_export)
    export.add_argument("dest", metavar="DEST", help="destination store URL (must be empty)")
    export.add_argument("--version", type=_non_negative, help="version to export (default: the latest)")
    url_command("verify", "read every live file; check checksums and references (exit 1 on problems)", _cmd_verify)
    _add_catalog_commands(commands)
    serve = commands.add_parser("serve", help="serve the lakehouse over HTTP: Iceberg REST + KV API (`server` extra)")
    from service.cli import add_serve_arguments  # argument definitions only: no server imports

    add_serve_arguments(serve)
    serve.set_defaults(handler=_cmd_serve)
    return parser


def _add_catalog_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``lakekv lake ...`` lives in the catalog package; the engine works without it."""
    try:
        from catalog.cli import add_lake_commands
    except ModuleNotFoundError as exc:
        if exc.name not in ("catalog", "catalog.cli"):
            raise
        return
    add_lake_commands(commands)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except (ValueError, ImportError, StoreError, FileNotFoundError) as exc:
        # Bad URL, missing optional dependency, unreachable store: one line,
        # not a traceback.
        print(f"lakekv {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
