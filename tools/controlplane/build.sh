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
# The version the API server reports (/version, kubectl version) comes from
# k8s.io/component-base/version's link-time variables; without them it is
# v0.0.0-master+$Format:%H$, which kubectl cannot parse. The version is the
# k8s.io/kubernetes pin of go.mod, so it cannot drift from what is built.
kube_version=$(cd "$here" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)
if ! [[ "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
  echo "controlplane: k8s.io/kubernetes is pinned at \"$kube_version\" in tools/controlplane/go.mod; want a release version vMAJOR.MINOR.PATCH" >&2
  exit 1
fi
vpkg=k8s.io/component-base/version
kube_ldflags="-X $vpkg.gitVersion=$kube_version -X $vpkg.gitMajor=${BASH_REMATCH[1]} -X $vpkg.gitMinor=${BASH_REMATCH[2]}"
kube_ldflags="$kube_ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "controlplane: etcd (go.etcd.io/etcd/server/v3)"
(cd "$here/etcd" && go build -o "$bin/etcd" .)
echo "controlplane: kube-apiserver $kube_version (k8s.io/kubernetes/cmd/kube-apiserver)"
(cd "$here" && go build -ldflags "$kube_ldflags" -o "$bin/kube-apiserver" ./kube-apiserver)
echo "controlplane: kube-controller-manager $kube_version (k8s.io/kubernetes/cmd/kube-controller-manager)"
(cd "$here" && go build -ldflags "$kube_ldflags" -o "$bin/kube-controller-manager" ./kube-controller-manager)
echo "$stamp" > "$bin/.controlplane-stamp"
echo "controlplane: done in $(( $(date +%s) - start ))s"
