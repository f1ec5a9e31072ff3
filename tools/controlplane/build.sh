#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the pinned Go
# modules in this directory into bin/ at the repository root. Idempotent: when
# the binaries exist and the pins and sources are unchanged, it returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

stamp=$(cd "$here" && cat build.sh go.mod go.sum etcd/go.mod etcd/go.sum etcd/main.go \
  kube-apiserver/main.go kube-controller-manager/main.go | sha256sum | cut -d' ' -f1)
stamp="$stamp $(go env GOVERSION)"
if [ -x "$bin/etcd" ] && [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] \
   && [ "$(cat "$bin/.controlplane-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "controlplane: bin/etcd, bin/kube-apiserver, bin/kube-controller-manager are current"
  exit 0
fi

echo "controlplane: building etcd, kube-apiserver and kube-controller-manager from their Go modules."
echo "controlplane: a first build on 2 cores takes about 15 minutes; later builds come from the Go build cache."
rm -f "$bin/.controlplane-stamp"
start=$(date +%s)
echo "controlplane: etcd (go.etcd.io/etcd/server/v3)"
(cd "$here/etcd" && go build -o "$bin/etcd" .)
echo "controlplane: kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver)"
(cd "$here" && go build -o "$bin/kube-apiserver" ./kube-apiserver)
echo "controlplane: kube-controller-manager (k8s.io/kubernetes/cmd/kube-controller-manager)"
(cd "$here" && go build -o "$bin/kube-controller-manager" ./kube-controller-manager)
echo "$stamp" > "$bin/.controlplane-stamp"
echo "controlplane: done in $(( $(date +%s) - start ))s"
