"""Hot-key transactions and commits beside a busy Python thread, in one process.

Run: ``.venv/bin/python benchmarks/hotkey_bench.py [--seconds S] [--only hotkey|busy]``

* **hot key** (harness W6, one key): 16 threads run SERIALIZABLE
  read-modify-write transactions on one counter, aborts not retried; once
  reading with plain ``get`` (what every transaction did before key locks)
  and once with ``get_for_update`` (the key lock, then the move to the head).
  Reports commits/s, abort rate and the final counter check.
* **busy thread**: one thread commits single-key puts one at a time, idle
  and then while a second thread spins in pure Python; on a memory store
  and on a local directory without fsync (the configurations where the GIL,
  not the disk, bounds a commit). Reports commits/s and the busy/idle ratio.

Both run the same code paths twice in the same process, so the comparison is
fair on a noisy machine; absolute numbers are not.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import uuid
from typing import Callable

import kvstore
from kvstore.errors import ConflictError
from kvstore.objstore.memory import MemoryStore


def hot_key(read: str, fsync: bool, threads: int, seconds: float) -> dict[str, float]:
    path = tempfile.mkdtemp(prefix="lakekv-hotkey-")
    try:
        with kvstore.open(path, poll_interval_s=0, fsync=fsync) as db:
            db.put(b"counter", b"0")
            tallies = [[0, 0] for _ in range(threads)]
            deadline = time.perf_counter() + seconds

            def work(tally: list[int]) -> None:
                while time.perf_counter() < deadline:
                    txn = db.begin("serializable")
                    value = txn.get_for_update(b"counter") if read == "get_for_update" else txn.get(b"counter")
                    txn.put(b"counter", b"%d" % (int(value) + 1))
                    try:
                        txn.commit()
                        tally[0] += 1
                    except ConflictError:
                        tally[1] += 1

            started = time.perf_counter()
            pool = [threading.Thread(target=work, args=(t,)) for t in tallies]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            elapsed = time.perf_counter() - started
            committed = sum(t[0] for t in tallies)
            aborted = sum(t[1] for t in tallies)
            lost = committed - int(db.get(b"counter"))
        return {"commits_per_s": committed / elapsed, "abort_rate": aborted / max(1, committed + aborted), "lost": lost}
    finally:
        shutil.rmtree(path, ignore_errors=True)


def commits(open_store: Callable[[], kvstore.Store], busy: bool, seconds: float) -> float:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            total = 0
            for i in range(1000):
                total += i

    spinner = threading.Thread(target=spin, daemon=True)
    with open_store() as db:
        if busy:
            spinner.start()
        try:
            value = b"x" * 100
            count = 0
            started = time.perf_counter()
            deadline = started + seconds
            while time.perf_counter() < deadline:
                db.put(b"k%012d" % count, value)
                count += 1
            return count / (time.perf_counter() - started)
        finally:
            stop.set()
            if busy:
                spinner.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--only", choices=["hotkey", "busy"])
    args = parser.parse_args()
    if args.only in (None, "hotkey"):
        print(f"hot key: {args.threads} threads, SERIALIZABLE RMW on 1 key, aborts not retried, {args.seconds:g} s each")
        for fsync in (True, False):
            for read in ("get", "get_for_update"):
                r = hot_key(read, fsync, args.threads, args.seconds)
                print(f"  fsync={fsync!s:5} read={read:15} {r['commits_per_s']:8,.0f} commits/s  "
                      f"aborts {r['abort_rate']:6.1%}  lost updates {r['lost']:.0f}")
    if args.only in (None, "busy"):
        print(f"commits of 1 writer, idle vs beside a thread spinning in Python, {args.seconds:g} s each")
        tmp = tempfile.mkdtemp(prefix="lakekv-busy-")
        try:
            configs: dict[str, Callable[[], kvstore.Store]] = {
                "memory store": lambda: kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0),
                "local, no fsync": lambda: kvstore.open(f"{tmp}/{uuid.uuid4().hex}", poll_interval_s=0, fsync=False),
            }
            for name, opener in configs.items():
                idle = commits(opener, False, args.seconds)
                busy = commits(opener, True, args.seconds)
                print(f"  {name:16} idle {idle:8,.0f}/s  busy {busy:8,.0f}/s  busy/idle {busy / idle:6.1%}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
