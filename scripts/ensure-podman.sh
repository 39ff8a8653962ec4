#!/usr/bin/env bash
# Debian's podman, runc and mmdebstrap, for the image and the compose stack (make image,
# tests/deploy/test_compose_stack.py). runc, not podman's default crun: on hosts whose cgroups are v1
# with an empty unified hierarchy, crun refuses "hybrid mode". mmdebstrap makes the local base images
# when no registry is reachable (scripts/base-images.sh). netavark and aardvark-dns: the compose stack's
# containers find each other by service name.
# Does nothing when all are installed; installs them when run as root; otherwise says what to run
# (and lets setup go on: only the image's and the stack's tests need them, and they skip without podman).
set -euo pipefail
packages=(podman runc mmdebstrap netavark aardvark-dns uidmap slirp4netns)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "warning: the container image's tests need podman. As root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 0
fi
echo "installing podman, runc and mmdebstrap for the container image: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
podman --version
