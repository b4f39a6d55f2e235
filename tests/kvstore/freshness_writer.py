"""The writer of test_freshness's cross-process pairs (a script, no tests).

Usage: python freshness_writer.py URL OPTIONS_JSON COUNT

For i in 0..COUNT-1: puts key b"pair" = str(i), and only after the put
returned (the commit is acknowledged) prints i on stdout; then waits for a
line on stdin (the reader has read) before the next write.
"""

from __future__ import annotations

import json
import sys

import kvstore


def main() -> None:
    url, options, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    with kvstore.open(url, poll_interval_s=0, background_maintenance=False, **options) as db:
        for i in range(count):
            db.put(b"pair", str(i).encode())
            print(i, flush=True)
            if not sys.stdin.readline():
                return


if __name__ == "__main__":
    main()
