# Interop with real Waku/Whisper implementations (docs/interop.md): a go-ethereum v1.9.20 Whisper v6 peer, a
# status-go v0.50.0 Waku peer (waku/0) and a status-go v0.60.0 Waku peer (waku/1 and waku/0), built from
# tools/interop/{gethpeer,statuspeer,statuspeer060}. Works included by the
# top-level Makefile (`-include mk/interop.mk`) and on its own: `make -f mk/interop.mk interop-build` (the
# interop tests call that once per session).
#   make interop-build           build var/interop/{gethpeer,statuspeer,statuspeer060} (no-op when up to date)
#   make interop-test            build, then run tests/interop only
#
# Needs Go >= 1.21 and a C compiler (secp256k1 is cgo). Modules come from the Go module proxy into the module
# cache (~/go/pkg/mod), verified against each program's go.sum; nothing else is downloaded.

GO              ?= go
PY              ?= .venv/bin/python
INTEROP_OUT     := var/interop
INTEROP_PEERS   := gethpeer statuspeer statuspeer060
INTEROP_BINS    := $(addprefix $(INTEROP_OUT)/,$(INTEROP_PEERS))
# Every go-ethereum tree here (v1.9.20; status-go's fork v1.9.5-status.9) links github.com/fjl/memsize
# (node → internal/debug), which pulls runtime.stopTheWorld by go:linkname; Go >= 1.23 refuses that unless
# -checklinkname=0. The function is never called by our peers. Older toolchains do not know the flag (and do not
# need it). `go tool link -help` exits non-zero, and the Makefile's shell runs with pipefail, so its status is
# masked before the pipe.
INTEROP_LDFLAGS  = $(shell { $(GO) tool link -help 2>&1 || true; } | grep -q checklinkname && echo -checklinkname=0)

.PHONY: interop-build interop-test

# One rule per peer. Built into a temporary name and renamed, so an interrupted build leaves no stale binary.
define INTEROP_PEER_RULE
$(INTEROP_OUT)/$(1): $(wildcard tools/interop/$(1)/*.go) tools/interop/$(1)/go.mod tools/interop/$(1)/go.sum
	@command -v $(GO) >/dev/null || { echo "go is not on PATH: install Go >= 1.21 (https://go.dev/dl/)" >&2; exit 1; }
	@command -v $$$${CC:-cc} >/dev/null || { echo "no C compiler (cc) on PATH: secp256k1 needs cgo (apt-get install gcc)" >&2; exit 1; }
	@mkdir -p $(INTEROP_OUT)
	cd tools/interop/$(1) && CGO_ENABLED=1 nice -n 10 $(GO) build -mod=readonly -trimpath -buildvcs=false \
	  -ldflags='$$(INTEROP_LDFLAGS)' -o $(abspath $(INTEROP_OUT)/$(1)).partial .
	mv -f $(INTEROP_OUT)/$(1).partial $(INTEROP_OUT)/$(1)
endef
$(foreach peer,$(INTEROP_PEERS),$(eval $(call INTEROP_PEER_RULE,$(peer))))

interop-build: $(INTEROP_BINS) ## Build the go-ethereum v1.9.20, status-go v0.50.0 and v0.60.0 peers for the interop tests (var/interop)

# Included by the top-level Makefile (which defines `bootstrap`), bootstrap first; on its own, the venv must exist.
interop-test: $(INTEROP_BINS) $(if $(STAMP_PROTO),bootstrap) ## Run only the interop tests against real go-ethereum and status-go (tests/interop)
	$(PY) -m pytest tests/interop $(PYTEST_ARGS)
