# Quotascale. `make demo` and `make test` are the whole set-up on a fresh machine.

GO        ?= go
BIN       ?= bin
TEST_ARGS ?=
ARGS      ?=

.PHONY: all build test soak bench lint generate verify-generate local-up demo clean release

all: build

# Version stamping (pkg/version) of the programs `build` and `images` make;
# override on the command line, e.g. `make build VERSION=v0.1.0 COMMIT=abc1234`.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION_PKG := github.com/quotascale/quotascale/pkg/version
LDFLAGS      = -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)
# kube-scheduler --version is upstream's: the Kubernetes version it is built
# from, with ours as build metadata, as vendors' distributions do.
K8S_VERSION  = $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_LDFLAGS  = -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)+quotascale.$(VERSION) -X k8s.io/component-base/version.gitCommit=$(COMMIT)

## build: compile every package and the programs into ./bin
build:
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/localcluster ./cmd/localcluster
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/cluster-autoscaler ./cluster-autoscaler
	$(GO) build -ldflags "$(LDFLAGS) $(K8S_LDFLAGS)" -o $(BIN)/kube-scheduler ./scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-quota ./cmd/kubectl-quota

## test: lint, then every test (unit, property, e2e on the in-process control plane),
## then the planted-bug tests: the quota library built with a bug planted
## (-tags quotascale_plantedbug), which the oracle of test/oracle must catch.
## The packages whose own code runs goroutines or shares state between them
## (hack/race-packages.sh says how it tells) run under the race detector; the
## rest, e2e included, run without it: building Kubernetes' dependencies a
## second time with -race for packages that run no goroutines would cost a
## cold CI run minutes and find nothing. ./test/bench holds only benchmarks
## (go vet compiles it); `make bench` runs them.
## Both run with -vet=off: lint's go vet has already vetted every package with
## every analyzer, and go test's own vet pass (a subset of them) would vet
## every dependency again, once per build configuration, race and not: on a
## cold cache, two more type-checks of all of Kubernetes.
## The race run and the rest run side by side (make -j2, each one's output
## printed whole when it ends): the e2e tests, listed first so that they start
## first, spend most of their time waiting on the control plane, and the race
## build, at a lower CPU priority, fills the idle cores without slowing them.
TEST_PKGS = $(shell $(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e '/test/bench$$')
RACE_PKGS = $(shell ./hack/race-packages.sh)
E2E_PKG   = github.com/quotascale/quotascale/test/e2e
test: lint
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-race test-norace
	$(GO) test -vet=off -count=1 -tags quotascale_plantedbug -run '^TestOracleCatchesPlantedBug$$' ./quota/capacity ./quota/elastic

.PHONY: test-race test-norace
test-race:
	nice -n 10 $(GO) test -vet=off -race -timeout 30m $(TEST_ARGS) $(RACE_PKGS)
test-norace:
	$(GO) test -vet=off -timeout 30m $(TEST_ARGS) $(E2E_PKG) $(filter-out $(E2E_PKG) $(RACE_PKGS),$(TEST_PKGS))

## soak: the randomized soaks with faults, on the kwok provider and on Cluster
## API, for SOAK_DURATION each (make test runs 45s and 30s of them); SOAK_SEED=N
## replays a run. Each prints its seed and counts and fails on any violation,
## any component error, or an operation kind seen too rarely.
SOAK_DURATION ?= 10m
SOAK_SEED     ?=
soak:
	QUOTASCALE_SOAK=$(SOAK_DURATION) QUOTASCALE_SOAK_SEED=$(SOAK_SEED) $(GO) test -count=1 -timeout 2h -run '^TestSoak(ClusterAPI)?$$' -v ./test/e2e

## lint: gofmt and go vet, the planted-bug build of the quota library included
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags quotascale_plantedbug ./quota/...

## generate: deepcopy functions and CRD manifests (apis/crds) from the API types,
## the chart's copy of the CRDs, the flags reference (docs/flags.md) and the flag
## tables of docs/migrating-from-upstream.md
generate:
	$(GO) run ./hack/codegen/cmd/generate
	rm -f charts/quotascale/crds/*.yaml
	cp apis/crds/*.yaml charts/quotascale/crds/
	$(GO) run ./hack/flagsdoc

## release: kubectl-quota's krew archives (linux and darwin, amd64 and arm64) and
## its krew manifest, $(BIN)/release/quota.yaml: deploy/krew/quota.yaml.tmpl filled
## with the archives' URLs and sha256 checksums, then checked against the archives.
## A VERSION that is not semver (an untagged tree) is released as v0.0.0-dev+VERSION.
release:
	$(GO) run ./hack/release -version $(VERSION) -commit $(COMMIT) -out $(BIN)/release -template deploy/krew/quota.yaml.tmpl

## local-up: run the in-process control plane until Ctrl-C; ARGS="--nodes=3 --node-cpu=8",
## ARGS="--autoscaler=false" for the cluster-autoscaler binary, cluster-autoscaler flags after --
local-up:
	$(GO) run ./cmd/localcluster $(ARGS)

## demo: local-up plus the product documents' scenarios
demo:
	$(GO) run ./cmd/localcluster --demo $(ARGS)

clean:
	rm -rf $(BIN)

## bench: the performance suites of docs/performance.md, benchstat-ready, into
## $(BENCH_OUT) and stdout.
##   P1 CapacityQuota check and P2 tree admission: ./quota/... x$(BENCH_COUNT)
##   P2 the plugin's PreFilter, cycle and whole:    ./scheduler/capacityscheduling x$(BENCH_COUNT)
##   P3 autoscaler loop with its quota share:     ./cluster-autoscaler/core x$(BENCH_COUNT)
##   P2 scheduler throughput, plugin on and off:   ./test/bench, $(BENCH_THROUGHPUT)
##      (-benchtime=1x: an iteration is $(BENCH_PAIRS) pairs of windows, each
##      window scheduling thousands of pods on the in-process control plane;
##      on/off is the median of the pairs. BENCH_THROUGHPUT=SchedulerThroughput
##      runs the 100- and 500-node sizes too.)
## then draws the curves of docs/performance.md into $(BENCH_PLOTS) (SVG), with
## hack/benchplot: tens of minutes on 2 cores. BENCH_LARGE=1 adds P3 at 5,000
## and 15,000 nodes (150,000 and 450,000 pods): much longer, and several GiB;
## make test never runs benchmarks.
## Profiles, one suite at a time:
##   go test -run='^$$' -bench=. -cpuprofile=cpu.out -memprofile=mem.out ./quota/capacity/
##   BENCH_CPUPROFILE=DIR go test -run='^$$' -bench='SchedulerThroughput/nodes=1000/' -benchtime=1x ./test/bench/
BENCH_OUT           ?= bench.out
BENCH_COUNT         ?= 5
BENCH_PAIRS         ?= 7
BENCH_THROUGHPUT    ?= SchedulerThroughput/nodes=1000/
BENCH_ARGS          ?=
BENCH_LARGE         ?= 0
BENCH_PLOTS         ?= bench-plots
bench_suite = BENCH_LARGE=$(BENCH_LARGE) BENCH_PAIRS=$(BENCH_PAIRS) $(GO) test -run='^$$' -benchmem -timeout=3h $(BENCH_ARGS) $(1) 2>&1 | tee -a $(BENCH_OUT)

.PHONY: bench bench-figures
bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench:
	@rm -f $(BENCH_OUT)
	$(call bench_suite,-bench=. -count=$(BENCH_COUNT) ./quota/...)
	$(call bench_suite,-bench=PreFilter -count=$(BENCH_COUNT) ./scheduler/capacityscheduling)
	$(call bench_suite,-bench=RunOnce -count=$(BENCH_COUNT) ./cluster-autoscaler/core)
	$(call bench_suite,-bench='$(BENCH_THROUGHPUT)' -benchtime=1x ./test/bench)
	$(GO) run ./hack/benchplot -in $(BENCH_OUT) -out $(BENCH_PLOTS)

## bench-figures: the figures docs/performance.md shows, regenerated from one
## real run on an otherwise idle machine: make bench with BENCH_LARGE=1, its
## text kept in docs/images/bench.txt and its plots drawn into docs/images/
## (bench-loop.svg, bench-capacityquota.svg). Commit the three together, and
## fill docs/performance.md's placeholders from the same text
## (go run golang.org/x/perf/cmd/benchstat docs/images/bench.txt).
bench-figures:
	$(MAKE) --no-print-directory bench BENCH_LARGE=1 BENCH_OUT=docs/images/bench.txt BENCH_PLOTS=docs/images

## images: the container images of cluster-autoscaler, kube-scheduler and
## kubectl-quota (build/*.Dockerfile), tagged $(IMAGE_REGISTRY)/NAME:$(IMAGE_TAG).
## Needs docker with BuildKit, or podman (CONTAINER_TOOL=podman); push them with
## `$(CONTAINER_TOOL) push`. IMAGE_PLATFORM=linux/arm64 cross-builds.
IMAGE_REGISTRY ?= ghcr.io/quotascale
IMAGE_TAG      ?= $(VERSION)
CONTAINER_TOOL ?= docker
IMAGE_PLATFORM ?=
IMAGES         ?= cluster-autoscaler kube-scheduler kubectl-quota

.PHONY: images
images:
	@set -e; for image in $(IMAGES); do \
		echo "$(CONTAINER_TOOL) build $(IMAGE_REGISTRY)/$$image:$(IMAGE_TAG)"; \
		$(CONTAINER_TOOL) build -f build/$$image.Dockerfile \
			$(if $(IMAGE_PLATFORM),--platform=$(IMAGE_PLATFORM)) \
			--build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
			-t $(IMAGE_REGISTRY)/$$image:$(IMAGE_TAG) . ; \
	done
