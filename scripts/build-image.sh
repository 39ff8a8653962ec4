#!/usr/bin/env bash
# `make image`: inboxd's image (./Containerfile) built with podman from the release's wheels, no network in the build.
#   IMAGE  the tag (default localhost/inboxd:VERSION)
#   BASE   the Debian 12 base (default: localhost/inboxd-base:bookworm-python, made here by scripts/base-images.sh;
#          with a registry, BASE=docker.io/library/debian:bookworm-slim, and the build may then reach Debian's mirror)
# Built again only when its sources changed: the image carries their hash in the label inboxd.source-hash, and a
# build whose hash matches is skipped (the compose test builds on every run and pays for it once).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/podman-env.sh
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' server/inboxd/__init__.py)
image=${IMAGE:-localhost/inboxd:$version}
network=(--network=none)
if [ -z "${BASE:-}" ]; then
  BASE=localhost/inboxd-base:bookworm-python
  local_base=1
elif [ -z "${OFFLINE:-}" ]; then
  network=()   # a registry's debian:bookworm-slim has no python3: the build installs it from Debian's mirror
fi
sources=(Containerfile deploy/image pyproject.toml server/inboxd clients/python/pyproject.toml clients/python/src
         clients/edge/pyproject.toml clients/edge/src)
hash=$( { echo "$BASE"; find "${sources[@]}" -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum; } \
        | sha256sum | cut -c1-16)
if [ "$(podman image inspect --format '{{index .Labels "inboxd.source-hash"}}' "$image" 2>/dev/null)" = "$hash" ]; then
  echo "$image is current (sources $hash)"
  exit 0
fi
mkdir -p build
# The wheels while the local bases are made (a first run: both wait on downloads).
.venv/bin/python scripts/release.py --dist build/image-dist >build/release.log 2>&1 &
release_pid=$!
if [ -n "${local_base:-}" ]; then
  scripts/base-images.sh
fi
wait "$release_pid" || { cat build/release.log >&2; exit 1; }
context=build/image
rm -rf "$context" && mkdir -p "$context/wheels" "$context/deploy/image"
cp Containerfile "$context/"
cp deploy/image/inboxd-probe "$context/deploy/image/"
cp build/image-dist/*.whl build/image-dist/deps/*.whl "$context/wheels/"
podman build --quiet --format docker "${network[@]}" --build-arg "BASE=$BASE" --build-arg "VERSION=$version" \
  --label "inboxd.source-hash=$hash" -t "$image" "$context" >/dev/null
echo "built $image (sources $hash, base $BASE)"
