"""Root-file size and verify time for many single-key commits (issue 14, defect 12).

Run: ``.venv/bin/python benchmarks/bench_root_size.py [commits]``. Prints the
bytes of a one-key-put root, the total root bytes, and how long ``verify()``
and a reopen take, on a local store with fsync off. Run it on two checkouts
to compare formats: the numbers of one run are relative to each other only.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import kvstore
from kvstore.format.root import parse_root_path


def main(commits: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "s")
        options = dict(fsync=False, poll_interval_s=0, background_maintenance=False)
        with kvstore.open(url, **options) as db:
            start = time.perf_counter()
            for n in range(commits):
                db.put(b"user:%08d" % n, b"value-%d" % n)
            commit_s = time.perf_counter() - start
            roots = [meta for meta in db.objects.list("_") if parse_root_path(meta.path) is not None]
            one = [meta.size for meta in roots if parse_root_path(meta.path) == 1][0]
            total = sum(meta.size for meta in roots)
            start = time.perf_counter()
            report = db.verify()
            verify_s = time.perf_counter() - start
        start = time.perf_counter()
        with kvstore.open(url, **options) as db:
            assert db.get(b"user:%08d" % (commits - 1)) is not None
        reopen_s = time.perf_counter() - start
    print(f"commits={commits} one_put_root_bytes={one} total_root_bytes={total} "
          f"bytes_per_root={total / len(roots):.0f} commit_s={commit_s:.2f} verify_s={verify_s:.2f} "
          f"reopen_s={reopen_s:.2f} verify_ok={report.ok}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
