# sluice — see README.md. `make demo` and `make test` work on a fresh machine:
# the control-plane binaries are built from Go modules on first use and cached
# outside the clone (hack/tools/build.sh).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO            ?= go
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT        ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS       := -X github.com/sluice-dev/sluice/internal/version.Version=$(VERSION) -X github.com/sluice-dev/sluice/internal/version.Commit=$(COMMIT)
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# Each integration test package starts its own control plane; two at a time fit
# a 2-core machine comfortably.
TEST_FLAGS    ?= -race -count=1 -p 2 -timeout 45m

.PHONY: build dist image tools test test-compat unit fuzz bench chaos soak demo demo-down lint fmt clean

build: ## build bin/sluice, and bin/kubectl-sluice (the same binary, as a kubectl plugin: put bin/ on the PATH and run `kubectl sluice`)
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/sluice ./cmd/sluice
	ln -f bin/sluice bin/kubectl-sluice

dist: ## release archives for linux and darwin, amd64 and arm64, and the krew manifest, in dist/ (VERSION=vX.Y.Z)
	hack/release/package.sh $(VERSION)
	hack/release/krew-manifest.sh $(VERSION) > dist/sluice.yaml

image: ## the OCI image, linux/amd64 and linux/arm64, as an OCI layout in dist/image (no Docker daemon); IMAGE=registry/repo:tag pushes it too
	hack/image/build.sh $(VERSION)

tools: ## build (or find in the cache) the pinned control-plane binaries, Helm v3 and v4 and promtool for the chart's tests, the Prometheus server (built beside promtool) for the walk, krew for the plugin's; find (or apt-get) Chromium for the timeline's
	@hack/tools/build.sh >/dev/null
	@hack/tools/chromium.sh >/dev/null
	@hack/tools/helm.sh >/dev/null
	@hack/tools/gotool.sh helm4 >/dev/null
	@hack/tools/gotool.sh promtool >/dev/null
	@hack/tools/gotool.sh krew >/dev/null

test: tools ## every test, integration tests against the sandbox included; a missing tool (moto_server, Helm, ...) fails the run, naming it
	hack/tools/require.sh
	SLUICE_REQUIRE_TOOLS=1 SLUICE_TOOLS_BIN="$$(hack/tools/build.sh)" SLUICE_HELM="$$(hack/tools/helm.sh)" SLUICE_HELM4="$$(hack/tools/gotool.sh helm4)" SLUICE_PROMTOOL="$$(hack/tools/gotool.sh promtool)" SLUICE_MONITORING_CRDS="$$(hack/tools/monitoring-crds.sh)" SLUICE_KREW="$$(hack/tools/gotool.sh krew)" SLUICE_CHROMIUM="$$(hack/tools/chromium.sh)" SLUICE_CAPI="$$(hack/tools/capi.sh)" $(GO) test $(TEST_FLAGS) ./...

# The subset that proves the oldest Kubernetes minor sluice supports (1.30,
# docs/operations.md#kubernetes-versions): drain parity with that version's
# kubectl, the agent's admission policy, maintenance events, a drift, the
# chart's install and an upgrade of it. hack/tools/build.sh compat builds
# that control plane (cached like the main one).
COMPAT_TESTS := ^(TestParityWithKubectlDrain|TestLeastPrivilege|TestAzureRedeployDrainsApprovesAndUncordonsAfterwards|TestAzurePreemptWithThirtySecondsNoticeDrainsInTimeAndApproves|TestDriftReplacesEveryNodeWithinTheBudget|TestDeletingANodeDrainsItFirst|TestRenderedChartPassesAServerSideDryRun|TestHelmInstallAndUpgrade)$$
COMPAT_PKGS  := ./test/e2e/ ./internal/agent/ ./internal/controller/maintenance/ ./internal/controller/nodepool/ ./charts/sluice/

test-compat: tools ## the compat subset against Kubernetes 1.30, the oldest minor sluice supports
	hack/tools/require.sh
	SLUICE_REQUIRE_TOOLS=1 SLUICE_TOOLS_BIN="$$(hack/tools/build.sh compat)" SLUICE_HELM="$$(hack/tools/helm.sh)" SLUICE_HELM4="$$(hack/tools/gotool.sh helm4)" SLUICE_MONITORING_CRDS="$$(hack/tools/monitoring-crds.sh)" $(GO) test -count=1 -p 1 -timeout 30m -run '$(COMPAT_TESTS)' $(COMPAT_PKGS)

unit: ## only the tests that need no control plane
	$(GO) test -count=1 -short ./...

# A fuzz target (package:target) for every parser of input sluice does not
# write itself: cloud metadata answers, NodePools and their budgets, the node
# annotations agents and people write, the CLI's selectors and flags, and the
# cgroup files. `go test` runs each with its seed corpus and the crashers kept
# in the package's testdata/fuzz/; `make fuzz` explores beyond them for
# FUZZTIME each, with -short, so packages with sandbox tests start none.
FUZZTIME    ?= 30s
FUZZTARGETS := \
	./internal/budget:FuzzBudget \
	./internal/disruption:FuzzNodePool \
	./internal/disruption:FuzzRecord \
	./internal/disruption:FuzzDoNotDisrupt \
	./internal/controller/maintenance:FuzzState \
	./internal/cli:FuzzSelector \
	./internal/cli:FuzzDrainFlags \
	./internal/importer:FuzzImport \
	./internal/agent:FuzzProviderID \
	./internal/memlimit:FuzzCgroupLimit \
	./pkg/maintenance:FuzzReport \
	./pkg/ownership:FuzzClaim \
	./pkg/drain:FuzzRemedy \
	./pkg/doctor:FuzzDiagnose \
	./pkg/maintenance/azure:FuzzParseDocument \
	./pkg/maintenance/aws:FuzzSpotAction \
	./pkg/maintenance/aws:FuzzScheduledList \
	./pkg/maintenance/aws:FuzzRebalanceAndLifecycle \
	./pkg/maintenance/aws:FuzzToken \
	./pkg/maintenance/aws:FuzzLifecycleState \
	./pkg/maintenance/aws:FuzzParseMessage \
	./pkg/maintenance/gcp:FuzzValues
# Go before 1.27 can fail a target with a bare "context deadline exceeded" as
# FUZZTIME runs out (go.dev/issue/75804); with no failing input written, that
# is no finding, and the loop goes on.
fuzz: ## fuzz every parser of outside input for FUZZTIME (default 30s) each
	@for t in $(FUZZTARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; log=$$(mktemp); \
	  echo "== $$pkg $$name"; \
	  if $(GO) test -short -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg 2>&1 | tee $$log; then rm -f $$log; continue; fi; \
	  if grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written' $$log; then \
	    echo "== $$pkg $$name: stopped by Go's fuzzing deadline race (go.dev/issue/75804), no finding"; rm -f $$log; continue; \
	  fi; \
	  rm -f $$log; exit 1; \
	done

# The fault-proof suite (docs/design/fault-proof.md); `make test` runs it too.
# SLUICE_CHAOS_SEED=N replays a run's kills and faults.
chaos: tools ## the auditor's self-test, controllers SIGKILLed mid-rollout, a faulty API server, least privilege (a few minutes)
	SLUICE_TOOLS_BIN="$$(hack/tools/build.sh)" $(GO) test -count=1 -v -timeout 40m ./test/audit/ ./test/chaos/

DURATION ?= 30m
soak: tools ## DURATION (default 30m) of mixed events, expiry, drift and drains on 200 nodes through the fault proxy; memory must stay flat
	SLUICE_TOOLS_BIN="$$(hack/tools/build.sh)" SLUICE_SOAK_DURATION=$(DURATION) $(GO) test -count=1 -v -timeout 6h -run '^TestSoak$$' ./test/chaos/

BENCH ?= .
bench: tools ## benchmarks (each builds its own cluster; BENCH=regexp picks some)
	SLUICE_TOOLS_BIN="$$(hack/tools/build.sh)" $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 240m ./test/bench/...

demo: build tools ## start the sandbox with a sample cluster and show sluice draining it
	hack/demo.sh

demo-down: build ## stop the demo sandbox
	bin/sluice sandbox down

lint: ## golangci-lint (built from the Go module proxy on first use)
	$(GO) run $(GOLANGCI_LINT) run ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin dist

.PHONY: generate
generate: ## regenerate pkg/apis deepcopy functions and the chart's CRDs (controller-gen from the module proxy)
	hack/generate.sh
