# promtool, Prometheus's own rule checker, built from its Go module (docs/operations.md "Checking the alert
# rules"): `promtool check rules` and `promtool test rules` run over charts/mailmesh/files/prometheus/ in
# tests/charts/test_monitoring_alerts.py. Included by the top-level Makefile (`make test` depends on
# `promtool`) and usable on its own: `make -f mk/promtool.mk promtool` (the tests call that once per session).
#
# Needs Go >= 1.26.7 (what the module's go.mod asks for); no C compiler (CGO_ENABLED=0). `go install
# module@version` fetches the module and its dependencies from the Go module proxy, verified against the module's
# own go.sum and the checksum database. Built with Prometheus's own `remove_all_sd` build tag (plugins/*.go):
# checking and unit-testing rules needs no service discovery, and leaving out the cloud providers' SDKs makes
# the first build take minutes instead of most of an hour on two shared cores; later builds come from Go's
# build cache.

GO               ?= go
# Prometheus 3.16.0: the Go module tags Prometheus vX.Y.Z as v0.X0Y.Z (v3.16.0 -> v0.316.0).
PROMTOOL_VERSION := v0.316.0
PROMTOOL_PKG     := github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_DIR     := var/tools/bin
PROMTOOL         := $(PROMTOOL_DIR)/promtool
PROMTOOL_STAMP   := $(PROMTOOL_DIR)/.promtool-$(PROMTOOL_VERSION)

.PHONY: promtool

# The stamp names the version, so changing PROMTOOL_VERSION rebuilds. Built into a scratch GOBIN and moved into
# place, so an interrupted build leaves no half-written binary behind.
$(PROMTOOL_STAMP):
	@command -v $(GO) >/dev/null || { echo "go is not on PATH: install Go >= 1.26.7 (https://go.dev/dl/)" >&2; exit 1; }
	@mkdir -p $(PROMTOOL_DIR)/.promtool-build
	CGO_ENABLED=0 GOBIN=$(abspath $(PROMTOOL_DIR)/.promtool-build) nice -n 10 \
	  $(GO) install -trimpath -tags remove_all_sd $(PROMTOOL_PKG)@$(PROMTOOL_VERSION)
	mv -f $(PROMTOOL_DIR)/.promtool-build/promtool $(PROMTOOL)
	@rm -rf $(PROMTOOL_DIR)/.promtool-build $(PROMTOOL_DIR)/.promtool-v*
	@touch $@

$(PROMTOOL): $(PROMTOOL_STAMP)

promtool: $(PROMTOOL_STAMP) ## Build promtool (Prometheus rule checks) from its Go module into var/tools/bin
