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
	$(PY) -m pip install --quiet -e ".[test,bench]"
	$(PY) -c "import cython_ext._checksum, cython_ext._bloom, cython_ext._merge, cython_ext._pointget, cython_ext._lru, cython_ext._scan"  # fail here if an extension did not compile
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/lakekv doctor ./data/doctor --rounds 5 --samples 50
	$(VENV)/bin/lakekv demo ./data/demo

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The full side-by-side run against the peers (under 15 minutes on 2 cores);
# writes benchmarks/results/bench.{json,md,png}.
bench: $(STAMP)
	$(PY) benchmarks/bench.py

clean:
	rm -rf $(VENV) build *.egg-info cython_ext/*.c cython_ext/*.so
