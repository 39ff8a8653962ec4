#!/usr/bin/env bash
# Makes sure SPIN and a C compiler are here for `make model`: SPIN writes the
# verifier as C (pan.c), which is then compiled and run. On a fresh Debian
# machine as root (CI), installs them with apt-get; otherwise says what to run.
set -euo pipefail

missing=()
command -v spin >/dev/null 2>&1 || missing+=(spin)
command -v "${CC:-cc}" >/dev/null 2>&1 || missing+=(gcc)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "make model needs ${missing[*]}: run 'sudo apt-get install ${missing[*]}' (Debian/Ubuntu; SPIN 6.5)" >&2
exit 1
