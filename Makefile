# Quotascale. `make demo` and `make test` are the whole set-up on a fresh machine.

GO        ?= go
BIN       ?= bin
TEST_ARGS ?=
ARGS      ?=

.PHONY: all build test soak lint generate verify-generate local-up demo clean

all: build

## build: compile every package and the programs into ./bin
build:
	$(GO) build ./...
	$(GO) build -o $(BIN)/localcluster ./cmd/localcluster
	$(GO) build -o $(BIN)/cluster-autoscaler ./cluster-autoscaler
	$(GO) build -o $(BIN)/kube-scheduler ./scheduler

## test: lint, then every test (unit, property, e2e on the in-process control plane)
test: lint
	$(GO) test -timeout 30m $(TEST_ARGS) ./...

## soak: the randomized soak with faults for SOAK_DURATION (make test runs 45s
## of it); SOAK_SEED=N replays a run. It reports operations, faults and
## invariant violations (zero, or it fails).
SOAK_DURATION ?= 10m
SOAK_SEED     ?=
soak:
	QUOTASCALE_SOAK=$(SOAK_DURATION) QUOTASCALE_SOAK_SEED=$(SOAK_SEED) $(GO) test -count=1 -timeout 2h -run '^TestSoak$$' -v ./test/e2e

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## generate: deepcopy functions and CRD manifests (apis/crds) from the API types
generate:
	$(GO) run ./hack/codegen/cmd/generate

## local-up: run the in-process control plane until Ctrl-C; ARGS="--nodes=3 --node-cpu=8"
local-up:
	$(GO) run ./cmd/localcluster $(ARGS)

## demo: local-up plus the product documents' scenarios
demo:
	$(GO) run ./cmd/localcluster --demo $(ARGS)

clean:
	rm -rf $(BIN)
