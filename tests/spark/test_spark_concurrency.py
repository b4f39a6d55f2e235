"""Three Spark applications append to one table while a fourth overwrites it.

Each application is its own process and JVM (local[1]). Every append must
land (after retrying RetryableConflictError if it got one) and the table's
history must be a serial order of whole operations: walking the versions, each
step adds exactly one writer's rows (append) or leaves exactly the
overwriter's rows (overwrite), and the final table is what that order gives.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog.spark.local import prepare_environment

APP = Path(__file__).with_name("spark_writer_app.py")
ROWS = {"a1": 30, "a2": 40, "a3": 50, "ow": 7}
# Four JVMs start at once on a shared machine and each runs one small job:
# the C1 compiler alone and the serial collector cut their start-up CPU
# (measured: one writer application 72 s -> 61 s wall on a loaded 2-core box).
QUICK_JVM = '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'


def tags_at(lake: catalog.Lakehouse, version: int) -> collections.Counter[str]:
    with lake.at(version=version) as past:
        if not past.table_exists("c.t"):
            return collections.Counter()
        return collections.Counter(past.load_table("c.t").scan(columns=["tag"]).to_arrow().column("tag").to_pylist())


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)  # four JVM starts on a shared 2-core machine
def test_concurrent_appends_and_an_overwrite_serialize(tmp_path: Path) -> None:
    prepare_environment()
    url = str(tmp_path / "lake")
    with catalog.open(url) as lake:
        lake.create_namespace("c")
        lake.create_table("c.t", pa.schema([("tag", pa.string()), ("n", pa.int64())]))
        start_version = lake.version

    go = tmp_path / "go"
    procs = {}
    for tag, rows in ROWS.items():
        mode = "overwrite" if tag == "ow" else "append"
        procs[tag] = subprocess.Popen(
            [sys.executable, str(APP), url, "c.t", mode, tag, str(rows), str(tmp_path / f"ready-{tag}"), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYSPARK_SUBMIT_ARGS=QUICK_JVM),
        )
    try:
        deadline = time.monotonic() + 900
        while not all((tmp_path / f"ready-{t}").exists() for t in ROWS):
            assert all(p.poll() is None for p in procs.values()), "a writer exited before it was ready"
            assert time.monotonic() < deadline, "writers did not start in time"
            time.sleep(0.2)
        go.write_text("go")
        results = {}
        for tag, proc in procs.items():
            out, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"{tag} failed:\n{err[-3000:]}"
            results[tag] = json.loads(out.strip().splitlines()[-1])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    with catalog.open(url) as lake:
        lake.refresh()
        end_version = lake.version
        state: collections.Counter[str] = collections.Counter()
        applied = []
        for version in range(start_version + 1, end_version + 1):
            now = tags_at(lake, version)
            if now == state:
                continue  # a version that did not touch the table's rows
            added = now - state
            if now == collections.Counter({"ow": ROWS["ow"]}):
                applied.append("ow")
            else:
                assert not (state - now), f"v{version}: rows vanished without the overwrite: {state - now}"
                assert len(added) == 1, f"v{version}: not one whole append: {added}"
                (tag,) = added
                assert added[tag] == ROWS[tag], f"v{version}: partial append of {tag}"
                applied.append(tag)
            state = now
        assert sorted(applied) == sorted(ROWS), f"each writer committed exactly once: {applied}"
        # The final table is the serial order's result: the overwrite's rows plus every later append.
        after_overwrite = applied[applied.index("ow") + 1 :]
        expected = collections.Counter({"ow": ROWS["ow"], **{t: ROWS[t] for t in after_overwrite}})
        assert tags_at(lake, end_version) == expected
    print("serial order:", applied, "attempts:", {t: r["attempts"] for t, r in results.items()})
