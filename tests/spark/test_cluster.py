"""The catalog plugin on a Spark standalone cluster, with the lakehouse on SeaweedFS S3.

The driver (``cluster_app.py``, its own process) and the cluster run with no
``AWS_*`` variable: the S3 endpoint and keys reach the driver's control
plane and, as S3A's settings of the bucket, the executors' Parquet readers
and writers only as catalog options, and the secret shows up in no plan,
description or log. The executors get hadoop-aws through ``spark.jars``
(``catalog.spark.spark_jars``), so the data moves through Spark's own
Parquet reader and writer over ``s3a:`` paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.spark.cluster import StandaloneCluster, clean_environment
from kvstore.objstore import open_store
from kvstore.testing.seaweed import SeaweedServer

pytestmark = [pytest.mark.spark, pytest.mark.s3]

APP = Path(__file__).with_name("cluster_app.py")
REGIONS = ("us", "eu", "apac")


def expected(ids: range) -> list[list[object]]:
    """The rows after the app's UPDATE (amount + 1000 where id % 1000 = 0)."""
    return sorted([i, f"{i % 97 + (1000 if i % 1000 == 0 else 0)}.00", REGIONS[i % 3]] for i in ids)


def test_ctas_insert_pruned_select_time_travel_and_drop_on_a_cluster_over_s3(
    spark_cluster: StandaloneCluster, seaweedfs: SeaweedServer, tmp_path: Path
) -> None:
    url, storage = seaweedfs.new_url()
    env = clean_environment()
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    assert not [k for k in {**env, **spark_cluster.env} if k.startswith("AWS_")]
    results = tmp_path / "results.json"
    settings = {"master": spark_cluster.master_url, "url": url, "storage": storage}
    run = subprocess.run([sys.executable, str(APP), str(results)], input=json.dumps(settings), text=True,
                         capture_output=True, env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr[-5000:]
    out = json.loads(results.read_text())

    assert out["executors"] == 2
    # Spark's own Parquet reader read the catalog's plan: s3a: paths in its file index.
    bucket_prefix = "s3a://" + url.removeprefix("s3://") + "/"
    assert "InMemoryFileIndex" in out["explain"] and bucket_prefix in out["explain"], out["explain"]
    assert sorted(out["all"]) == expected(range(4000))  # CTAS (3000 rows) + INSERT (1000), then UPDATE
    assert sorted(out["pruned"]) == [row for row in expected(range(4000)) if row[2] == "eu"]
    # The scan read only the files of region eu: pruning happened before Spark's own filter.
    assert out["all_scan_rows"] == 4000 and out["pruned_scan_rows"] == len(out["pruned"])
    assert sorted(id_ for (id_,) in out["as_of_ctas"]) == list(range(3000))
    assert sorted(out["python_read"]) == expected(range(4000))  # the executors' files and CRC32Cs, read by Python
    # Each task checked its s3a: files against their catalog entries before Spark's reader opened them.
    damaged_error = out["damaged_error"] or ""
    assert "CorruptDataFileError" in damaged_error and out["damaged_path"] in damaged_error, damaged_error[:3000]
    assert "failed its footer checksum" in damaged_error
    assert out["tables_after_drop"] == []
    objects = open_store(url, create=False, **storage)
    try:
        # PURGE deletes the files live at the drop; those the UPDATE replaced earlier stay for
        # time travel until gc passes the retention (catalog.maintenance.purge_dropped).
        left = sorted(meta.path for meta in objects.list("data/"))
        assert out["replaced_by_update"] and left == out["replaced_by_update"], "DROP TABLE ... PURGE left data files"
    finally:
        objects.close()

    secret = storage["secret"]
    seen = json.dumps([out["explain"], out["describe"], out["namespace"]]) + run.stderr + spark_cluster.logs()
    assert secret not in seen
