#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the pinned Go
# modules in this directory into DIR:
#
#   tools/controlplane/build.sh DIR
#
# `kloop controlplane install` runs it with DIR its per-user cache directory
# (testenv.UserBinDir); `make controlplane` runs that command. Idempotent:
# when the binaries in DIR exist and the pins, the sources and the Go version
# are unchanged, it returns at once. Each binary is built next to its final
# name and renamed into place, so a reader of DIR never sees half a binary.
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR (the directory to put etcd, kube-apiserver and kube-controller-manager in; kloop controlplane install picks it)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
bin=$(cd "$1" && pwd)

stamp=$(cd "$here" && cat build.sh go.mod go.sum etcd/go.mod etcd/go.sum etcd/main.go \
  kube-apiserver/main.go kube-controller-manager/main.go | sha256sum | cut -d' ' -f1)
stamp="$stamp $(go env GOVERSION)"
if [ -x "$bin/etcd" ] && [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] \
   && [ "$(cat "$bin/.controlplane-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "controlplane: etcd, kube-apiserver and kube-controller-manager in $bin are current"
  exit 0
fi

echo "controlplane: building etcd, kube-apiserver and kube-controller-manager from their Go modules into $bin."
echo "controlplane: a first build on 2 cores takes about 15 minutes; later builds come from the Go build cache."
rm -f "$bin/.controlplane-stamp"
tmp=$(mktemp -d "$bin/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
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
(cd "$here/etcd" && go build -o "$tmp/etcd" .)
# Both Kubernetes commands in one go build: they share most of their
# packages, and one invocation schedules all of their compiles and both
# links together on the available cores. (The providerless build tag is left
# out on purpose: no file of this release or of its dependencies carries it,
# so it would change nothing.)
echo "controlplane: kube-apiserver and kube-controller-manager $kube_version (k8s.io/kubernetes/cmd/...)"
(cd "$here" && go build -ldflags "$kube_ldflags" -o "$tmp/" ./kube-apiserver ./kube-controller-manager)
for b in etcd kube-apiserver kube-controller-manager; do
  mv -f "$tmp/$b" "$bin/$b"
done
echo "$stamp" > "$bin/.controlplane-stamp"
echo "controlplane: done in $(( $(date +%s) - start ))s"
