#!/usr/bin/env bash
# Checks systemd unit files with systemd's own tools, no running systemd needed:
# `systemd-analyze verify` (unknown keys, bad values, missing [Install] targets)
# and `systemd-analyze security --offline` (the hardening, as an exposure score
# that must stay at or under MAX_EXPOSURE, 2.0 on systemd's 0-10 scale).
# verify also wants each ExecStart's program to exist: the programs the units
# name are where the install steps put them (/opt/inboxd/bin/inboxd,
# /opt/inboxd-edge/bin/inboxd-edge), absent here, so that one complaint about
# them is allowed and any other line fails.
set -euo pipefail
MAX_EXPOSURE=${MAX_EXPOSURE:-20}  # tenths

status=0
for unit in "$@"; do
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || true
  rest=$(printf '%s\n' "$out" \
    | grep -v -E '^inboxd(-edge)?\.service: Command /opt/inboxd(-edge)?/bin/inboxd(-edge)? is not executable: No such file or directory$' \
    | grep -v '^$' || true)
  if [ -n "$rest" ]; then
    printf '%s: systemd-analyze verify:\n%s\n' "$unit" "$rest" >&2
    status=1
  fi
  if ! systemd-analyze security --offline=yes --threshold="$MAX_EXPOSURE" "$unit" >/dev/null 2>&1; then
    echo "$unit: exposure above $MAX_EXPOSURE/100 (systemd-analyze security --offline=yes $unit says what is open)" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "systemd units verified: $*"
exit $status
