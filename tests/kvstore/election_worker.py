"""One candidate for test_leader_election (a script, no tests): leadership from a lease and compare-and-set only.

Usage: python election_worker.py URL NAME LOG STOP  (URL: a store, or http://... of a server)

Campaigns for key b"leader": when it has no value, puts NAME there with
``if_absent`` and a 0.5 s lease. While leader it renews: keepalive, then a
compare-and-set on its own last revision (a fencing token), and appends to
LOG every revision at which it led (its own compare-and-set puts). It
stops at the first failed renewal
(and campaigns again), and exits when the file STOP exists.
"""

from __future__ import annotations

import os
import sys
import time

import kvstore
from kvstore import LeaseNotFoundError, PreconditionFailedError, WriteBatch


def main() -> None:
    url, name, log_path, stop_path = sys.argv[1:]
    me = name.encode()
    # A store URL, or a `lakekv serve` server's (the same API over HTTP).
    options = {} if url.startswith("http") else {"poll_interval_s": 0, "background_maintenance": False}
    with kvstore.open(url, **options) as db, open(log_path, "a") as log:
        while not os.path.exists(stop_path):
            db.refresh()
            value, _ = db.get_with_revision(b"leader")
            if value is not None:
                time.sleep(0.02)
                continue
            lease = db.grant_lease(0.5)
            try:
                revision = db.write(WriteBatch().put(b"leader", me, if_absent=True, lease=lease.id))
            except PreconditionFailedError:
                lease.revoke()
                continue
            while not os.path.exists(stop_path):
                log.write(f"{revision}\n")
                log.flush()
                time.sleep(0.05)
                try:
                    lease.keepalive()  # rewrites the key with the new expiry: a new revision
                    db.refresh()
                    value, revision = db.get_with_revision(b"leader")
                    if value != me:
                        break
                    revision = db.write(WriteBatch().put(b"leader", me, if_seq=revision, lease=lease.id))
                except (PreconditionFailedError, LeaseNotFoundError):
                    break


if __name__ == "__main__":
    main()
