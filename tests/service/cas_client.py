"""One compare-and-set client of test_metadata_servers (a script, no tests).

Usage: python cas_client.py SERVER_URL NAME ROUNDS INCREMENTS OUT

Phase 1: for each round r, tries to create key ``round-r`` with its name
(``If-None-Match: *``), recording the rounds it won. Phase 2: adds 1 to key
``counter`` INCREMENTS times, each a read of the revision then a PUT with
``If-Match`` on it, retried on 412, recording the revision each increment
committed at. Writes ``{"won": [...], "increments": [...]}`` to OUT.
"""

from __future__ import annotations

import json
import sys

import kvstore
from kvstore import PreconditionFailedError, WriteBatch


def main() -> None:
    url, name, rounds, increments, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    won, committed = [], []
    with kvstore.open(url) as db:
        for r in range(rounds):
            try:
                db.write(WriteBatch().put(b"round-%d" % r, name.encode(), if_absent=True))
                won.append(r)
            except PreconditionFailedError:
                pass
        while len(committed) < increments:
            value, revision = db.get_with_revision(b"counter")
            batch = WriteBatch()
            if value is None:
                batch.put(b"counter", b"1", if_absent=True)
            else:
                batch.put(b"counter", b"%d" % (int(value) + 1), if_seq=revision)
            try:
                committed.append(db.write(batch))
            except PreconditionFailedError:
                continue
    with open(out, "w") as f:
        json.dump({"won": won, "increments": committed}, f)


if __name__ == "__main__":
    main()
