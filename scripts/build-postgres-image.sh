#!/usr/bin/env bash
# The compose stack's PostgreSQL where no registry is reachable: deploy/postgres/Containerfile on a Debian base with
# PostgreSQL made by scripts/base-images.sh, no network in the build. IMAGE: the tag (localhost/inboxd-postgres:15).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/podman-env.sh
scripts/base-images.sh
image=${IMAGE:-localhost/inboxd-postgres:15}
podman build --quiet --format docker --network=none --build-arg BASE=localhost/inboxd-base:bookworm-postgresql \
  -f deploy/postgres/Containerfile -t "$image" . >/dev/null
echo "built $image"
