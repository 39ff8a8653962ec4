#!/usr/bin/env bash
# Makes sure the deployment files' own checkers are here for `make deploy-check`:
# systemd-analyze (Debian's systemd) for deploy/systemd, promtool (Debian's
# prometheus) for deploy/prometheus. On Debian as root (CI), installs them with
# apt-get; otherwise says what to run. Installing prometheus starts nothing here.
set -euo pipefail

missing=()
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "make deploy-check needs ${missing[*]}: run 'sudo apt-get install ${missing[*]}' (Debian/Ubuntu)" >&2
exit 1
