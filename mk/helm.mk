# The chart's tools (charts/mailmesh, tests/charts, docs/platform-notes.md "Validating manifests offline"), built or
# fetched from the Go module proxy and pinned here; everything lands in var/tools and a second run is a no-op.
# Included by the top-level Makefile (which defines PY and bootstrap); works on its own for the tools:
#   make helm-tools     helm (built from helm.sh/helm/v3) and the prometheus-operator CRDs
#   make helm-lint      helm lint --strict of charts/mailmesh for every ci/*-values.yaml
#   make k8s-render     regenerate k8s/mailmesh/ from the chart's production scenario (tests check the drift)
#
# Needs Go >= 1.24 (no C compiler: CGO_ENABLED=0). Modules are verified against the checksum database as the
# go command always does, and the CRD module's hash is pinned below as well.

GO               ?= go
PY               ?= .venv/bin/python
TOOLS_DIR        := var/tools
TOOLS_BIN        := $(TOOLS_DIR)/bin
# helm v3 (what platform teams run; v4 changes the schema error texts, docs/platform-notes.md).
HELM_VERSION     := v3.22.0
HELM             := $(TOOLS_BIN)/helm
HELM_STAMP       := $(TOOLS_DIR)/.helm-$(HELM_VERSION)
# helm's own Makefile stamps the version and the default Kubernetes version (client-go v0.37 -> 1.37) with -X;
# `go install` alone would leave v1.20, which the chart's kubeVersion refuses.
HELM_LDFLAGS     := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  $(foreach pkg,pkg/lint/rules pkg/chartutil,-X helm.sh/helm/v3/$(pkg).k8sVersionMajor=1 -X helm.sh/helm/v3/$(pkg).k8sVersionMinor=37)
# The ServiceMonitor and PrometheusRule CRDs, from the prometheus-operator module's example/ directory; the
# chart's custom resources are validated against their openAPIV3Schema (tests/charts).
PROMOP_MODULE    := github.com/prometheus-operator/prometheus-operator
PROMOP_VERSION   := v0.85.0
PROMOP_SUM       := h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=
CRDS_DIR         := $(TOOLS_DIR)/crds/prometheus-operator-$(PROMOP_VERSION)
CRDS_STAMP       := $(CRDS_DIR)/.stamp
CHART            := charts/mailmesh
K8S_RENDER_NS    := mailmesh

.PHONY: helm-tools helm-lint k8s-render

$(HELM_STAMP):
	@command -v $(GO) >/dev/null || { echo "go is not on PATH: install Go >= 1.24 (https://go.dev/dl/)" >&2; exit 1; }
	@mkdir -p $(TOOLS_BIN)
	@# Built into a temporary directory and moved, so an interrupted build leaves no half-written helm.
	rm -rf $(TOOLS_DIR)/.helm-build && mkdir -p $(TOOLS_DIR)/.helm-build
	GOBIN=$(abspath $(TOOLS_DIR)/.helm-build) CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 \
	  $(GO) install -trimpath -ldflags='$(HELM_LDFLAGS)' \
	  helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv -f $(TOOLS_DIR)/.helm-build/helm $(HELM) && rm -rf $(TOOLS_DIR)/.helm-build
	rm -f $(TOOLS_DIR)/.helm-v* && touch $@

$(CRDS_STAMP):
	@command -v $(GO) >/dev/null || { echo "go is not on PATH: install Go >= 1.24 (https://go.dev/dl/)" >&2; exit 1; }
	@mkdir -p $(CRDS_DIR)
	GOFLAGS=-mod=mod $(GO) mod download -json $(PROMOP_MODULE)@$(PROMOP_VERSION) > $(CRDS_DIR)/module.json
	@sum=$$($(PY) -c 'import json,sys; print(json.load(open(sys.argv[1]))["Sum"])' $(CRDS_DIR)/module.json); \
	  test "$$sum" = "$(PROMOP_SUM)" || { echo "$(PROMOP_MODULE)@$(PROMOP_VERSION): hash $$sum, pinned $(PROMOP_SUM)" >&2; exit 1; }
	dir=$$($(PY) -c 'import json,sys; print(json.load(open(sys.argv[1]))["Dir"])' $(CRDS_DIR)/module.json); \
	  for kind in servicemonitors prometheusrules; do \
	    cp "$$dir/example/prometheus-operator-crd/monitoring.coreos.com_$$kind.yaml" $(CRDS_DIR)/$$kind.yaml; \
	    chmod u+w $(CRDS_DIR)/$$kind.yaml; \
	  done
	@touch $@

helm-tools: $(HELM_STAMP) $(CRDS_STAMP) ## Build helm $(HELM_VERSION) from its Go module and fetch the prometheus-operator CRDs (var/tools)

helm-lint: helm-tools ## helm lint --strict charts/mailmesh with every ci/*-values.yaml
	@for values in $(CHART)/ci/*-values.yaml; do \
	  echo "helm lint --strict -f $$values"; \
	  $(HELM) lint --strict $(CHART) -f $$values --kube-version 1.32.0 --quiet; \
	done

# k8s/mailmesh/ is the production scenario rendered with the Spark job left out (k8s/spark/ holds it, kustomize
# adds it) and kustomize's own namespace; tests/charts/test_chart_k8s.py fails when the file has drifted.
k8s-render: helm-tools bootstrap ## Regenerate k8s/mailmesh/ (kustomize base) from the chart's production scenario
	$(PY) -m tests.charts.render_k8s --out k8s/mailmesh

# Every test tier includes tests/charts: build the tools first.
test: helm-tools
