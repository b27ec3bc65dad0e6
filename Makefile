# Quotascale. `make demo` and `make test` are the whole set-up on a fresh machine.

GO        ?= go
BIN       ?= bin
TEST_ARGS ?=
ARGS      ?=

.PHONY: all build test lint generate verify-generate local-up demo clean

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
