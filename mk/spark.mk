# The archive's Spark job (docs/spark.md) and its Kubernetes manifests (k8s/).
# Included by the top-level Makefile, which defines PY, STAMP_VENV, bootstrap and ARCHIVE (sqlite|cassandra).
#   make spark-expire ARCHIVE=cassandra DRY_RUN=1
#   make spark-repartition ARCHIVE=cassandra SPARK_ENV='ARCHIVE_JOB_MAX_PARTITION_ROWS=50000'

PY ?= .venv/bin/python
SPARK_POM      := spark/connector/pom.xml
SPARK_JARS_DIR := .cache/spark/jars
SPARK_JARS     := $(SPARK_JARS_DIR)/.stamp
# Extra settings for a run, as VAR=value words (docs/spark.md lists every ARCHIVE_JOB_* variable).
SPARK_ENV      ?=
SPARK_JOB       = env ARCHIVE_BACKEND=$(ARCHIVE) $(SPARK_ENV) $(PY) -m spark.archive_job
SPARK_FLAGS     = $(if $(filter 1 yes true,$(DRY_RUN)),--dry-run)

.PHONY: spark-fetch spark-expire spark-repartition spark-maintain spark-report k8s-validate spark-cluster-test

# The stamp is newer than the pom once the copy completed, so a second run is a no-op; Maven's own cache
# (~/.m2) makes a re-fetch after `make distclean` offline-fast. The copy lands in a .partial directory that
# replaces the old one only when complete.
$(SPARK_JARS): $(SPARK_POM)
	@command -v mvn >/dev/null || { echo "mvn (Apache Maven) is not on PATH: apt-get install maven" >&2; exit 1; }
	rm -rf $(SPARK_JARS_DIR).partial
	mvn -B -ntp -q -Dstyle.color=never -f $(SPARK_POM) dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(abspath $(SPARK_JARS_DIR)).partial
	rm -rf $(SPARK_JARS_DIR)
	mv $(SPARK_JARS_DIR).partial $(SPARK_JARS_DIR)
	@touch $@

spark-fetch: $(SPARK_JARS) ## Copy spark-cassandra-connector 3.5.1 (Scala 2.12) jars from Maven Central (~/.m2) into .cache/spark/jars (idempotent)

spark-expire: bootstrap $(SPARK_JARS) ## Expire the archive past retention with Spark local[2] (ARCHIVE=sqlite|cassandra, DRY_RUN=1 prints the plan)
	$(SPARK_JOB) expire $(SPARK_FLAGS)

spark-repartition: bootstrap $(SPARK_JARS) ## Split oversized archive buckets into a new shard generation (ARCHIVE=…, DRY_RUN=1)
	$(SPARK_JOB) repartition $(SPARK_FLAGS)

spark-maintain: bootstrap $(SPARK_JARS) ## Expire and repartition in one pass, as the CronJob does (ARCHIVE=…, DRY_RUN=1)
	$(SPARK_JOB) maintain $(SPARK_FLAGS)

spark-report: bootstrap $(SPARK_JARS) ## Scan the archive and print the report and plan (rows, largest partitions) without changing it
	$(SPARK_JOB) report

# A master and SPARK_CLUSTER_WORKERS workers from the pyspark package as local processes; the job submitted to
# them must answer as local[2] does on the same data (docs/spark.md "Standalone cluster"). The connector half
# runs on the local Cassandra node: any node that answers CQL on CASSANDRA_HOST:CASSANDRA_NATIVE_PORT is used
# (`ctl.py wait`, not `status`: status knows only this checkout's own node, and a node started from another
# checkout made `start` fail on the busy port); only when none answers is one started here, and stopped after.
SPARK_CLUSTER_WORKERS ?= 2
#: Where `make spark-cluster-test` writes its figures (committed).
SPARK_CLUSTER_RESULTS ?= bench/results/spark-standalone.json

spark-cluster-test: bootstrap cassandra-fetch $(SPARK_JARS) ## Spark standalone cluster (master + 2 workers): spark-submit gives local[2]'s results (SQLite, Cassandra); figures in bench/results
	@started=0; \
	if ! $(PY) $(CASSANDRA_CTL) wait --timeout 10 >/dev/null 2>&1; then $(PY) $(CASSANDRA_CTL) start; started=1; fi; \
	rc=0; SPARK_CLUSTER_WORKERS=$(SPARK_CLUSTER_WORKERS) SPARK_CLUSTER_RESULTS=$(SPARK_CLUSTER_RESULTS) \
	  $(PY) -m pytest tests/spark/standalone -p no:cacheprovider $(PYTEST_ARGS) || rc=$$?; \
	if [ $$started = 1 ]; then $(PY) $(CASSANDRA_CTL) stop; fi; \
	exit $$rc

k8s-validate: bootstrap ## Render k8s/ (kustomize) and validate it offline against the Kubernetes 1.32 schemas
	$(PY) -m pytest tests/charts/test_k8s_manifests.py -q $(PYTEST_ARGS)

# `make test` runs tests/spark against the real Cassandra through the connector: fetch its jars first.
test: $(SPARK_JARS)
