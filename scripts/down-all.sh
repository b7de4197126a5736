#!/usr/bin/env bash
# Stop every cluster under DATA_ROOT (default data) and the dashboard; keeps the data (add --wipe to delete it, the
# dashboard's secret and log with it).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_ROOT="${DATA_ROOT:-data}"
shopt -s nullglob
# The dashboard first (only if that pid is still our dashboard: pids are reused).
if [ -f "$DATA_ROOT/dashboard.pid" ]; then
  pid="$(cat "$DATA_ROOT/dashboard.pid")"
  if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'cluster.js dashboard'; then kill "$pid" 2>/dev/null || true; fi
  rm -f "$DATA_ROOT/dashboard.pid"
fi
for state in "$DATA_ROOT"/*/cluster.json; do
  node cluster/bin/cluster.js down --data "$(dirname "$state")" "$@"
done
if [ "${1:-}" = --wipe ]; then rm -f "$DATA_ROOT/dashboard.token" "$DATA_ROOT/dashboard.log"; fi
