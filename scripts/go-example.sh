#!/usr/bin/env bash
# Builds the Go example (examples/go) from protos/ alone, offline, with Debian's Go packages:
#   scripts/go-example.sh OUT_DIR      ->  OUT_DIR/inboxd-go-example
# The stubs are generated into OUT_DIR at each build (never committed: protos/ is the source); Go builds in
# GOPATH mode against /usr/share/gocode, where Debian's golang-*-dev packages put their sources, so no
# module proxy is needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "go-example: $tool is missing: run scripts/ensure-go.sh as root (docs/other-languages.md lists the packages)" >&2
    exit 1
  fi
done
# protoc-gen-go before 1.20 (golang-goprotobuf-dev's) has no --version and makes APIv1 code that panics at run time.
if ! protoc-gen-go --version >/dev/null 2>&1; then
  echo "go-example: $(command -v protoc-gen-go) is the old APIv1 plugin: remove golang-goprotobuf-dev, install protoc-gen-go" >&2
  exit 1
fi
out="$(mkdir -p "$1" && cd "$1" && pwd)"
gopath="$out/gopath"
rm -rf "$gopath"
mkdir -p "$gopath/src/inboxd-go-example"
# go_package in protos/ says where the stubs go: github.com/inboxd/inboxd/gen/go/inboxd/v1.
protoc -I "$root/protos" -I /usr/include --go_out="$gopath/src" --go-grpc_out="$gopath/src" "$root"/protos/inboxd/v1/*.proto
cp "$root/examples/go/main.go" "$gopath/src/inboxd-go-example/"
GO111MODULE=off GOFLAGS= GOPATH="$gopath:/usr/share/gocode" GOCACHE="$out/cache" \
  go build -o "$out/inboxd-go-example" inboxd-go-example
echo "$out/inboxd-go-example"
