#!/usr/bin/env bash
# Debian's Go toolchain and the Go protobuf/gRPC packages, for the Go example (examples/go,
# tests/integration/test_go_example.py). Exactly this set: golang-goprotobuf-dev would bring the old
# github.com/golang/protobuf APIv1 alone, and a program built on it panics at run time against APIv2 code.
# Does nothing when all are installed; installs them when run as root; otherwise says what to run
# (and lets setup go on: only the Go example's test needs them).
set -euo pipefail
packages=(golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc
          golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev golang-google-grpc-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "warning: the Go example (tests/integration/test_go_example.py) needs Debian packages. As root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 0
fi
echo "installing Debian's Go toolchain and Go gRPC packages for the Go example: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
go version
