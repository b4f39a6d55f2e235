"""Leases (kvstore.leases): keys that live as long as their lease, for every reader and process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import kvstore
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET


class Elsewhere:
    """Another process with the store open, reading keys when asked: ``read(keys)`` ->
    ``(values, its clock in ms just before and just after the reads)``. Started once, so a read costs no
    interpreter start-up (which on a loaded machine can outlast a short lease)."""

    def __init__(self, url: str) -> None:
        code = (
            "import kvstore, sys, time\n"
            f"with kvstore.open({url!r}, create=False, poll_interval_s=0, background_maintenance=False) as db:\n"
            "    print('ready', flush=True)\n"
            "    for line in sys.stdin:\n"
            "        keys = eval(line)\n"
            "        before = time.time() * 1000\n"
            "        values = [db.get(k) for k in keys]\n"
            "        print(repr((values, before, time.time() * 1000)), flush=True)\n"
        )
        self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None and self._proc.stdout.readline().strip() == "ready"

    def read(self, keys: list[bytes]) -> tuple[list[bytes | None], float, float]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(repr(keys) + "\n")
        self._proc.stdin.flush()
        return eval(self._proc.stdout.readline())  # type: ignore[no-any-return]  # noqa: S307 - our own repr

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        assert self._proc.wait(60) == 0


def expire_ms(db: kvstore.Store, key: bytes) -> int | None:
    with db.transaction() as txn:
        return txn.expires_at(key)


def test_keys_vanish_for_every_process_when_their_lease_expires(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, **QUIET) as db:
        elsewhere = Elsewhere(url)
        lease = db.grant_lease(0.5)
        db.put(b"svc/a", b"1", lease=lease.id)
        db.put(b"svc/b", b"2", lease=lease.id)
        deadline = expire_ms(db, b"svc/a")
        assert deadline is not None and deadline == expire_ms(db, b"svc/b")
        values, before_ms, after_ms = elsewhere.read([b"svc/a", b"svc/b"])
        # What the other process must see depends only on when it read, by its clock.
        if after_ms < deadline:
            assert values == [b"1", b"2"]
        elif before_ms >= deadline:
            assert values == [None, None]
        else:  # read across the expiry: each key either way
            assert all(v in (None, expected) for v, expected in zip(values, [b"1", b"2"]))
        while time.time() * 1000 <= deadline + 50:  # wait out the lease (no keepalive)
            time.sleep(0.05)
        assert [db.get(b"svc/a"), db.get(b"svc/b")] == [None, None]
        assert elsewhere.read([b"svc/a", b"svc/b"])[0] == [None, None]
        elsewhere.close()
        with pytest.raises(kvstore.LeaseNotFoundError):
            lease.keepalive()
        with pytest.raises(kvstore.LeaseNotFoundError):
            db.put(b"svc/c", b"3", lease=lease.id)
        assert db.get(b"svc/c") is None


def test_keepalive_moves_the_expiry_of_the_keys_still_attached(tmp_path: Path) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        lease = db.grant_lease(30)
        db.put(b"a", b"1", lease=lease.id)
        db.put(b"b", b"2", lease=lease.id)
        db.put(b"b", b"plain")  # a put without the lease takes b away from it
        other = db.grant_lease(60)
        db.put(b"c", b"3", lease=lease.id)
        db.put(b"c", b"4", lease=other.id)  # and so does a put with another lease
        before = expire_ms(db, b"a")
        time.sleep(0.01)
        assert lease.keepalive() > 29
        after = expire_ms(db, b"a")
        assert before is not None and after is not None and after > before
        assert expire_ms(db, b"b") is None and db.get(b"b") == b"plain"
        assert expire_ms(db, b"c") != after and db.get(b"c") == b"4"
        assert lease.keys() == [b"a"] and other.keys() == [b"c"]


def test_revoke_deletes_the_lease_keys_in_one_commit_seen_by_a_watch(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, **QUIET) as db:
        lease = db.grant_lease(60)
        db.put(b"svc/a", b"1", lease=lease.id)
        db.put(b"svc/b", b"2", lease=lease.id)
        start = db.version + 1
        with kvstore.open(url, **QUIET) as other:  # any handle, any process can revoke
            other.lease(lease.id).revoke()
        db.refresh()
        assert [db.get(b"svc/a"), db.get(b"svc/b")] == [None, None]
        events = [(e.version, e.key, e.kind) for e in db.watch(b"svc/", start=start, end=db.version)]
        assert events == [(start, b"svc/a", "delete"), (start, b"svc/b", "delete")]
        lease.revoke()  # already gone: a no-op
        with pytest.raises(kvstore.LeaseNotFoundError):
            db.lease(lease.id)


@pytest.mark.parametrize("ttl", [0, -1, "5", True, float("inf")])
def test_bad_ttls_are_refused(ttl: object) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        version = db.version
        with pytest.raises(ValueError, match="ttl"):
            db.grant_lease(ttl)  # type: ignore[arg-type]
        assert db.version == version


def test_bad_lease_arguments_change_nothing() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        lease = db.grant_lease(60)
        version = db.version
        with pytest.raises(ValueError, match="exclude"):
            db.put(b"k", b"v", ttl=5, lease=lease.id)
        with pytest.raises(TypeError, match="lease id"):
            db.put(b"k", b"v", lease="not-a-lease")
        with pytest.raises(TypeError):
            db.put("k", b"v", lease=lease.id)  # type: ignore[arg-type]
        assert db.version == version and db.get(b"k") is None


def test_a_later_write_in_the_batch_takes_a_key_away_from_its_lease() -> None:
    lease = "a" * 32
    batch = kvstore.WriteBatch().put(b"a", b"1", lease=lease).put(b"b", b"1", lease=lease).put(b"c", b"1", lease=lease)
    batch.put(b"a", b"2")
    batch.put_many([(b"b", b"2")])
    assert batch.leases == {b"c": lease}
    batch.delete(b"c")
    assert batch.leases == {}


def test_remaining_reads_the_ttl_left_without_extending_it_and_leases_lists_the_live_ones() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        lease = db.grant_lease(30)
        other = db.grant_lease(60)
        db.put(b"a", b"1", lease=lease.id)
        seq = db.seq
        left = lease.remaining()
        assert 0 < left <= 30
        assert lease.remaining() <= left  # reading it extends nothing
        assert db.seq == seq  # and writes nothing
        assert sorted(found.id for found in db.leases()) == sorted([lease.id, other.id])
        assert {found.id: found.ttl for found in db.leases()} == {lease.id: 30, other.id: 60}
        lease.revoke()
        assert [found.id for found in db.leases()] == [other.id]
        with pytest.raises(kvstore.LeaseNotFoundError):
            lease.remaining()


def test_lease_ids_are_int64s_as_etcds() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        lease = db.grant_lease(30)
        assert type(lease.id) is int and 0 < lease.id < 1 << 63
        db.put(b"k", b"v", lease=lease.id)
        assert db.lease(lease.id).keys() == [b"k"] and [found.id for found in db.leases()] == [lease.id]
        for bad in (0, -1, 1 << 63, True, 1.0, str(lease.id)):
            with pytest.raises(TypeError, match="lease id"):
                db.put(b"other", b"v", lease=bad)  # type: ignore[arg-type]
        with pytest.raises(kvstore.LeaseNotFoundError):
            db.lease(lease.id + 1 if lease.id < (1 << 63) - 1 else 1)
