"""GC on real S3 semantics (SeaweedFS): whole-second LastModified stamps.

Defect 1 of issue 14: with a sub-second grace period, GC compared the
storage's truncated stamps with the local clock, deleted a flush or
compaction output before its commit landed, and the store could no longer
be opened.
"""

from __future__ import annotations

import time

import pytest

import kvstore


@pytest.mark.s3
def test_short_grace_gc_never_deletes_a_live_sst_on_seaweedfs(seaweedfs) -> None:
    url, options = seaweedfs.new_url()
    settings = dict(
        options,
        gc_grace_s=0.5,
        retention_window_s=0.5,
        flush_max_versions=4,
        l0_compaction_trigger=2,
        gc_interval_s=0.3,
        maintenance_interval_s=0.1,
        poll_interval_s=0,
    )
    model: dict[bytes, bytes] = {}
    with kvstore.open(url, **settings) as db:
        deadline = time.monotonic() + 8.0
        n = 0
        while time.monotonic() < deadline:
            batch = kvstore.WriteBatch()
            for i in range(5):
                key, value = b"k%03d" % ((n * 5 + i) % 200), b"v%d" % n
                batch.put(key, value)
                model[key] = value
            db.write(batch)
            n += 1
        stats = db.maintenance_stats()
    assert stats["gc_runs"] > 0 and stats["flushes"] > 0
    with kvstore.open(url, **dict(options, poll_interval_s=0, background_maintenance=False)) as db:
        assert dict(db.scan()) == model
        assert db.verify().ok
