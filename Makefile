# collapser: a gRPC sidecar that collapses duplicate unary calls to its backend.
#
# Common uses:
#   make local-demo                  # build, run backend + sidecar on loopback, send bursts
#   make test                        # unit tests with -race (root module and test/)
#   make lint                        # gofmt, go vet, staticcheck, generated-code drift
#   make generate                    # regenerate src/api after editing a .proto
#   make bench BENCH=Group BENCHTIME=2s
#   make load                        # load benchmarks through the whole sidecar (-race)
#   make help                        # every target, grouped
#
# Longer logic lives in scripts/; every recipe here is one line.

GO ?= go
BIN_DIR := bin
CMDS := ./src/cmd/collapser ./src/cmd/hello-backend ./src/cmd/democlient

# Pinned tool versions, read by the scripts.
export STATICCHECK_VERSION := v0.8.2
export PROTOC_VERSION := 3.21.12
export PROTOC_GEN_GO_VERSION := v1.36.12
export PROTOC_GEN_GO_GRPC_VERSION := v1.6.0

# Benchmark filter and duration; packages measured by `make bench`.
BENCH ?= .
BENCHTIME ?= 1s
BENCH_PKGS ?= ./src/collapse/ ./src/proxy/
# How long `make fuzz` runs the key-injectivity fuzzer.
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

################################################################################
##@ General

help: ## Show this list of targets.
	@awk 'BEGIN {FS = ":.*## "} /^##@ / {printf "\n%s\n", substr($$0, 5)} /^[a-z][a-z-]*:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

################################################################################
##@ Build

build: ## Build static binaries into ./bin: collapser, hello-backend, democlient.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/ $(CMDS)

clean: ## Remove ./bin (binaries and protoc plugins).
	rm -rf $(BIN_DIR)

################################################################################
##@ Test

test: ## Run the unit tests with -race (root module, then test/ when present).
	./scripts/test.sh

bench: ## Run engine and proxy benchmarks once (BENCH=regexp, BENCHTIME=1s).
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) -count=1 $(BENCH_PKGS)

load: ## Run the load benchmarks once with -race: steady load vs latency+TTL, goroutines and heap over 100,000 requests.
	$(GO) test -race -run='^$$' -bench='^BenchmarkLoad' -benchtime=1x -count=1 ./src/sidecar/

fuzz: ## Fuzz requestkey's FuzzKeyInjective for FUZZTIME (30s).
	$(GO) test -run='^$$' -fuzz='^FuzzKeyInjective$$' -fuzztime=$(FUZZTIME) ./src/requestkey/

################################################################################
##@ Lint and generated code

lint: verify-generated verify-dashboards ## Check gofmt, go vet, staticcheck, generated code and dashboard copies.
	./scripts/lint.sh

fmt: ## Rewrite Go files with gofmt (the fix for lint's gofmt check).
	gofmt -w src $(wildcard test)

generate: ## Regenerate src/api Go code from the .proto files (pinned protoc and plugins).
	./scripts/generate.sh

verify-generated: ## Fail if src/api's generated code differs from a fresh generate.
	./scripts/verify-generated.sh

dashboards: ## Copy dashboards/collapser.json into the chart (Helm reads only inside it).
	./scripts/dashboards.sh update

verify-dashboards: ## Fail if the chart's dashboard copy differs from dashboards/collapser.json.
	./scripts/dashboards.sh verify

################################################################################
##@ Demo

local-demo: build ## Run hello-backend + collapser on loopback and send demo bursts.
	./scripts/local-demo.sh

.PHONY: help build clean test bench load fuzz lint fmt generate verify-generated dashboards verify-dashboards local-demo
