"""Root-file bytes per logical byte, and encode/decode CPU, for W1's commit shape (issue 38).

Run: ``.venv/bin/python benchmarks/bench_root_w1.py [--commits C] [--repeat R]``

W1 (benchmarks/harness) loads 1,000,000 rows of 16-byte decimal keys and
100-byte incompressible values in a seeded random order, 1,000 rows per
durable commit. Here ``C`` such commits go through a real store (fsync off,
no background maintenance), and the root files they wrote are weighed
against their logical bytes (key + value). Then the rows of one commit are
encoded and decoded ``R`` times as the committer and a reader do, best CPU
time. Run it on two checkouts to compare formats; the byte counts are exact,
the times are relative to one run only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kvstore  # noqa: E402
from harness import data  # noqa: E402
from kvstore.format.root import RootFile, decode_root, encode_root, encode_rows, parse_root_path  # noqa: E402
from kvstore.format.rows import PUT  # noqa: E402

ROWS = 1_000_000
BATCH = 1000
SEED = 42


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    batches = data.load_batches(ROWS, BATCH, SEED, data.Values(SEED))[: args.commits]
    logical = sum(len(k) + len(v) for batch in batches for k, v in batch)
    with tempfile.TemporaryDirectory() as tmp:
        options = dict(fsync=False, poll_interval_s=0, background_maintenance=False)
        with kvstore.open(str(Path(tmp) / "s"), **options) as db:
            first = db.version + 1
            for batch in batches:
                db.write(kvstore.WriteBatch().put_many(batch))
            roots = [meta for meta in db.objects.list("_") if (parse_root_path(meta.path) or 0) >= first]
            written = sum(meta.size for meta in roots)
            root_bytes = db.objects.get(roots[0].path)
    rows = sorted((key, 7, PUT, value, None) for key, value in batches[0])
    root = RootFile(version=1, parent=0, first_seq=7, last_seq=7, writer_id="w", writer_clock_ms=1,
                    commit_id="c", tree=None, flushed_upto=0, delta=None, rows=tuple(rows))
    best_encode = best_decode = float("inf")
    for _ in range(args.repeat):
        started = time.process_time()
        encode_root(root, encode_rows(rows, 7))
        best_encode = min(best_encode, time.process_time() - started)
        started = time.process_time()
        decode_root(root_bytes)
        best_decode = min(best_decode, time.process_time() - started)
    print(f"commits={len(roots)} logical_bytes={logical} root_bytes={written} "
          f"root_bytes_per_logical_byte={written / logical:.4f} format={root_bytes[:8]!r} "
          f"encode_us_per_commit={best_encode * 1e6:.0f} decode_us_per_commit={best_decode * 1e6:.0f}")


if __name__ == "__main__":
    main()
