"""The lakehouse-catalog benchmark (``benchmarks/catalog_bench.py``): lakekv's
``catalog`` against DuckLake (SQLite metadata) and pyiceberg's SqlCatalog
(SQLite), side by side in one run, on the same data.

Modules: ``config`` (run sizes), ``data`` (the shared rows and files),
``system`` (the interface each catalog implements) with one module per
catalog, ``writers`` (the append loop and the concurrent writer processes),
``workloads`` (what is measured), ``report`` (tables and ratios) and ``run``
(the order of a run and the command line).

Named ``lakehouse`` rather than ``catalog`` because ``benchmarks/`` is on
``sys.path`` when the bench runs and a ``catalog`` package here would shadow
lakekv's own.
"""
