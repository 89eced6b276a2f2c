#!/usr/bin/env bash
# Builds the Kubernetes test binaries (kube-apiserver, etcd, kubectl) pinned in
# this module into a cache folder, once: a binary already there is kept.
#
#   tests/testbins/build.sh [DIR]      DIR defaults to $BEACON_TESTBINS, then
#                                      $BEACON_CACHE/testbins, then
#                                      <repo>/.cache/testbins
#
# A fresh build downloads ~570 MB of modules and takes 5-12 minutes on two
# cores; with the binaries present it takes well under a second.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${1:-${BEACON_TESTBINS:-${BEACON_CACHE:+$BEACON_CACHE/testbins}}}
dir=${dir:-$repo/.cache/testbins}
mkdir -p "$dir"

version=v1.37.2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
stamp="$dir/.version"
want="kubernetes=$version etcd=v3.7.3"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" != "$want" ]; then
  echo ">> testbins: $dir holds other versions; rebuilding"
  rm -f "$dir/kube-apiserver" "$dir/etcd" "$dir/kubectl"
fi

build() { # name package
  local name=$1 pkg=$2
  if [ -x "$dir/$name" ]; then return; fi
  echo ">> testbins: building $name into $dir"
  local start=$SECONDS
  (cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  echo ">> testbins: $name built in $((SECONDS - start)) s"
}

build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubectl k8s.io/kubernetes/cmd/kubectl
echo "$want" > "$stamp"
