"""``lakekv lake URL begin | commit TXID | abort TXID | txs | locks NODE``."""

from __future__ import annotations

import pytest

import pyarrow as pa

import catalog
import kvstore
from catalog.durable import TransactionManager
from kvstore.cli import main


def test_txs_locks_abort(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with kvstore.open(store_url, poll_interval_s=0, background_maintenance=False) as store:
        manager = TransactionManager(store)
        tx = manager.begin(timeout=600, title="nightly load")
        tx.lock("sales.eu.orders", "shared", child_key="2024")
        other = manager.begin()
        other.lock("sales.eu.orders", "exclusive", waitable=True)
    assert main(["lake", store_url, "txs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split("\t") == ["id", "state", "parent", "title", "age_s", "deadline_in_s", "locks"]
    row = next(line.split("\t") for line in out if line.startswith(tx.id))
    assert row[1:4] == ["active", "-", "nightly load"] and row[6] == "1"
    assert 0 < float(row[5]) <= 600
    assert main(["lake", store_url, "locks", "sales.eu.orders"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[:4] for r in rows] == [[tx.id, "shared", "child:2024", "acquired"], [other.id, "exclusive", "-", "pending"]]
    assert main(["lake", store_url, "abort", tx.id]) == 0
    assert capsys.readouterr().out.strip() == f"aborted {tx.id}"
    assert main(["lake", store_url, "locks", "sales.eu.orders"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[:4] for r in rows] == [[other.id, "exclusive", "-", "acquired"]]
    assert main(["lake", store_url, "txs", "--all"]) == 0
    assert f"{tx.id}\taborted" in capsys.readouterr().out


def test_bad_arguments(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lake", store_url, "abort", "not-an-id"]) == 2
    assert "32 lowercase hex" in capsys.readouterr().err
    assert main(["lake", store_url, "locks", "a/b"]) == 2
    assert "forbidden character" in capsys.readouterr().err


def test_begin_and_commit_make_staged_writes_one_version(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path) + "/lake"
    with catalog.open(url) as lake:
        lake.create_namespace("s")
        lake.create_table("s.a", pa.schema([("id", pa.int64())]))
    assert main(["lake", url, "begin", "--title", "nightly", "--timeout", "600"]) == 0
    txid = capsys.readouterr().out.strip()
    with catalog.open(url) as lake:
        before = lake.version
        tx = lake.attach(txid)
        tx.load_table("s.a").append(pa.table({"id": [1, 2]}))
        tx.create_table("s.b", pa.schema([("id", pa.int64())]))
        assert lake.load_table("s.a").scan().to_arrow().num_rows == 0 and not lake.table_exists("s.b")
    assert main(["lake", url, "commit", txid]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"committed {txid} at lakehouse version ")
    version = int(out.rsplit(" ", 1)[1])
    with catalog.open(url) as lake:
        # History, not lake.version: background flushes make versions with no catalog commit.
        assert [h.version for h in lake.history(limit=None) if h.version > before] == [version]
        assert lake.load_table("s.a").scan().to_arrow().num_rows == 2 and lake.table_exists("s.b")
    assert main(["lake", url, "commit", txid]) == 2
    assert "already committed" in capsys.readouterr().err
    assert main(["lake", url, "begin", "--timeout", "-1"]) == 2
    assert "timeout must be a positive number" in capsys.readouterr().err
    assert main(["lake", url, "begin", "--parent", "nope"]) == 2
    assert "32 lowercase hex" in capsys.readouterr().err
