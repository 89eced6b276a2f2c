#!/usr/bin/env bash
# Makes localhost/beacon/lab: one Debian root file system (mmdebstrap, from
# the host's Debian mirror: no container registry needed) holding the compose
# lab's router (FRR with bgpd and bfdd; BIRD too) and client tools. The
# tarball is cached under TARBALLS keyed by the suite, mirror and package
# list, so it is made once per machine (2 to 5 minutes) and imported again
# only if podman lost the image; the stamp of the import is kept in WORK.
#
#   deploy/images/lab-root.sh TARBALLS WORK REVISION SOURCE   (called by build.sh)
set -euo pipefail
tars=$1 work=$2 revision=$3 source=$4

suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=frr,bird2,iproute2,iputils-ping,iputils-arping,curl,procps,ca-certificates

key=$(echo "$suite $mirror $packages" | sha256sum | cut -c1-16)
tar=$tars/lab-$key.tar
ref=localhost/beacon/lab

if ! command -v mmdebstrap >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo ">> images: mmdebstrap is missing; run 'make images' as root" >&2; exit 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

if [ ! -s "$tar" ]; then
  echo ">> images: making the lab's Debian root ($suite: $packages)"
  start=$SECONDS
  # Tarballs of older package lists (never another build's part file).
  find "$tars" -maxdepth 1 -name 'lab-*.tar' ! -name "lab-$key.tar" ! -name 'lab-*.part.*' -exec rm -rf {} +
  mmdebstrap --quiet --variant=apt --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$tars/lab-$key.part.$$.tar" "$mirror"   # the format comes from the extension
  mv "$tars/lab-$key.part.$$.tar" "$tar"
  echo ">> images: lab root made in $((SECONDS - start)) s ($(du -m "$tar" | cut -f1) MB)"
fi

if [ -f "$work/lab.stamp" ] && [ "$(cat "$work/lab.stamp")" = "$key" ] && podman image exists "$ref:$key"; then
  echo ">> images: $ref:$key is current"
  exit 0
fi
start=$SECONDS
podman import -q \
  --change 'LABEL org.opencontainers.image.title=lab' \
  --change "LABEL org.opencontainers.image.description=Debian $suite with FRR, BIRD, ping, arping, iproute2 and curl: the compose lab's router and client" \
  --change "LABEL org.opencontainers.image.source=$source" \
  --change "LABEL org.opencontainers.image.revision=$revision" \
  --change "LABEL org.opencontainers.image.version=$key" \
  --change 'CMD ["/bin/bash"]' \
  "$tar" "$ref:$key" >/dev/null
podman tag "$ref:$key" "$ref:dev"
echo "$key" > "$work/lab.stamp"
echo ">> images: imported $ref:$key in $((SECONDS - start)) s"
