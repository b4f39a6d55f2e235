"""One Spark application (own JVM, local[1]) running SQL writes through the catalog plugin; see catalog_apps.py.

Usage: python catalog_writer_app.py URL NAME READY_FILE GO_FILE STATEMENT...

Once GO_FILE exists (so every application has its JVM up before any
writes), runs each STATEMENT in turn against catalog ``lake`` (URL), running
a statement again while it raises RetryableConflictError (``catalog_errors``
turns Spark's exception back into it). Prints one JSON line:
{"name": ..., "attempts": [n per statement]}.
"""

from __future__ import annotations

import json
import os
import sys
import time

from catalog.errors import RetryableConflictError
from catalog.spark import catalog_errors, local_spark

MAX_ATTEMPTS = 30


def main() -> int:
    url, name, ready_file, go_file, *statements = sys.argv[1:]
    spark = local_spark("local[1]", app_name=f"catalog-writer-{name}", catalogs={"lake": url})
    spark.sql("SELECT count(*) FROM lake.c.t").collect()  # the JVM, the plugin and its control plane are up
    with open(ready_file, "w") as fh:
        fh.write("ready")
    while not os.path.exists(go_file):
        time.sleep(0.05)
    attempts = []
    for statement in statements:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with catalog_errors():
                    spark.sql(statement)
            except RetryableConflictError:
                continue
            attempts.append(attempt)
            break
        else:
            raise SystemExit(f"{name}: {statement!r} still conflicting after {MAX_ATTEMPTS} attempts")
    print(json.dumps({"name": name, "attempts": attempts}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
