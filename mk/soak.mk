# The soak (issue 14 item 5, docs/soak.md): the whole ingest path for 10 minutes at 1,000 envelopes/s through
# the edge peer into the archive, 20 history clients paging and 8 hostile peers misbehaving meanwhile; zero
# acknowledged loss, no error in the good clients, RSS and descriptors of every process flat. Not part of
# `make test`, which runs a ~15 s smoke of the same code (tests/e2e/test_e2e_soak_smoke.py).
#   make soak                        SQLite archive; writes bench/results/soak.json and docs/soak.svg
#   make soak ARCHIVE=cassandra      the local Cassandra node (started if needed), keyspace mailmesh_soak
#   make soak SOAK_ARGS="--duration 120 --rate 500"   shorter or slower runs (see python -m bench.soak --help)

SOAK_ARGS ?=

.PHONY: soak
soak: bootstrap $(if $(filter cassandra,$(ARCHIVE)),cassandra-start) ## 10-minute soak: 1,000 envelopes/s + 20 history clients + 8 hostile peers (ARCHIVE=sqlite|cassandra); results in bench/results/soak.json, plot in docs/soak.svg
	$(PY) -m bench.soak --archive $(ARCHIVE) $(SOAK_ARGS)
