# kloop — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
# Packages of the main module (tools/controlplane and bench are modules of their own).
PKGS := ./...
TEST_TIMEOUT ?= 30m

.PHONY: all controlplane test test-short demo dev generate lint bench build

all: build

## controlplane: build etcd, kube-apiserver and kube-controller-manager into bin/ (idempotent)
controlplane:
	@tools/controlplane/build.sh

build:
	$(GO) build $(PKGS)
	cd bench && $(GO) build ./...

## test: everything, on the real local control plane, race detector on
# The bench module holds commands only: it is built and vetted here, and run by `make bench`.
test: controlplane
	cd bench && $(GO) vet ./...
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

## test-short: unit tests only (no control plane)
test-short:
	$(GO) test -race -short -count=1 $(PKGS)

## demo: the main job on the local control plane (for now: the control plane itself)
demo: controlplane
	$(GO) run ./cmd/kloop dev

dev: demo

## generate: deepcopy and CRD manifests (controller-gen); nothing to generate yet
generate:
	@echo "generate: nothing to generate yet"

## lint: gofmt and go vet over every module
lint:
	@out=$$(gofmt -l . | grep -v '^bin/' || true); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd bench && $(GO) vet ./...
	cd tools/controlplane && $(GO) vet ./... && cd etcd && $(GO) vet ./...

## bench: every benchmark under bench/cmd, kloop and its peer side by side (prints RESULT lines)
bench: controlplane
	@set -e; cd bench; for d in cmd/*/; do echo "== $$d"; $(GO) run ./$$d; done
