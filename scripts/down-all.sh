#!/usr/bin/env bash
# Stop every cluster under data/ (keeps the data; add --wipe to delete it).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
# The dashboard first (only if that pid is still our dashboard: pids are reused).
if [ -f data/dashboard.pid ]; then
  pid="$(cat data/dashboard.pid)"
  if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'cluster.js dashboard'; then kill "$pid" 2>/dev/null || true; fi
  rm -f data/dashboard.pid
fi
for state in data/*/cluster.json; do
  node cluster/bin/cluster.js down --data "$(dirname "$state")" "$@"
done
