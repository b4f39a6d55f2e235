# The two commands of the README: `make run` and `make test`.
# Both create .venv on first use and (re)install the package, with its Cython
# extension compiled, whenever the build inputs change.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lakekv-installed
BUILD_INPUTS := pyproject.toml setup.py $(wildcard cython_ext/*.pyx cython_ext/*.pxd)

export PYSPARK_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: run test install bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) $(BUILD_INPUTS)
	$(PY) -m pip install --quiet -e ".[test,bench,server,spark]"
	$(PY) -c "import cython_ext._checksum, cython_ext._bloom, cython_ext._merge, cython_ext._pointget, cython_ext._lru, cython_ext._scan, cython_ext._memtable, cython_ext._rootrows, cython_ext._newfile, cython_ext._rowbatch, cython_ext._writebatch"  # fail here if an extension did not compile
	touch $(STAMP)

install: $(STAMP)

# The end-to-end job: check the storage under ./data/lakehouse (the doctor
# works in a scratch prefix it deletes), then the PySpark pipeline on it
# (catalog/spark/pipeline.py). Re-runnable: it replaces its own namespace.
run: $(STAMP)
	mkdir -p ./data/lakehouse
	$(VENV)/bin/lakekv doctor ./data/lakehouse --rounds 5 --samples 50
	$(PY) -m catalog.spark.pipeline ./data/lakehouse

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The full side-by-side run against the peers (under 15 minutes on 2 cores);
# writes benchmarks/results/bench.{json,md,png}.
bench: $(STAMP)
	$(PY) benchmarks/bench.py

clean:
	rm -rf $(VENV) build *.egg-info cython_ext/*.c cython_ext/*.so
