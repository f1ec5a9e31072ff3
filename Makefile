# kloop — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
# Packages of the main module (tools/controlplane, tools/image, bench,
# deploy, crcache and oteltest are modules of their own).
PKGS := ./...
TEST_TIMEOUT ?= 30m

.PHONY: all controlplane test test-short test-faults demo dev generate check-generated lint bench bench-curve bench-plot build screenshot image

# controller-gen, pinned; run from the module proxy so that it stays out of
# the main module's dependencies.
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# The API packages with kubebuilder markers: SAMPLE:APIS:CRD-OPTIONS, one CRD
# directory (SAMPLE/crd) per sample, and each API version's package for its
# deepcopy. The CronJob CRD embeds a pod template in two versions: without
# descriptions it stays under the 256 KiB that `kubectl apply` (client side)
# may keep in its last-applied annotation.
API_SAMPLES := samples/foo:./samples/foo/apis/...:crdVersions=v1 \
	samples/cronjob:./samples/cronjob/apis/...:crdVersions=v1,maxDescLen=0
API_PACKAGES := samples/foo/apis/samplecontroller/v1alpha1 samples/cronjob/apis/batch/v1 samples/cronjob/apis/batch/v2
# Apply configurations (typed server-side apply), one controller-gen run per
# sample: APIS:DIR, DIR the output its API packages' markers
# (+kubebuilder:ac:generate, +kubebuilder:ac:output:package) name.
APPLY_CONFIGS := ./samples/foo/apis/...:samples/foo/apis/applyconfiguration \
	./samples/cronjob/apis/...:samples/cronjob/apis/applyconfiguration

all: build

## controlplane: build etcd, kube-apiserver and kube-controller-manager into the per-user cache dir (kloop controlplane install; idempotent), linked from bin/
# testenv finds them in the cache dir (~/.cache/kloop/controlplane/VERSION);
# bin/ keeps links to them for KLOOP_CONTROLPLANE_BIN=bin users.
controlplane:
	@set -e; d=$$($(GO) run ./cmd/kloop controlplane install); mkdir -p bin; rm -f bin/.controlplane-stamp; \
	for b in etcd kube-apiserver kube-controller-manager; do ln -sfn "$$d/$$b" "bin/$$b"; done

build:
	$(GO) build $(PKGS)
	cd bench && $(GO) build ./...
	cd deploy && $(GO) build ./...
	cd crcache && $(GO) build ./...
	cd oteltest && $(GO) build ./...

## test: everything, on the real local control plane, race detector on
# The bench module holds commands: it is built and vetted here, and run by `make bench`. Its one test, the
# informers under a hard cgroup memory limit, runs without -race (it measures memory; it skips, saying why,
# where no memory cgroup can be made).
test: controlplane check-generated
	cd bench && $(GO) vet ./...
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)
	cd deploy && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd tools/image && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd crcache && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd oteltest && $(GO) vet ./... && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd bench && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run TestCgroup -v ./cmd/informer

## test-faults: the fault tests alone (blackholes, shedding, partitions, etcd restart; a few minutes); `make test` runs them too
test-faults: controlplane
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^TestFault_' -v ./faults

## test-short: unit tests only (no control plane)
test-short:
	$(GO) test -race -short -count=1 $(PKGS)
	cd deploy && $(GO) test -race -short -count=1 ./...
	cd crcache && $(GO) test -race -short -count=1 ./...
	cd oteltest && $(GO) test -race -short -count=1 ./...

## image: OCI images of the commands (linux/amd64 + linux/arm64) into bin/images, without a Docker daemon
# An OCI layout per command (bin/images/<command>) and a `docker load`-able
# tarball per platform (bin/images/<command>-<arch>.tar); see tools/image.
IMAGE_COMMANDS ?= foo-controller,cronjob-controller,notifier,podwatch
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_REPOSITORY ?= kloop.local
IMAGE_TAG ?= dev
image:
	cd tools/image && $(GO) run . -repo ../.. -out ../../bin/images -commands $(IMAGE_COMMANDS) \
		-platforms $(IMAGE_PLATFORMS) -repository $(IMAGE_REPOSITORY) -tag $(IMAGE_TAG)

## demo: the main job: the local control plane, podsim and the Foo controller on example-foo.yaml
# Built, then run, rather than `go run`: go run exits 1 on Ctrl-C whatever
# the program returns, and kloop demo exits 0 after a clean stop.
demo: controlplane
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	$(GO) build -o "$$d/kloop" ./cmd/kloop; "$$d/kloop" demo

## dev: the local control plane alone
dev: controlplane
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	$(GO) build -o "$$d/kloop" ./cmd/kloop; "$$d/kloop" dev

# RBAC, one controller-gen run per role: DIR:ROLE:FILE:PACKAGES. The
# +kubebuilder:rbac markers sit next to the code that needs each right; each
# deployable gets its own copy of the shared roles under its own name.
RBAC := \
	foo-controller/rbac:foo-controller:role.yaml:./samples/foo \
	foo-controller/rbac:foo-controller-leader-election:leader_election_role.yaml:./leaderelection \
	foo-controller/rbac:foo-controller-metrics-auth:metrics_auth_role.yaml:./metrics/secure \
	cronjob-controller/rbac:cronjob-controller:role.yaml:./samples/cronjob \
	cronjob-controller/rbac:cronjob-controller-leader-election:leader_election_role.yaml:./leaderelection \
	cronjob-controller/rbac:cronjob-controller-metrics-auth:metrics_auth_role.yaml:./metrics/secure \
	overlays/foo-controller-sharded/rbac:foo-controller-sharding:sharding_role.yaml:./sharding \
	overlays/foo-controller-namespaced/role:foo-controller:role.yaml:./samples/foo \
	overlays/cronjob-controller-self-signed/rbac:cronjob-controller-webhook-certs:webhook_certs_role.yaml:./webhook \
	podwatch/rbac:podwatch:role.yaml:./samples/podwatch \
	podwatch/rbac:podwatch-metrics-auth:metrics_auth_role.yaml:./metrics/secure \
	notifier/rbac:notifier-metrics-auth:metrics_auth_role.yaml:./metrics/secure
# The notifier's read-only ClusterRole comes from its config, not from markers.
NOTIFIER_CONFIG := deploy/notifier/kubewatch.yaml

# Webhook configurations, one controller-gen run per deployable:
# DIR:PACKAGES; DIR/manifests.yaml is written from the packages'
# +kubebuilder:webhook markers.
WEBHOOKS := cronjob-controller/webhook:./samples/cronjob

# gen-deploy DIR: write the generated RBAC and webhook configurations of
# deploy/ into DIR.
define gen-deploy
	@set -e; for r in $(RBAC); do IFS=: read -r dir role file pkgs <<<"$$r"; \
		$(CONTROLLER_GEN) rbac:roleName=$$role,fileName=$$file paths=$$pkgs output:rbac:artifacts:config=$(1)/$$dir; done; \
	for w in $(WEBHOOKS); do IFS=: read -r dir pkgs <<<"$$w"; \
		$(CONTROLLER_GEN) webhook paths=$$pkgs output:webhook:artifacts:config=$(1)/$$dir; done; \
	mkdir -p $(1)/notifier/rbac; \
	$(GO) run ./cmd/notifier config rbac --config $(NOTIFIER_CONFIG) --name notifier > $(1)/notifier/rbac/role.yaml
endef

## generate: deepcopy methods, apply configurations, CRD manifests, deploy/'s RBAC and webhook configurations from the kubebuilder markers (controller-gen)
generate:
	@set -e; for s in $(API_SAMPLES); do IFS=: read -r dir apis crd <<<"$$s"; \
		$(CONTROLLER_GEN) object paths=$$apis crd:$$crd output:crd:artifacts:config=$$dir/crd; done; \
	for a in $(APPLY_CONFIGS); do IFS=: read -r apis dir <<<"$$a"; \
		rm -rf $$dir; $(CONTROLLER_GEN) applyconfiguration paths=$$apis; done
	$(call gen-deploy,deploy)

## check-generated: fail when the generated files differ from what `make generate` would write
check-generated:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for p in $(API_PACKAGES); do \
		$(CONTROLLER_GEN) object paths=./$$p output:object:dir=$$tmp/object/$$p; \
		if ! diff -u $$p/zz_generated.deepcopy.go $$tmp/object/$$p/zz_generated.deepcopy.go; then \
			echo "$$p/zz_generated.deepcopy.go is stale: run make generate"; exit 1; fi; done; \
	for s in $(API_SAMPLES); do IFS=: read -r dir apis crd <<<"$$s"; \
		$(CONTROLLER_GEN) crd:$$crd paths=$$apis output:crd:artifacts:config=$$tmp/$$dir/crd; \
		if ! diff -ru -x Kustomization $$dir/crd $$tmp/$$dir/crd; then \
			echo "$$dir/crd is stale: run make generate"; exit 1; fi; done; \
	for a in $(APPLY_CONFIGS); do IFS=: read -r apis dir <<<"$$a"; \
		mkdir -p $$tmp/ac/$$dir; cp -R $$dir/. $$tmp/ac/$$dir; rm -rf $$dir; \
		$(CONTROLLER_GEN) applyconfiguration paths=$$apis; \
		if ! diff -ru $$tmp/ac/$$dir $$dir; then rm -rf $$dir; cp -R $$tmp/ac/$$dir $$dir; \
			echo "$$dir is stale: run make generate"; exit 1; fi; done; \
	$(MAKE) -s gen-deploy-into DIR=$$tmp/deploy; \
	for d in foo-controller cronjob-controller overlays/foo-controller-sharded overlays/cronjob-controller-self-signed podwatch notifier; do \
		if ! diff -ru deploy/$$d/rbac $$tmp/deploy/$$d/rbac; then echo "deploy/$$d/rbac is stale: run make generate"; exit 1; fi; done; \
	for f in overlays/foo-controller-namespaced/role/role.yaml; do \
		if ! diff -u deploy/$$f $$tmp/deploy/$$f; then echo "deploy/$$f is stale: run make generate"; exit 1; fi; done; \
	for w in $(WEBHOOKS); do IFS=: read -r dir pkgs <<<"$$w"; \
		if ! diff -u deploy/$$dir/manifests.yaml $$tmp/deploy/$$dir/manifests.yaml; then echo "deploy/$$dir/manifests.yaml is stale: run make generate"; exit 1; fi; done; \
	echo "generated files are up to date"

.PHONY: gen-deploy-into
gen-deploy-into:
	$(call gen-deploy,$(DIR))

## lint: gofmt and go vet over every module
lint:
	@out=$$(gofmt -l . | grep -v '^bin/' || true); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd bench && $(GO) vet ./...
	cd deploy && $(GO) vet ./...
	cd tools/image && $(GO) vet ./...
	cd crcache && $(GO) vet ./...
	cd oteltest && $(GO) vet ./...
	cd tools/controlplane && $(GO) vet ./... && cd etcd && $(GO) vet ./...

## screenshot: the README's picture of the debug page, docs/debug-page.png, taken by its browser test
# (Chromium headless on the Foo controller; needs Debian's chromium package, see .ci/run)
screenshot: controlplane
	$(GO) test -count=1 -run 'TestPage_InChromium' ./debug -args -screenshot=$(CURDIR)/docs/debug-page.png

## bench: every benchmark under bench/cmd, kloop and its peer side by side (prints RESULT lines)
bench: controlplane
	@set -e; cd bench; for d in cmd/*/; do echo "== $$d"; $(GO) run ./$$d; done

## bench-curve: the informer benchmark at 1,000, 10,000 and 100,000 ConfigMaps, CURVE_RUNS times (RESULT
## lines in bench/results/informer-curve.txt), then bench-plot. About 10 minutes a run on 2 cores.
CURVE_RUNS ?= 1
bench-curve: controlplane
	@set -eo pipefail; cd bench; mkdir -p results; : > results/informer-curve.txt; \
	for i in $$(seq $(CURVE_RUNS)); do \
		$(GO) run ./cmd/informer -n 1000,10000,100000 -sides all -updates 0 | tee -a results/informer-curve.txt; done
	@$(MAKE) --no-print-directory bench-plot

## bench-plot: bench/results/informer-curve.png and the Markdown table for BENCHMARKS.md, from the RESULT
## lines in bench/results/informer-curve.txt (medians where several runs gave a figure)
bench-plot:
	cd bench && $(GO) run ./plotcurve -png results/informer-curve.png -table results/informer-curve.txt
