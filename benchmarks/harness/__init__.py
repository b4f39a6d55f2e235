"""lakekv's benchmark harness: lakekv against LMDB, RocksDB, SQLite and SlateDB in one run.

Modules: :mod:`~harness.engine` (the interface every store implements), one
adapter module per store (``lakekv_engine``, ``lmdb_engine``,
``rocksdb_engine``, ``sqlite_engine``, ``slatedb_engine``, and
``s3_reference`` for W7's raw conditional PUT loop), :mod:`~harness.data`
(keys, values, choosers), :mod:`~harness.workloads` (W1-W7),
:mod:`~harness.report` (JSON, Markdown, PNG), :mod:`~harness.machine` (what
ran where) and :mod:`~harness.run` (orchestration and command line).

Run it with ``python benchmarks/bench.py [--quick] [--out DIR]``,
``lakekv bench`` or ``make bench``.
"""

from harness.config import BenchConfig
from harness.run import main, run

__all__ = ["BenchConfig", "main", "run"]
