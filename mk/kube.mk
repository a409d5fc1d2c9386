# The live cluster test (charts/mailmesh README "Live cluster test", docs/platform-notes.md "Live cluster test"):
# a real etcd + kube-apiserver + kube-controller-manager + kube-scheduler with kwok's fake nodes, as local
# processes on loopback, `helm install --wait` of the minimal scenario and `helm test`. Not part of `make test`
# (a cold build takes many minutes); included by the top-level Makefile with `-include`, usable on its own:
#   make kube-tools      build the control plane from its Go modules into var/kube/bin (no-op when up to date)
#   make k8s-live-test   kube-tools, helm-tools, then pytest tests/charts/live
#
# Needs Go >= 1.26 and no C compiler (CGO_ENABLED=0). Everything comes from the Go module proxy, verified against
# tools/kube/go.sum: the versions are pinned in tools/kube/go.mod (Kubernetes, its staging modules, etcd, kwok).
# One multi-call binary (tools/kube/cmd/kubecluster) is linked once and each program is a symlink to it. The
# build cache is var/kube/go-build, so `rm -rf var/kube` is a cold start and the cache goes with it.

GO               ?= go
PY               ?= .venv/bin/python
KUBE_DIR         := var/kube
KUBE_BIN         := $(KUBE_DIR)/bin
KUBE_GOCACHE     := $(abspath $(KUBE_DIR)/go-build)
KUBE_PROGRAMS    := etcd kube-apiserver kube-controller-manager kube-scheduler kwok
KUBE_MULTI       := $(KUBE_BIN)/kubecluster
KUBE_STAGES      := $(KUBE_DIR)/stages/.stamp
KUBE_SOURCES     := tools/kube/go.mod tools/kube/go.sum $(wildcard tools/kube/cmd/kubecluster/*.go)
# Kubernetes' own build (hack/lib/version.sh) stamps the version with -X; without it the API server reports
# v0.0.0-master and helm refuses the chart's kubeVersion. The version is the one go.mod pins.
KUBE_VERSION     := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' tools/kube/go.mod 2>/dev/null)
KUBE_MINOR       := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS     := -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=1 -X $(pkg).gitMinor=$(KUBE_MINOR) -X $(pkg).gitTreeState=clean)
# kwok's stages as kwokctl configures them (pkg/kwokctl/runtime/cluster.go: node "fast" + "heartbeat", pod
# "fast"), copied from the pinned module; tests/charts/live adds its own for the helm test hook.
KWOK_STAGE_FILES := node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml

.PHONY: kube-tools k8s-live-test

# Built into a temporary name and renamed, so an interrupted build leaves no half-written binary.
$(KUBE_MULTI): $(KUBE_SOURCES)
	@command -v $(GO) >/dev/null || { echo "go is not on PATH: install Go >= 1.26 (https://go.dev/dl/)" >&2; exit 1; }
	@mkdir -p $(KUBE_BIN)
	cd tools/kube && GOCACHE=$(KUBE_GOCACHE) CGO_ENABLED=0 nice -n 10 $(GO) build -mod=readonly -trimpath \
	  -buildvcs=false -ldflags='$(KUBE_LDFLAGS)' -o $(abspath $@).partial ./cmd/kubecluster
	mv -f $@.partial $@
	for program in $(KUBE_PROGRAMS); do ln -sfn kubecluster $(KUBE_BIN)/$$program; done

# `go list -m` names the module's directory only once it is in the module cache (empty otherwise): download first.
$(KUBE_STAGES): tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(dir $@)
	dir=$$(cd tools/kube && $(GO) mod download sigs.k8s.io/kwok && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
	  test -n "$$dir" && for f in $(KWOK_STAGE_FILES); do install -m 644 "$$dir/kustomize/stage/$$f" $(dir $@)$$(basename $$f); done
	@touch $@

kube-tools: $(KUBE_MULTI) $(KUBE_STAGES) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from their Go modules (var/kube/bin)

# Included by the top-level Makefile (bootstrap, helm-tools); on its own, the venv and helm must exist.
k8s-live-test: kube-tools $(if $(STAMP_PROTO),bootstrap helm-tools) ## Live cluster test (not in `make test`): helm install --wait + helm test on a real API server with kwok nodes
	$(PY) -m pytest tests/charts/live -p no:cacheprovider --basetemp=$(KUBE_DIR)/run $(PYTEST_ARGS)
