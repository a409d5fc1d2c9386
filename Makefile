# Mailmesh — every developer verb is a target here. `make help` lists them.
# On a fresh machine `make run` and `make test` bootstrap everything they need, idempotently.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON_SYS   ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
STAMP_VENV   := $(VENV)/.stamp
GEN          := gen/python
PROTO_FILES  := $(shell find protos -name '*.proto' 2>/dev/null | sort)
STAMP_PROTO  := $(GEN)/.stamp
ARCHIVE      ?= sqlite
PYTEST_ARGS  ?=

export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Mailmesh make targets:\n"} /^[a-zA-Z0-9_.-]+:.*##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

## ---------------------------------------------------------------- set-up
$(STAMP_VENV): requirements.lock pyproject.toml tools/install_deps.sh
	@test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	@# The same script the images run (deploy/docker/Dockerfile, k8s/spark/Dockerfile), with every extra.
	tools/install_deps.sh $(PY) dev spark
	@# Our import roots: shared libs, generated protos, and the repo root (for `services.*`).
	@site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  printf '%s\n' "$(CURDIR)/libs" "$(CURDIR)/$(GEN)" "$(CURDIR)" > "$$site/mailmesh.pth"
	@touch $@

.PHONY: venv
venv: $(STAMP_VENV) ## Create the virtualenv and install pinned dependencies

.PHONY: lock
lock: $(STAMP_VENV) ## Re-resolve requirements.lock from pyproject.toml
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --extra spark --python-version 3.11 -o requirements.lock -q

$(STAMP_PROTO): $(STAMP_VENV) $(PROTO_FILES) tools/gen_protos.py
	$(PY) tools/gen_protos.py --protos protos --out $(GEN)
	@touch $@

.PHONY: protos
protos: $(STAMP_PROTO) ## Generate the gRPC/protobuf Python code (one place: gen/python)

.PHONY: bootstrap
bootstrap: $(STAMP_VENV) $(STAMP_PROTO) ## Everything `run` and `test` need on a fresh machine

include mk/cassandra.mk
-include mk/spark.mk
-include mk/interop.mk
-include mk/helm.mk
-include mk/kube.mk
include mk/promtool.mk
include mk/browser.mk
-include mk/soak.mk
-include mk/fuzz.mk
-include mk/faults.mk

## ---------------------------------------------------------------- run
.PHONY: run
run: bootstrap $(if $(filter cassandra,$(ARCHIVE)),cassandra-start) ## Run the whole mesh as local processes (ARCHIVE=sqlite|cassandra); Ctrl-C stops it
	$(PY) tools/run_mesh.py --archive $(ARCHIVE)

## ---------------------------------------------------------------- checks
.PHONY: test
test: bootstrap lint cassandra-fetch promtool browser-fetch ## Run every test tier (unit, integration, e2e, charts, spark) incl. real Cassandra
	@# The real Cassandra node is part of the suite: start it (idempotent) and stop it again only if we started it.
	@started=0; \
	if ! $(PY) $(CASSANDRA_CTL) status >/dev/null 2>&1; then $(PY) $(CASSANDRA_CTL) start; started=1; fi; \
	rc=0; $(PY) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$started = 1 ]; then $(PY) $(CASSANDRA_CTL) stop; fi; \
	exit $$rc

.PHONY: test-unit
test-unit: bootstrap ## Unit tests only (no network beyond loopback port 0)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: lint
lint: bootstrap ## ruff, mypy --strict on our code, import-direction check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy libs services tools tests bench fuzz
	$(VENV)/bin/lint-imports

.PHONY: fmt
fmt: bootstrap ## Format and auto-fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

.PHONY: bench
bench: bootstrap ## Benchmarks (BENCH_ARGS="--quick" for a smoke run); results in bench/results, summary in README
	$(PY) -m bench.run --out bench/results $(BENCH_ARGS)

.PHONY: clean
clean: ## Remove generated code and caches (keeps the virtualenv and downloads)
	rm -rf $(GEN) .pytest_cache .mypy_cache .ruff_cache .hypothesis

.PHONY: distclean
distclean: clean ## Remove everything the Makefile downloaded or built
	rm -rf $(VENV) .cache
