"""A streaming query in its own process, killed with SIGKILL after its Nth micro-batch (a helper, no tests).

    python stream_app.py URL SOURCE SINK CHECKPOINT KILL_AFTER

Starts Spark, then waits for a line on stdin (so that its JVM starts while
the test prepares the table), then reads ``spark.readStream.table(SOURCE)`` (skipping versions that deleted or
changed rows) into table ``SINK`` with Trigger.AvailableNow from CHECKPOINT.
After the KILL_AFTER-th micro-batch's progress it kills its own JVM and then
itself with SIGKILL: nothing gets to clean up, as when a machine dies. The
query must have that many micro-batches to run, or it waits for ever.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from catalog.spark.local import local_spark
from pyspark.sql.streaming import StreamingQueryListener


def main() -> None:
    url, source, sink, checkpoint, kill_after = sys.argv[1:6]
    spark = local_spark("local[1]", app_name="lakekv-stream-app", catalogs={"lake": url})
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # internals: py4j's gateway is the only way to the JVM's pid
    batches = threading.Semaphore(0)

    class KillAfter(StreamingQueryListener):
        def onQueryStarted(self, event: object) -> None:
            pass

        def onQueryProgress(self, event: object) -> None:
            batches.release()

        def onQueryIdle(self, event: object) -> None:
            pass

        def onQueryTerminated(self, event: object) -> None:
            pass

    spark.streams.addListener(KillAfter())
    sys.stdin.readline()  # "go": the table is ready
    query = (
        spark.readStream.option("streaming-skip-delete-versions", "true")
        .option("streaming-skip-overwrite-versions", "true")
        .table(source)
        .writeStream.option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .toTable(sink)
    )
    for _ in range(int(kill_after)):
        batches.acquire()
    os.kill(jvm_pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    query.awaitTermination()  # never reached


if __name__ == "__main__":
    main()
