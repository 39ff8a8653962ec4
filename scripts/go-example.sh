#!/usr/bin/env bash
# Builds the Go example (examples/go) from protos/ alone, offline, with Debian's Go packages:
#   scripts/go-example.sh OUT_DIR      ->  OUT_DIR/inboxd-go-example
# The stubs are generated into OUT_DIR at each build (never committed: protos/ is the source); Go builds in
# GOPATH mode against /usr/share/gocode, where Debian's golang-*-dev packages put their sources, so no
# module proxy is needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
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
