# Coverage-guided fuzzing of the decoders with atheris (libFuzzer for CPython; docs/fuzzing.md).
# Included by the top-level Makefile, which defines PY and bootstrap. atheris is a `dev` dependency, installed
# by bootstrap from requirements.lock; nothing else is fetched.
#   make fuzz                           every harness for 10^6 executions, two at a time (~15 min on an idle 2-core box)
#   make fuzz FUZZ_ARGS='--only rlp hello --runs 100000'
#   make fuzz-seeds                     rewrite fuzz/corpus/ from the vectors and our encoders

PY        ?= .venv/bin/python
FUZZ_ARGS ?=

.PHONY: fuzz fuzz-seeds

fuzz: bootstrap ## Fuzz every decoder 10^6 times (FUZZ_ARGS='--only NAME --runs N'); results in bench/results/fuzz.json and docs/fuzzing.md
	$(PY) -m fuzz.campaign $(FUZZ_ARGS)

fuzz-seeds: bootstrap ## Rewrite the seed corpora fuzz/corpus/<harness>/ (deterministic)
	$(PY) -m fuzz.seeds
