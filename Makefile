# collapser: a gRPC sidecar that collapses duplicate calls (unary, and server streams it replays) to its backend.
#
# Common uses:
#   make local-demo                  # build, run backend + sidecar on loopback, send bursts
#   make test                        # unit tests with -race (root module and test/)
#   make lint                        # tracked files, gofmt, go vet, staticcheck, generated-code drift
#   make generate                    # regenerate src/api after editing a .proto
#   make bench BENCH=Group BENCHTIME=2s
#   make load                        # load benchmarks through the whole sidecar
#   make bench-peers                 # collapser vs direct, nginx grpc_pass and a plain Go proxy
#   make e2e                         # kind cluster + chart + Terratest (see scripts/e2e.sh)
#   make rollout-load                # on kind: the backend calls a rolling restart adds
#   make help                        # every target, grouped
#
# Longer logic lives in scripts/; every recipe here is one line.

GO ?= go
BIN_DIR := bin
CMDS := ./src/cmd/collapser ./src/cmd/hello-backend ./src/cmd/democlient ./src/cmd/collapser-injector

# Pinned tool versions, read by the scripts.
export STATICCHECK_VERSION := v0.8.2
export PROTOC_VERSION := 3.21.12
export PROTOC_GEN_GO_VERSION := v1.36.12
export PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
export KIND_VERSION := v0.33.0
export HELM_VERSION := v3.22.0
export HELM4_VERSION := v4.3.1
export CT_VERSION := v3.14.0
export KUBECONFORM_VERSION := v0.8.0
export HELM_DOCS_VERSION := v1.14.2
# The Kubernetes version whose API the chart is validated against (kubeconform),
# the prometheus-operator release whose ServiceMonitor CRD is used, and the
# cert-manager release whose Certificate and Issuer CRDs are used.
export KUBE_SCHEMA_VERSION := v1.34.4
export PROMETHEUS_OPERATOR_VERSION := v0.85.0
export CERT_MANAGER_VERSION := v1.21.2
# The Prometheus module built into the chart's Prometheus image where none can be pulled.
export PROMETHEUS_MODULE_VERSION := v0.316.0
# The gRPC load tester of make bench-peers.
export GHZ_VERSION := v0.120.0

# The kind cluster of make cluster/deploy/demo/grafana.
KIND_CLUSTER ?= collapser
# kubectl for make grafana; empty: one on PATH, else the kind-offline kit's.
KUBECTL ?=

# Benchmark filter and duration; packages measured by `make bench`.
BENCH ?= .
BENCHTIME ?= 1s
BENCH_PKGS ?= ./src/internal/collapse/ ./src/internal/proxy/ ./src/collapser/ ./src/internal/inject/webhook/
# Extra flags of make load, e.g. RACE=-race (it slows every call, so the timing
# numbers of the sustained-load benchmark are measured without it by default).
RACE ?=
# How long `make fuzz` runs the key-injectivity fuzzer.
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

################################################################################
##@ General

help: ## Show this list of targets.
	@awk 'BEGIN {FS = ":.*## "} /^##@ / {printf "\n%s\n", substr($$0, 5)} /^[a-z][a-z-]*:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

################################################################################
##@ Build

build: ## Build static binaries into ./bin: collapser, hello-backend, democlient, collapser-injector.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/ $(CMDS)

clean: ## Remove ./bin (binaries and protoc plugins).
	rm -rf $(BIN_DIR)

################################################################################
##@ Test

test: ## Run the unit tests with -race (root module, then test/ when present).
	./scripts/test.sh

bench: ## Run engine, proxy, library and injector admission benchmarks once (BENCH=regexp, BENCHTIME=1s).
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) -count=1 $(BENCH_PKGS)

load: ## Run the load benchmarks once (RACE=-race to add the detector): steady load vs latency+TTL, heap over 100,000 requests, what the caches hold against what they count, many keys expiring together, a rolling restart of three replicas, requests that each carry an id.
	$(GO) test $(RACE) -run='^$$' -bench='^BenchmarkLoad' -benchtime=1x -count=1 ./src/internal/sidecar/

bench-peers: build ## Compare collapser with direct, nginx grpc_pass and a plain Go proxy, misses with and without peers (BENCH_SCENARIOS, BENCH_ROUNDS; not in CI).
	./scripts/bench-peers.sh

fuzz: ## Fuzz requestkey's FuzzKeyInjective for FUZZTIME (30s).
	$(GO) test -run='^$$' -fuzz='^FuzzKeyInjective$$' -fuzztime=$(FUZZTIME) ./src/internal/requestkey/

################################################################################
##@ Lint and generated code

lint: verify-tracked verify-readme verify-app-version verify-generated verify-dashboards ## Check tracked files, the README's length, the appVersion bump, gofmt, go vet, staticcheck, generated code, dashboard copies, module versions, Markdown links and scripts.
	./scripts/lint.sh

fmt: ## Rewrite Go files with gofmt (the fix for lint's gofmt check).
	gofmt -w src $(wildcard test)

generate: ## Regenerate src/api Go code from the .proto files (pinned protoc and plugins).
	./scripts/generate.sh

verify-generated: ## Fail if src/api's generated code differs from a fresh generate.
	./scripts/verify-generated.sh

dashboards: ## Generate dashboards/collapser.json and the chart's copy from test/tools/dashboardgen (Go, Grafana Foundation SDK).
	./scripts/dashboards.sh update

verify-dashboards: ## Fail if either dashboard copy differs from a fresh generation by test/tools/dashboardgen.
	./scripts/dashboards.sh verify

verify-links: ## Fail if a relative link or #anchor in a Markdown file git knows of is broken.
	cd test && $(GO) test -count=1 ./tools/mdlinks/

verify-modules: ## Fail if the root and test/ Go modules require a module they share at different versions.
	cd test && $(GO) test -count=1 ./tools/gomods/

verify-tracked: ## Fail if git tracks a binary (other than an image asset) or a file over 1 MiB.
	./scripts/verify-tracked.sh

verify-readme: ## Fail if README.md is longer than 250 lines (it is a map; detail lives in the docs it links).
	./scripts/verify-readme.sh

verify-app-version: ## Fail if src/, go.mod, go.sum or the Dockerfile changed since the chart's appVersion (the images' tag) was last bumped.
	./scripts/verify-app-version.sh

verify-scripts: ## Fail on shellcheck findings in scripts/ and .ci/run.
	./scripts/apt-install.sh shellcheck && shellcheck -x -P SCRIPTDIR scripts/*.sh .ci/run

verify: lint chart-lint ## Every check: make lint and make chart-lint (kind's hack/verify-all).

################################################################################
##@ Images, chart and cluster

images: ## Build the collapser, hello-backend, democlient and collapser-injector images (IMAGE_TAG, default the chart's appVersion).
	./scripts/images.sh

images-gobuild: ## Build the same images compiling inside GO_IMAGE (needs a registry for the Go image).
	IMAGE_BIN_SOURCE=gobuild ./scripts/images.sh

prometheus-image: ## Pull the chart's Prometheus image, or build it from the Go module proxy.
	./scripts/prometheus-image.sh

tools: ## Install the pinned kind, helm (3), helm4, ct, kubeconform and helm-docs into ./bin.
	./scripts/tools.sh

chart-lint: verify-dashboards ## Helm 3 and 4: lint --strict, render every values file through kubeconform -strict; ct lint; verify-chart-docs.
	./scripts/chart-lint.sh

chart-docs: ## Regenerate the values table of charts/collapser/README.md from values.yaml (helm-docs).
	./scripts/chart-docs.sh update

verify-chart-docs: ## Fail if the chart README's values table differs from values.yaml.
	./scripts/chart-docs.sh verify

chart-install: ## On the kind cluster: ct install (Helm 3, every ci/ file, helm test), then a Helm 4 install and test (CT_SET=...).
	KIND_CLUSTER=$(KIND_CLUSTER) ./scripts/chart-install.sh

cluster: ## Create the kind cluster "collapser" (KIND_NODE_IMAGE, KIND_CONFIG, KIND_OFFLINE_DIR).
	KIND_CLUSTER=$(KIND_CLUSTER) ./scripts/cluster.sh up

deploy: ## Build images, load them into kind, helm upgrade --install with Prometheus + Grafana (GRAFANA=false offline).
	KIND_CLUSTER=$(KIND_CLUSTER) ./scripts/deploy.sh

deploy-injector: ## Build the sidecar's and injector's images, load them into kind, install the injector alone (README: Put it in front of a service; PROMETHEUS=true adds a Prometheus that scrapes it).
	KIND_CLUSTER=$(KIND_CLUSTER) ./scripts/deploy.sh injector

demo: ## Burst through the Service (helm test): prints the backend's own call count and the collapse ratio.
	PATH="$(CURDIR)/bin:$$PATH" helm test collapser --namespace collapser --kube-context kind-$(KIND_CLUSTER)

grafana: ## Forward Grafana to http://localhost:3000 (KUBECTL: a kubectl on PATH or the kind-offline kit's).
	KIND_CLUSTER=$(KIND_CLUSTER) KUBECTL=$(KUBECTL) ./scripts/grafana.sh

cluster-down: ## Delete the kind cluster.
	KIND_CLUSTER=$(KIND_CLUSTER) ./scripts/cluster.sh down

e2e: ## End-to-end tests on a kind cluster (KIND_NODE_IMAGE, KIND_OFFLINE_DIR: see scripts/e2e.sh).
	./scripts/e2e.sh

rollout-load: ## On kind: what a rolling restart of three replicas under a steady load on many keys costs the backends (not in CI; test/README.md).
	E2E_RUN='^TestRolloutLoadOnKind$$' E2E_PROMETHEUS=0 ./scripts/e2e.sh

################################################################################
##@ Demo

local-demo: build ## Run hello-backend + collapser on loopback and send demo bursts.
	./scripts/local-demo.sh

.PHONY: help build clean test bench load bench-peers fuzz lint fmt generate verify-generated dashboards verify-dashboards verify-links verify-modules verify-tracked verify-readme verify-app-version verify-scripts verify images images-gobuild prometheus-image tools chart-lint chart-docs verify-chart-docs chart-install cluster deploy deploy-injector demo grafana cluster-down e2e rollout-load local-demo
