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

.PHONY: build tools test unit fuzz bench chaos soak demo demo-down lint fmt clean

build: ## build bin/sluice
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/sluice ./cmd/sluice

tools: ## build (or find in the cache) the pinned control-plane binaries
	@hack/tools/build.sh >/dev/null

test: tools ## every test, integration tests against the sandbox included
	SLUICE_TOOLS_BIN="$$(hack/tools/build.sh)" $(GO) test $(TEST_FLAGS) ./...

unit: ## only the tests that need no control plane
	$(GO) test -count=1 -short ./...

# The metadata parsers' fuzz targets (package:target). `go test` runs each
# with its seed corpus (the vendors' documented payloads) in every test run;
# `make fuzz` explores beyond the seeds for FUZZTIME each.
FUZZTIME    ?= 30s
FUZZTARGETS := azure:FuzzParseDocument aws:FuzzSpotAction aws:FuzzScheduledList aws:FuzzRebalanceAndLifecycle gcp:FuzzValues
fuzz: ## fuzz each metadata parser for FUZZTIME (default 30s each)
	for t in $(FUZZTARGETS); do \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./pkg/maintenance/$${t%%:*}/ || exit 1; \
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
	rm -rf bin

.PHONY: generate
generate: ## regenerate pkg/apis deepcopy functions and the chart's CRDs (controller-gen from the module proxy)
	hack/generate.sh
