# Sourced by the scripts that drive podman: this project's podman settings (deploy/podman/containers.conf),
# unless the caller names a containers.conf of their own.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/deploy/podman/containers.conf}"
