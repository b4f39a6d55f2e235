"""``lakekv demo``: the main job of ``make run`` — a short tour of the engine.

Writes, reads, batches, snapshots and scans a store (``./data/demo`` by
default), then reopens it to show the data is durable, printing each step.
Running it again continues the same store.
"""

from __future__ import annotations

import time
from typing import TextIO

import kvstore
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.factory import open_store


def run_demo(url: str, out: TextIO) -> int:
    """Run the tour against ``url``; return a process exit code."""
    objects = CountingStore(open_store(url))
    with kvstore.open(objects, poll_interval_s=0) as db:
        out.write(f"opened {url}: version {db.version}, seq {db.seq}\n")
        run = db.version
        t0 = time.perf_counter()
        seq = db.put(b"demo:greeting", b"hello from run %d" % run)
        out.write(f"put demo:greeting -> committed at seq {seq} in {(time.perf_counter() - t0) * 1e3:.2f} ms\n")

        batch = kvstore.WriteBatch()
        for i in range(5):
            batch.put(b"demo:item:%02d" % i, b"value %d (run %d)" % (i, run))
        batch.delete(b"demo:item:03")
        seq = db.write(batch)
        out.write(f"write batch of {len(batch)} operations -> one commit at seq {seq}\n")

        with db.snapshot() as snap:
            db.put(b"demo:greeting", b"changed after the snapshot")
            out.write(f"snapshot at version {snap.version} still reads: {snap.get(b'demo:greeting')!r}\n")
            out.write(f"the store now reads: {db.get(b'demo:greeting')!r}\n")

        out.write("scan prefix demo:item: ->\n")
        for key, value in db.scan(prefix=b"demo:item:"):
            out.write(f"  {key.decode()} = {value.decode()}\n")
        objects.reset()
        for i in range(100):
            db.put(b"demo:counter", b"%d" % i)
        counts = objects.counts
        out.write(
            f"100 durable commits cost {counts['put_if_absent']} conditional PUTs and "
            f"{counts['put']} plain PUTs (hint)\n"
        )
        version = db.version
    with kvstore.open(url, create=False, poll_interval_s=0) as db:
        ok = db.version == version and db.get(b"demo:counter") == b"99"
        out.write(f"reopened: version {db.version}, demo:counter = {db.get(b'demo:counter')!r} -> {'OK' if ok else 'MISMATCH'}\n")
    return 0 if ok else 1
