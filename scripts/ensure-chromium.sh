#!/usr/bin/env bash
# Installs Debian's chromium package when /usr/bin/chromium is missing (the browser tests drive
# it through playwright-core), so that `npm test` sets up a fresh machine by itself. Needs
# root. Browser spec files run in parallel jest workers: one install at a time (flock), and a
# second caller finds it done.
set -euo pipefail
exec 9>/tmp/gen-durable-ensure-chromium.lock
flock 9
if [[ -x /usr/bin/chromium ]]; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then
  echo "chromium is missing and this is not root: apt-get install -y chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }
/usr/bin/chromium --version | head -n 1
