"""``lakekv lake URL begin | commit TXID | abort TXID | txs | locks NODE``: durable transactions from a shell.

``begin`` prints the new transaction's id, for a Spark session to join with
``SET spark.sql.catalog.<name>.transaction=<id>`` (or for the Python API's
``lake.attach(id)``); ``commit`` makes everything staged in it visible as one
lakehouse version and prints that version.

Registered into ``lakekv lake URL`` by :func:`add_durable_actions`, which
:mod:`catalog.cli` calls.
"""

from __future__ import annotations

import argparse
from typing import Any

import catalog
import kvstore
from catalog.durable.manager import TransactionManager
from catalog.durable.records import ACTIVE
from catalog.durable.work import wall_clock_ms

_OPTIONS: dict[str, Any] = {"poll_interval_s": 0, "background_maintenance": False}


def add_durable_actions(actions: Any) -> None:
    """Add ``begin``, ``commit TXID``, ``abort TXID``, ``txs`` and ``locks NODE`` to the ``lakekv lake URL`` actions (see catalog.cli)."""
    begin = actions.add_parser("begin", help="begin a durable transaction and print its id")
    begin.add_argument("--title", default=None, help="shown by txs")
    begin.add_argument(
        "--timeout", type=float, default=None, metavar="S",
        help="seconds it lives without being used or pinged (default: the store's, 60 s; capped by the store's maximum)",
    )
    begin.add_argument("--parent", default=None, metavar="TXID", help="begin it inside TXID (it commits into TXID)")
    begin.set_defaults(handler=_cmd_begin)
    commit = actions.add_parser("commit", help="commit transaction TXID; print the lakehouse version it made")
    commit.add_argument("txid", metavar="TXID")
    commit.set_defaults(handler=_cmd_commit)
    txs = actions.add_parser("txs", help="list transactions: id, state, title, age, deadline, locks")
    txs.add_argument("--all", action="store_true", help="include committed, aborted and expired ones")
    txs.set_defaults(handler=_cmd_txs)
    locks = actions.add_parser("locks", help="the locks on NODE in queue order")
    locks.add_argument("node", metavar="NODE")
    locks.set_defaults(handler=_cmd_locks)
    abort = actions.add_parser("abort", help="abort transaction TXID and its descendants")
    abort.add_argument("txid", metavar="TXID")
    abort.set_defaults(handler=_cmd_abort)


def _open(url: str) -> kvstore.Store:
    return kvstore.open_embedded(url, create=False, **_OPTIONS)


def _cmd_begin(args: argparse.Namespace) -> int:
    with _open(args.url) as store:
        record = TransactionManager(store).begin(timeout=args.timeout, parent=args.parent, title=args.title)
    print(record.id)
    return 0


def _cmd_commit(args: argparse.Namespace) -> int:
    # The topmost commit applies the staged catalog operations: that takes the lakehouse, not just the store.
    with catalog.open(args.url, create=False, **_OPTIONS) as lake:
        version = lake.attach(args.txid).commit()
    if version is None:
        print(f"committed {args.txid} into its parent transaction")
    else:
        print(f"committed {args.txid} at lakehouse version {version}")
    return 0


def _cmd_txs(args: argparse.Namespace) -> int:
    with _open(args.url) as store:
        manager = TransactionManager(store)
        records = manager.transactions(include_finished=args.all)
        now = wall_clock_ms()
        print("id\tstate\tparent\ttitle\tage_s\tdeadline_in_s\tlocks")
        for record in records:
            lock_count = len(manager.attach(record.id).locks()) if record.state == ACTIVE else 0
            deadline = f"{(record.deadline_ms - now) / 1000:.1f}" if record.state == ACTIVE else "-"
            print(
                f"{record.id}\t{record.state}\t{record.parent or '-'}\t{record.title or '-'}\t"
                f"{(now - record.start_ms) / 1000:.1f}\t{deadline}\t{lock_count}"
            )
    return 0


def _cmd_locks(args: argparse.Namespace) -> int:
    with _open(args.url) as store:
        print("txn\tmode\tkey\tstate\timplicit\tlock_id")
        for lock in TransactionManager(store).locks(args.node):
            key = "-" if lock.key is None else ("child:" if lock.child_key is not None else "attr:") + lock.key
            print(f"{lock.txn}\t{lock.mode}\t{key}\t{lock.state}\t{'yes' if lock.implicit else 'no'}\t{lock.id}")
    return 0


def _cmd_abort(args: argparse.Namespace) -> int:
    with _open(args.url) as store:
        TransactionManager(store).abort(args.txid)
    print(f"aborted {args.txid}")
    return 0
