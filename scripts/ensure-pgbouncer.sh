#!/usr/bin/env bash
# Installs Debian's pgbouncer package when /usr/sbin/pgbouncer is missing (the PgBouncer
# topology tests start their own instance from it; nothing is started here). Needs root.
set -euo pipefail
if [[ -x /usr/sbin/pgbouncer ]]; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then
  echo "pgbouncer is missing and this is not root: apt-get install -y pgbouncer" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq pgbouncer >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq pgbouncer; }
# The package's own service is not used: the tests run their instance on a private port.
if command -v service >/dev/null 2>&1; then service pgbouncer stop >/dev/null 2>&1 || true; fi
/usr/sbin/pgbouncer --version | head -n 1
