#!/usr/bin/env bash
# Local base images for hosts that reach Debian's mirror but no image registry (CI): made with mmdebstrap
# and `podman import`, each once (kept in podman's storage between runs).
#   localhost/inboxd-base:bookworm-python       Debian 12 with python3: the BASE of ./Containerfile
#   localhost/inboxd-base:bookworm-postgresql   Debian 12 with PostgreSQL 15: the BASE of deploy/postgres/Containerfile
# With a registry, build on docker.io/library/debian:bookworm-slim and use postgres:16 instead (docs/deployment.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/podman-env.sh
make_base() {
  local name=$1 packages=$2
  if podman image exists "$name"; then
    return 0
  fi
  command -v mmdebstrap >/dev/null || { echo "making $name needs mmdebstrap (scripts/ensure-podman.sh)" >&2; exit 1; }
  local work
  work=$(mktemp -d)
  echo "making $name with mmdebstrap (one to two minutes, mostly downloads)"
  mmdebstrap --quiet --variant=minbase --include="$packages" bookworm "$work/rootfs.tar"
  podman import --quiet "$work/rootfs.tar" "$name" >/dev/null
  rm -rf "$work"
}
# One maker at a time (the image's and the compose test's builds may start together); the second finds them made.
exec 9>"${TMPDIR:-/tmp}/inboxd-base-images.lock"
flock 9
# Both at once: each is mostly waiting on Debian's mirror (about 2 min together against 3.5 one after the other).
make_base localhost/inboxd-base:bookworm-python python3,ca-certificates &
python_pid=$!
make_base localhost/inboxd-base:bookworm-postgresql postgresql,ca-certificates
wait "$python_pid"
