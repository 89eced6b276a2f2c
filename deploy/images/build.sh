#!/usr/bin/env bash
# Builds Beacon's container images with podman (make images):
#
#   localhost/beacon/{ipamd,announcerd,gatewayd,k8s-adapter,beaconctl}:VERSION
#       the static Go binaries, built here on the host (CGO_ENABLED=0,
#       -trimpath, -X version), COPYed into FROM-scratch images
#   localhost/beacon/etcd:VERSION
#       the etcd binary tests/testbins/build.sh builds from source
#   localhost/beacon/lab:VERSION
#       one Debian root (mmdebstrap) with FRR, BIRD, ping, arping, iproute2
#       and curl: the compose lab's router and client
#
# Each image is also tagged :dev (the last local build; what deploy/compose
# and deploy/k8s name). An image is rebuilt only when its inputs changed: a
# stamp under CACHE/images/ holds the hash of the binary, the Containerfile
# and the labels; the lab root's tarball is cached under the hash of its
# package list, so a warm run costs the Go builds (cached by go) and hashing.
#
#   deploy/images/build.sh [NAME...]     default: every image
#
# Environment: BEACON_CACHE (default <repo>/.cache), TESTBINS (default
# CACHE/testbins; must hold etcd), VERSION (default git describe),
# DEBIAN_MIRROR, DEBIAN_SUITE.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${BEACON_CACHE:-$repo/.cache}
testbins=${TESTBINS:-$cache/testbins}
work=$repo/.cache/images
mkdir -p "$work/bin"

export CONTAINERS_CONF=$here/containers.conf

# podman with runc and netavark (whose aardvark-dns lets the compose lab's
# containers find each other by name), podman-compose for the lab,
# mmdebstrap for the lab's Debian root.
if ! command -v podman >/dev/null || ! command -v podman-compose >/dev/null || ! command -v mmdebstrap >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo ">> images: podman, podman-compose or mmdebstrap is missing; run 'make images' as root to install them" >&2; exit 1; fi
  echo ">> images: installing podman, podman-compose, runc, netavark and mmdebstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman podman-compose runc netavark aardvark-dns uidmap mmdebstrap >/dev/null
fi

version=${VERSION:-$(cd "$repo" && git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(cd "$repo" && git rev-parse HEAD 2>/dev/null || echo unknown)
source=https://github.com/beaconlb/beacon

# name -> Go package and the -X flag that sets its version.
declare -A pkg=(
  [ipamd]=./services/ipam/cmd/ipamd
  [announcerd]=./services/announcer/cmd/announcerd
  [gatewayd]=./services/gateway/cmd/gatewayd
  [k8s-adapter]=./k8s-adapter/cmd/k8s-adapter
  [beaconctl]=./beaconctl
)
declare -A xflag=(
  [beaconctl]=github.com/beaconlb/beacon/beaconctl/internal/cli.Version
)

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(ipamd announcerd gatewayd k8s-adapter beaconctl etcd lab)

hash() { sha256sum "$@" | sha256sum | cut -c1-16; }

# image NAME DIR [VERSION]: builds localhost/beacon/NAME:VERSION (default
# Beacon's) from DIR (holding the binary) and NAME.Containerfile unless the
# stamp says it is current.
image() {
  local name=$1 ctx=$2 ref=localhost/beacon/$1 version=${3:-$version}
  local key
  key=$( { hash "$ctx/$name" "$here/$name.Containerfile"; echo "$version $revision $source"; } | sha256sum | cut -c1-16)
  local stamp=$work/$name.stamp
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && podman image exists "$ref:$version"; then
    echo ">> images: $ref:$version is current"
    return
  fi
  local start=$SECONDS
  mkdir -p "$ctx/data"
  podman build -q --layers=false -f "$here/$name.Containerfile" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg SOURCE="$source" \
    -t "$ref:$version" -t "$ref:dev" "$ctx" >/dev/null
  echo "$key" > "$stamp"
  echo ">> images: built $ref:$version in $((SECONDS - start)) s"
}

for name in "${want[@]}"; do
  case $name in
  etcd)
    if [ ! -x "$testbins/etcd" ]; then echo ">> images: $testbins/etcd is missing: run 'make testbins' first" >&2; exit 1; fi
    mkdir -p "$work/ctx/etcd"
    cp -p "$testbins/etcd" "$work/ctx/etcd/etcd.tmp" && mv "$work/ctx/etcd/etcd.tmp" "$work/ctx/etcd/etcd"
    # Tagged with etcd's own version (tests/testbins pins it).
    etcd_version=$(sed -n 's/.*etcd=\([^ ]*\).*/\1/p' "$testbins/.version" 2>/dev/null)
    image etcd "$work/ctx/etcd" "${etcd_version:-$version}"
    ;;
  lab)
    # The lab root's tarball goes to the shared cache (BEACON_CACHE): it
    # depends on the package list only.
    mkdir -p "$cache/images"
    "$here/lab-root.sh" "$cache/images" "$work" "$revision" "$source"
    ;;
  *)
    [ -n "${pkg[$name]:-}" ] || { echo ">> images: unknown image $name" >&2; exit 1; }
    var=${xflag[$name]:-main.version}
    mkdir -p "$work/ctx/$name"
    (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $var=$version" -o "$work/ctx/$name/$name" "${pkg[$name]}")
    image "$name" "$work/ctx/$name"
    ;;
  esac
done
