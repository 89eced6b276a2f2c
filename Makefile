# Beacon — the two commands: `make run` and `make test`. Everything they need
# (Go tools pinned in tools/go.mod, Debian packages) they install themselves.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
TOOLS     := $(CURDIR)/.bin
DATA      := $(CURDIR)/.data
MODULES   := proto pkg services/ipam services/announcer services/gateway beaconctl k8s-adapter tests/integration
# kube-apiserver, etcd and kubectl for the k8s-adapter's tests (tests/testbins).
TESTBINS  ?= $(or $(BEACON_CACHE),$(CURDIR)/.cache)/testbins
GO_TEST_FLAGS ?= -race -count=1 -timeout=20m
FUZZTIME  ?= 30s
export PATH := $(TOOLS):$(PATH)

BUF           := $(TOOLS)/buf
GOLANGCI_LINT := $(TOOLS)/golangci-lint
TOOL_BINS     := $(BUF) $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc \
                 $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 $(GOLANGCI_LINT)

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

## ---- tools -----------------------------------------------------------------

$(TOOL_BINS) &: tools/go.mod tools/go.sum
	@echo ">> building pinned tools (tools/go.mod) into $(TOOLS)"
	cd tools && GOWORK=off GOBIN=$(TOOLS) go install tool
	@touch $(TOOL_BINS)

.PHONY: tools
tools: $(TOOL_BINS) ## Build the pinned Go tools (buf, protoc plugins, golangci-lint).

## ---- system packages -------------------------------------------------------

# Real routers and L2 clients for the announcer's tests (Debian packages).
DEB_PACKAGES := frr bird2 gobgpd iputils-arping iputils-ping ndisc6 tcpdump iproute2 iptables chromium
DEB_COMMANDS := /usr/lib/frr/bgpd /usr/lib/frr/bfdd /usr/lib/frr/zebra vtysh bird birdc gobgpd gobgp arping ping ndisc6 tcpdump ip iptables chromium

.PHONY: deps
deps: ## Install the Debian packages the tests need, if any is missing (needs root).
	@missing=""; for c in $(DEB_COMMANDS); do command -v $$c >/dev/null 2>&1 || [ -x $$c ] || missing="$$missing $$c"; done; \
	if [ -z "$$missing" ]; then echo ">> system packages present"; \
	elif [ "$$(id -u)" != 0 ]; then echo ">> missing:$$missing; run 'make deps' as root (tests that need them will say so and skip)"; \
	else echo ">> installing$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES) >/dev/null; fi

## ---- build and run ---------------------------------------------------------

.PHONY: build
build: ## Build ipamd, announcerd, gatewayd, beaconctl and k8s-adapter into bin/.
	go build -o $(BIN)/ipamd ./services/ipam/cmd/ipamd
	go build -o $(BIN)/announcerd ./services/announcer/cmd/announcerd
	go build -o $(BIN)/gatewayd ./services/gateway/cmd/gatewayd
	go build -o $(BIN)/beaconctl ./beaconctl
	go build -o $(BIN)/k8s-adapter ./k8s-adapter/cmd/k8s-adapter

# make run: ipamd (embedded etcd) behind gatewayd, with development
# certificates (one per role: the gateway presents its own to the IPAM)
# and a bootstrap admin token made on first start in .data/ (never checked
# in). Ctrl-C stops both.
.PHONY: run
run: build ## Run Beacon on this machine: IPAM (embedded etcd, data in .data/) behind the gateway on https://127.0.0.1:8443.
	@mkdir -p $(DATA)
	@$(BIN)/beaconctl certs dev --dir $(DATA)/certs >/dev/null
	@trap 'kill $$ipamd $$gw 2>/dev/null; wait; exit 0' INT TERM; \
	$(BIN)/ipamd --data-dir $(DATA)/ipamd --tls-cert $(DATA)/certs/server.pem --tls-key $(DATA)/certs/server-key.pem --tls-client-ca $(DATA)/certs/ca.pem & ipamd=$$!; \
	$(BIN)/gatewayd --ipam 127.0.0.1:7400 --ipam-tls-ca $(DATA)/certs/ca.pem --ipam-tls-cert $(DATA)/certs/client-beacon-gateway.pem --ipam-tls-key $(DATA)/certs/client-beacon-gateway-key.pem \
	  --dev-certs $(DATA)/certs --bootstrap-token-file $(DATA)/admin-token & gw=$$!; \
	for i in $$(seq 100); do [ -s $(DATA)/admin-token ] && break; sleep 0.1; done; \
	echo ">> ipamd:    gRPC with mutual TLS on 127.0.0.1:7400 (one certificate per role in $(DATA)/certs, see docs/security.md), metrics and health on http://127.0.0.1:7401"; \
	echo ">> gateway:  gRPC and REST on https://127.0.0.1:8443 (CA $(DATA)/certs/ca.pem), ops on http://127.0.0.1:8444"; \
	echo ">> admin token: $$(cat $(DATA)/admin-token)"; \
	echo ">> try:   curl --cacert $(DATA)/certs/ca.pem -H \"Authorization: Bearer $$(cat $(DATA)/admin-token)\" https://127.0.0.1:8443/v1/pools"; \
	echo ">>        curl --cacert $(DATA)/certs/ca.pem --cert $(DATA)/certs/client-tenant-demo.pem --key $(DATA)/certs/client-tenant-demo-key.pem https://127.0.0.1:8443/v1/tenants/demo/allocations"; \
	echo ">>        $(BIN)/beaconctl pool create web --range 192.0.2.0/24   (through the gateway, as admin)"; \
	wait -n $$ipamd $$gw; status=$$?; kill $$ipamd $$gw 2>/dev/null; wait; exit $$status

## ---- images and deployments ----------------------------------------------

# Container images with podman (installed if missing): the Go binaries,
# static and built here, in FROM-scratch images; etcd from testbins; one
# Debian lab root (mmdebstrap) for the compose lab's router and client.
# Nothing is rebuilt when its inputs did not change (see docs/operating.md).
IMAGES_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: images
images: testbins ## Build the container images (localhost/beacon/*:VERSION and :dev) with podman.
	TESTBINS=$(TESTBINS) VERSION=$(IMAGES_VERSION) deploy/images/build.sh

# The compose lab (deploy/compose) brought up from those images, its
# README's walk-through run against it, and torn down.
# It needs root (podman's bridge networks, NET_ADMIN): without root it
# says so and skips, like the other tests that need root. The walk-through
# runs a second time, loudly, if the first fails: once in CI both BFD
# sessions stayed down for a minute with BGP up, and the cause is not found
# yet (docs/operating.md, "Not done yet").
.PHONY: test-compose
test-compose: ## The images' labels and --version, and the compose lab's walk-through (deploy/compose/README.md) as a test; tears the lab down.
	@if [ "$$(id -u)" != 0 ]; then echo ">> SKIPPING test-compose: the images and the compose lab need root (podman bridge networks, NET_ADMIN); CI runs it as root"; exit 0; fi; \
	$(MAKE) --no-print-directory images && \
	BEACON_COMPOSE=1 go test $(GO_TEST_FLAGS) -v -run 'TestImages' ./tests/integration/compose/ && \
	{ BEACON_COMPOSE=1 go test $(GO_TEST_FLAGS) -v -run 'TestComposeWalkthrough' ./tests/integration/compose/ || \
	  { echo ">> RETRYING test-compose's walk-through ONCE: it failed above (a known flake, not understood yet: once both BFD sessions stayed down for a minute with BGP up; docs/operating.md, Not done yet)"; \
	    BEACON_COMPOSE=1 go test $(GO_TEST_FLAGS) -v -run 'TestComposeWalkthrough' ./tests/integration/compose/; }; }

## ---- generated code --------------------------------------------------------

# What buf generate writes (buf.gen.yaml): the Go API in proto/, the
# gateway's REST reverse proxy (grpc-gateway, standalone) and its OpenAPI
# document in services/gateway/internal/rest/.
GENERATED_DIRS  := proto services/gateway/internal/rest
GENERATED_FILES := -type f \( -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' \)

.PHONY: generate
generate: $(TOOL_BINS) ## Regenerate Go code (and the gateway's REST proxy and OpenAPI) from the .proto files.
	$(BUF) format -w
	$(BUF) generate

.PHONY: check-generated
check-generated: $(TOOL_BINS) ## Fail if the committed generated code is stale.
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(BUF) generate -o $$tmp; \
	stale=0; \
	for f in $$(cd $$tmp && find . $(GENERATED_FILES) | sort); do \
	  if ! cmp -s "$$tmp/$$f" "$$f"; then echo "stale: $$f"; stale=1; fi; \
	done; \
	for f in $$(find $(GENERATED_DIRS) $(GENERATED_FILES) | sort); do \
	  [ -f "$$tmp/$$f" ] || { echo "not generated by any .proto: $$f"; stale=1; }; \
	done; \
	[ $$stale = 0 ] || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	@echo ">> generated code is fresh"

## ---- lint ------------------------------------------------------------------

.PHONY: lint
lint: $(TOOL_BINS) ## buf lint, format and breaking; golangci-lint on every module.
	$(BUF) lint
	$(BUF) format --diff --exit-code
	@if git rev-parse -q --verify HEAD~1 >/dev/null && git cat-file -e HEAD~1:buf.yaml 2>/dev/null; then \
	  echo ">> buf breaking against HEAD~1"; $(BUF) breaking --against '.git#ref=HEAD~1'; \
	else echo ">> buf breaking: no previous commit with buf.yaml to compare with"; fi
	@for m in $(MODULES); do echo ">> golangci-lint $$m"; (cd $$m && $(GOLANGCI_LINT) run --allow-serial-runners ./...); done

## ---- tests -----------------------------------------------------------------

.PHONY: test
test: deps tools check-generated lint test-unit test-k8s test-integration test-compose test-fuzz ## Every check and test (what CI runs).
	@echo ">> make test: all passed"

.PHONY: test-unit
test-unit: build ## Go tests of every module, with the race detector (the real ipamd replicas of pkg/ipamtest from bin/).
	go vet $(addprefix ./,$(addsuffix /...,$(MODULES)))
	BEACON_BIN=$(BIN) go test $(GO_TEST_FLAGS) $(addprefix ./,$(addsuffix /...,$(filter-out tests/integration k8s-adapter,$(MODULES))))

.PHONY: testbins
testbins: ## Build kube-apiserver, etcd and kubectl for the adapter's tests, once (5-12 min fresh).
	tests/testbins/build.sh $(TESTBINS)

.PHONY: test-k8s
test-k8s: testbins build ## The k8s-adapter's tests, against a real kube-apiserver and ipamd.
	BEACON_TESTBINS=$(TESTBINS) BEACON_TESTBINS_REQUIRED=1 BEACON_BIN=$(BIN) go test $(GO_TEST_FLAGS) ./k8s-adapter/...

.PHONY: test-integration
test-integration: build testbins ## End-to-end tests against the real binaries (etcd from testbins for the multi-replica ones, and the short robustness run).
	BEACON_BIN=$(BIN) BEACON_TESTBINS=$(TESTBINS) BEACON_TESTBINS_REQUIRED=1 go test $(GO_TEST_FLAGS) ./tests/integration/...

# The short robustness run alone (it is part of test-integration):
# BEACON_ROBUSTNESS_SEED=N runs seed N again. See docs/reliability.md.
.PHONY: test-robustness
test-robustness: build testbins ## The robustness harness's short run: 3 ipamd on 3 etcd under faults, checked with porcupine.
	BEACON_BIN=$(BIN) BEACON_TESTBINS=$(TESTBINS) BEACON_TESTBINS_REQUIRED=1 go test $(GO_TEST_FLAGS) -v -run 'TestRobustness|TestModel|TestCheckerCatchesBrokenAllocator' ./tests/integration/robustness/ \
	  | grep -vE '^ +[a-z_]+\.go:[0-9]+: fault '

# Longer robustness runs: ROBUSTNESS_RUNS runs of ROBUSTNESS_DURATION each.
ROBUSTNESS_RUNS     ?= 5
ROBUSTNESS_DURATION ?= 60s

# Every fuzz target, PACKAGE:FuzzName, grouped by package (docs/reliability.md,
# "Fuzzing"). Seeds and crashers live in PACKAGE/testdata/fuzz/FuzzName/.
FUZZ_TARGETS := \
  beaconctl/internal/cli:FuzzFlagValues \
  beaconctl/internal/cli:FuzzRangeKey \
  beaconctl/internal/cli:FuzzResourceRefs \
  k8s-adapter/internal/metallb:FuzzMetalLBSpec \
  k8s-adapter/internal/metallb:FuzzMetalLBNumber \
  k8s-adapter/internal/metallb:FuzzResourceID \
  k8s-adapter/internal/request:FuzzServiceRequest \
  pkg/spiffeid:FuzzParse \
  pkg/spiffeid:FuzzID \
  proto/tenantscope:FuzzCheckRequest \
  services/announcer/cmd/announcerd:FuzzAnnouncerFlags \
  services/announcer/internal/ipamclient:FuzzPlanChange \
  services/announcer/internal/reconcile:FuzzRouteCommunities \
  services/gateway/internal/auth:FuzzIdentityURI \
  services/gateway/internal/auth:FuzzAuthorization \
  services/gateway/internal/frontdoor:FuzzRESTAllocateBody \
  services/gateway/internal/frontdoor:FuzzRESTBody \
  services/ipam/internal/addrspace:FuzzParseRange \
  services/ipam/internal/addrspace:FuzzFreeList \
  services/ipam/internal/addrspace:FuzzOverlap \
  services/ipam/internal/filter:FuzzParse \
  services/ipam/internal/filter:FuzzNarrowedFilter \
  services/ipam/internal/ipam:FuzzStandardCommunity \
  services/ipam/internal/ipam:FuzzLargeCommunity \
  services/ipam/internal/planner:FuzzCommunityLiteral \
  services/ipam/internal/selector:FuzzSelectorValidate \
  services/ipam/internal/selector:FuzzSetJSON \
  services/ipam/internal/server:FuzzAllocationRequest \
  services/ipam/internal/server:FuzzPoolRequest \
  services/ipam/internal/server:FuzzResourceNames \
  services/ipam/internal/server:FuzzTokens \
  services/ipam/internal/server:FuzzCommunityValue \
  services/ipam/internal/server:FuzzAnnouncementRequest \
  services/ipam/internal/server:FuzzAnnouncerHello
# The bounded run inside make test: FUZZTIME_SHORT inputs per target (a count,
# not a time: see docs/reliability.md, "How to run"), one worker.
FUZZTIME_SHORT ?= 3000x
# Workers per fuzz run in make fuzz (empty: one per core).
FUZZ_PARALLEL  ?=

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 30s) each; FUZZ=FuzzName runs one.
	@for spec in $(FUZZ_TARGETS); do \
	  pkg=$${spec%%:*}; fn=$${spec##*:}; \
	  [ -z "$(FUZZ)" ] || [ "$(FUZZ)" = "$$fn" ] || continue; \
	  echo ">> $$fn ($$pkg)"; \
	  go test ./$$pkg -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s $(if $(FUZZ_PARALLEL),-parallel=$(FUZZ_PARALLEL)); \
	done

# One instrumented test binary per package (go test -c -fuzz), run once per
# target in the package's directory (for testdata/) with go test's corpus
# cache, so the package compiles once and not once per target.
.PHONY: test-fuzz
test-fuzz: ## Every fuzz target for FUZZTIME_SHORT (default 3000x: inputs) each, one worker (part of make test).
	@start=$$(date +%s); bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; \
	cache=$$(go env GOCACHE)/fuzz; n=0; \
	for pkg in $$(printf '%s\n' $(FUZZ_TARGETS) | cut -d: -f1 | uniq); do \
	  bin=$$bins/$$(echo $$pkg | tr / _).test; \
	  go test -c -fuzz=. -o $$bin ./$$pkg; \
	  path=$$(go list ./$$pkg); \
	  for spec in $(FUZZ_TARGETS); do \
	    [ "$${spec%%:*}" = "$$pkg" ] || continue; fn=$${spec##*:}; n=$$((n+1)); \
	    echo ">> $$fn ($$pkg, $(FUZZTIME_SHORT))"; \
	    crashers() { { ls $$pkg/testdata/fuzz/$$fn 2>/dev/null || true; } | wc -l; }; before=$$(crashers); \
	    run() { (cd $$pkg && $$bin -test.run='^$$' -test.fuzz="^$$fn$$" -test.fuzztime=$(FUZZTIME_SHORT) -test.fuzzminimizetime=5s \
	      -test.parallel=1 -test.fuzzcachedir=$$cache/$$path) | grep -v '^fuzz: elapsed'; }; \
	    run || { [ "$$(crashers)" = "$$before" ] && echo ">> $$fn failed without writing a crasher (go's fuzzing engine, under load?): once more" && run; } \
	      || { echo ">> $$fn failed: replay with: go test ./$$pkg -run='$$fn/NAME' (NAME: the file it wrote under $$pkg/testdata/fuzz/$$fn/)"; exit 1; }; \
	  done; \
	done; \
	echo ">> test-fuzz: $$n fuzz targets passed in $$(( $$(date +%s) - start )) s"

## ---- benchmarks ------------------------------------------------------------

.PHONY: bench
bench: build testbins ## Benchmarks; prints BENCH lines into bench.out too (see docs/performance.md).
	rm -f $(CURDIR)/bench.out
	go run ./services/ipam/cmd/ipam-bench --ipamd $(BIN)/ipamd --out $(CURDIR)/bench.out
	@echo ">> allocation load again, against a 3-member etcd cluster (real etcd processes, the production shape)"
	go run ./services/ipam/cmd/ipam-bench --only raw,beacon,raw3,echo,rawleader --etcd-cluster $(TESTBINS)/etcd --suffix _etcd3 --out $(CURDIR)/bench.out
	@echo ">> etcd leader loss: the leader of a 3-member cluster killed 30 times under load (see docs/reliability.md)"
	go run ./services/ipam/cmd/ipam-bench --etcd-cluster $(TESTBINS)/etcd --leader-kills 30 --out $(CURDIR)/bench.out
	@echo ">> robustness: $(ROBUSTNESS_RUNS) runs of $(ROBUSTNESS_DURATION) under faults, checked with porcupine (see docs/reliability.md)"
	BEACON_BIN=$(BIN) go run ./tests/integration/cmd/robustness --etcd $(TESTBINS)/etcd --runs $(ROBUSTNESS_RUNS) --duration $(ROBUSTNESS_DURATION) --clients 16 --out $(CURDIR)/bench.out
	go run ./services/gateway/cmd/gateway-bench --out $(CURDIR)/bench.out
	@if [ "$$(id -u)" = 0 ]; then BEACON_BIN=$(BIN) BEACON_TESTBINS=$(TESTBINS) go run ./tests/integration/cmd/announce-bench --out $(CURDIR)/bench.out; \
	else echo ">> SKIPPING the announcement benchmarks (L2 failover, drain, BFD, rolling IPAM restarts): they build network namespaces and need root"; fi
	@if [ "$$(id -u)" = 0 ]; then BEACON_BENCH=1 go test -count=1 -timeout=20m -run TestBenchBFDRecover -v ./services/announcer/internal/bgp/ \
	  | grep -E '^(BENCH|--- |ok|FAIL)|bfd_bench_test|recover.go' | tee -a $(CURDIR)/bench.out; \
	else echo ">> SKIPPING the BFD recovery benchmark (BIRD and FRR in network namespaces): it needs root"; fi
	$(MAKE) --no-print-directory bench-k8s | tee -a $(CURDIR)/bench.out

.PHONY: bench-k8s
bench-k8s: testbins build ## The k8s-adapter's benchmarks (1,000 and 10,000 Services; minutes); prints BENCH lines.
	BEACON_TESTBINS=$(TESTBINS) BEACON_TESTBINS_REQUIRED=1 BEACON_BIN=$(BIN) BEACON_K8S_BENCH=1 \
	  go test -count=1 -timeout=30m -run 'TestBench' -v ./k8s-adapter/internal/kube/ | grep -E '^(BENCH|--- |ok|FAIL)|bench_test'

.PHONY: bench-scale
bench-scale: build testbins ## Scale benchmarks: a million allocations, thousands of announcers (tens of minutes; not in make test); prints BENCH lines into bench-scale.out too. SCALE_FLAGS=--quick for a short check.
	rm -f $(CURDIR)/bench-scale.out
	go run ./services/ipam/cmd/ipam-scale --ipamd $(BIN)/ipamd --etcd $(TESTBINS)/etcd $(SCALE_FLAGS) --out $(CURDIR)/bench-scale.out

.PHONY: clean
clean: ## Remove built binaries and local data.
	rm -rf $(BIN) $(DATA) bench.out bench-scale.out
