# Local single-node Apache Cassandra 5.0 from Maven Central jars (docs/cassandra.md).
# Included by the top-level Makefile, which defines PY (the virtualenv's python) and STAMP_VENV.
# Settings are CASSANDRA_* environment (or make command-line) variables, e.g.
#   make cassandra-start CASSANDRA_NATIVE_PORT=19042 CASSANDRA_FRESH=1

PY ?= .venv/bin/python
CASSANDRA_CTL := tools/cassandra/ctl.py
# Works whether this file is included before or after the Makefile defines STAMP_VENV.
CASSANDRA_VENV_STAMP := $(or $(STAMP_VENV),.venv/.stamp)
CASSANDRA_LOG_LINES ?= 100

export CASSANDRA_HOST CASSANDRA_NATIVE_PORT CASSANDRA_STORAGE_PORT CASSANDRA_JMX_PORT CASSANDRA_HEAP
export CASSANDRA_STATE_DIR CASSANDRA_START_TIMEOUT CASSANDRA_STOP_TIMEOUT CASSANDRA_JAVA CASSANDRA_EXTRA_JVM_OPTS

.PHONY: cassandra-fetch cassandra-start cassandra-stop cassandra-status cassandra-logs

cassandra-fetch: $(CASSANDRA_VENV_STAMP) ## Copy Cassandra 5.0 jars from Maven Central (~/.m2) into .cache/cassandra/lib (idempotent)
	$(PY) $(CASSANDRA_CTL) fetch

cassandra-start: $(CASSANDRA_VENV_STAMP) ## Start the local Cassandra on 127.0.0.1:9042 and wait for CQL (CASSANDRA_FRESH=1 wipes var/cassandra)
	$(PY) $(CASSANDRA_CTL) start $(if $(filter 1 yes true,$(CASSANDRA_FRESH)),--fresh)

cassandra-stop: $(CASSANDRA_VENV_STAMP) ## Stop the local Cassandra (SIGTERM, then SIGKILL after CASSANDRA_STOP_TIMEOUT s)
	$(PY) $(CASSANDRA_CTL) stop

cassandra-status: $(CASSANDRA_VENV_STAMP) ## Is the local Cassandra running and answering CQL? (exit 3 if not)
	$(PY) $(CASSANDRA_CTL) status

cassandra-logs: $(CASSANDRA_VENV_STAMP) ## Print the end of var/cassandra/logs/system.log (FOLLOW=1 to keep following)
	$(PY) $(CASSANDRA_CTL) logs -n $(CASSANDRA_LOG_LINES) $(if $(filter 1 yes true,$(FOLLOW)),--follow)

# ---------------------------------------------------------------- the 3-node cluster (docs/cassandra.md "Cluster")
# Three nodes on the loopback aliases 127.0.0.2-4 with their own state under var/cassandra-cluster/, from the
# same jars as the single node (which stays untouched on 127.0.0.1). Settings are CASSANDRA_CLUSTER_*, e.g.
#   make cassandra-cluster-start CASSANDRA_CLUSTER_HEAP=768M CASSANDRA_CLUSTER_FRESH=1
CASSANDRA_CLUSTER_CTL := tools/cassandra/cluster.py
#: Where `make test-cluster` writes the campaign's figures (committed; docs/cassandra.md "Cluster").
CLUSTER_RESULTS ?= bench/results/cluster.json

export CASSANDRA_CLUSTER_HOSTS CASSANDRA_CLUSTER_NATIVE_PORT CASSANDRA_CLUSTER_STORAGE_PORT CASSANDRA_CLUSTER_JMX_PORT
export CASSANDRA_CLUSTER_HEAP CASSANDRA_CLUSTER_STATE_DIR CASSANDRA_CLUSTER_START_TIMEOUT CASSANDRA_CLUSTER_STOP_TIMEOUT

.PHONY: cassandra-cluster-start cassandra-cluster-stop cassandra-cluster-status test-cluster

cassandra-cluster-start: $(CASSANDRA_VENV_STAMP) ## Start 3 Cassandra nodes on 127.0.0.2-4, one after another, until all are UN (CASSANDRA_CLUSTER_FRESH=1 wipes them)
	$(PY) $(CASSANDRA_CLUSTER_CTL) start $(if $(filter 1 yes true,$(CASSANDRA_CLUSTER_FRESH)),--fresh)

cassandra-cluster-stop: $(CASSANDRA_VENV_STAMP) ## Stop the 3-node cluster (every node drains; SIGKILL after CASSANDRA_CLUSTER_STOP_TIMEOUT s)
	$(PY) $(CASSANDRA_CLUSTER_CTL) stop

cassandra-cluster-status: $(CASSANDRA_VENV_STAMP) ## Each cluster node's CQL answer and its view of the ring (exit 3 unless all UN)
	$(PY) $(CASSANDRA_CLUSTER_CTL) status

test-cluster: bootstrap cassandra-fetch spark-fetch ## The cluster campaign (not in `make test`): nodes killed under ingest, the Spark job on the cluster; figures in bench/results/cluster.json
	@# Start the cluster unless it runs (idempotent) and stop it again only if we started it, as `make test` does.
	@started=0; \
	if ! $(PY) $(CASSANDRA_CLUSTER_CTL) status >/dev/null 2>&1; then $(PY) $(CASSANDRA_CLUSTER_CTL) start; started=1; fi; \
	rc=0; CLUSTER_RESULTS=$(CLUSTER_RESULTS) $(PY) -m pytest tests/cluster/campaign -p no:cacheprovider \
	  --basetemp=var/cluster-campaign $(PYTEST_ARGS) || rc=$$?; \
	if [ $$started = 1 ]; then $(PY) $(CASSANDRA_CLUSTER_CTL) stop; fi; \
	exit $$rc
