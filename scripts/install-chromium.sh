#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver, for the console's browser tests (tests/console).
# Browsers cannot be downloaded at run time here, so Playwright drives /usr/bin/chromium.
# Does nothing when Chromium is already installed; installs it when run as root;
# otherwise says what to run (and lets setup go on: only tests/console needs it).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "warning: Chromium is missing, and the console's browser tests (tests/console) need it. As root:" >&2
  echo "  apt-get update && apt-get install -y chromium chromium-driver" >&2
  exit 0
fi
echo "installing Debian's chromium and chromium-driver for the console's browser tests"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
chromium --version
