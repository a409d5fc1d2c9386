# The fault campaign (issue 14 item 3, docs/reliability.md): every internal hop of the mesh under latency,
# connection resets, black holes and slow reads, through the asyncio fault proxy (libs/meshharness/faultproxy.py).
# Deadlines must fire, retries stay bounded, nothing hangs, nothing acknowledged is lost. Not part of
# `make test`, which runs three of its cases (tests/e2e/test_e2e_faults_smoke.py). Included by the Makefile,
# which defines PY and bootstrap; nothing is fetched.
#   make test-faults                                                 every hop x fault (~8 min on 2 cores)
#   make test-faults FAULTS_ARGS='--only ingest→archive --faults blackhole reset'

PY          ?= .venv/bin/python
FAULTS_ARGS ?=

.PHONY: test-faults
test-faults: bootstrap ## Fault-proxy campaign, every internal hop x fault (FAULTS_ARGS='--only HOP --faults NAME'); results in bench/results/faults.json and faults.md
	$(PY) -m bench.faults $(FAULTS_ARGS)
