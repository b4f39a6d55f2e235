"""One Spark application (own JVM, local[1]) writing to a lakehouse table; for test_spark_concurrency.

Usage: python spark_writer_app.py URL TABLE MODE TAG ROWS READY_FILE GO_FILE

Writes ROWS rows tagged TAG with mode append or overwrite, once the GO_FILE
exists (so every application has its JVM up before any writes), retrying
while the write raises RetryableConflictError (``catalog_errors`` turns
Spark's exception back into it). Prints one JSON line:
{"tag": ..., "attempts": n, "conflicts": [messages]}.
"""

from __future__ import annotations

import json
import os
import sys
import time

from catalog.errors import RetryableConflictError
from catalog.spark import catalog_errors, local_spark

MAX_ATTEMPTS = 20


def main() -> int:
    url, table, mode, tag, rows, ready_file, go_file = sys.argv[1:8]
    spark = local_spark("local[1]", app_name=f"writer-{tag}")
    df = spark.createDataFrame([(tag, i) for i in range(int(rows))], "tag string, n bigint")
    with open(ready_file, "w") as fh:
        fh.write("ready")
    while not os.path.exists(go_file):
        time.sleep(0.05)
    conflicts: list[str] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with catalog_errors():
                df.write.format("lakehouse").option("lakehouse", url).mode(mode).save(table)
        except RetryableConflictError as exc:
            conflicts.append(str(exc)[:300])
            continue
        print(json.dumps({"tag": tag, "attempts": attempt, "conflicts": conflicts}), flush=True)
        spark.stop()
        return 0
    raise SystemExit(f"{tag}: still conflicting after {MAX_ATTEMPTS} attempts")


if __name__ == "__main__":
    sys.exit(main())
