#!/usr/bin/env bash
# Generates the Python stubs from protos/ into the client package, which ships
# them; the server depends on the client. One command, so the drift check can
# compare a fresh run with what is committed.
#   scripts/gen_proto.sh [OUT_DIR]   (default: clients/python/src/inboxd_client/v1)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/clients/python/src/inboxd_client/v1}"
python="${PYTHON:-$root/.venv/bin/python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$root"
"$python" -m grpc_tools.protoc -I protos \
  --python_out="$tmp" --grpc_python_out="$tmp" --pyi_out="$tmp" \
  protos/inboxd/v1/*.proto
# The generated code imports its siblings by proto path (inboxd.v1), which
# would clash with the server package `inboxd`; make those imports relative.
sed -i -E 's/^from inboxd\.v1 import /from . import /' "$tmp"/inboxd/v1/*.py "$tmp"/inboxd/v1/*.pyi
mkdir -p "$out"
rm -f "$out"/*_pb2.py "$out"/*_pb2.pyi "$out"/*_pb2_grpc.py
cp "$tmp"/inboxd/v1/*.py "$tmp"/inboxd/v1/*.pyi "$out"/
cat > "$out/__init__.py" <<'PY'
"""Generated inboxd.v1 stubs. Made by scripts/gen_proto.sh (make proto); never edit."""
PY
