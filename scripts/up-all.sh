#!/usr/bin/env bash
# Start every service's cluster side by side (each in data/<service>, on its own ports).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
# One token for every cluster and the dashboard (kept in data/dashboard.token), so one login shows them all.
if [ -z "${CLUSTER_AUTH_TOKEN:-}" ]; then
  if [ ! -s data/dashboard.token ]; then
    (umask 077; node -e "console.log(require('crypto').randomBytes(24).toString('base64url'))" > data/dashboard.token)
  fi
  CLUSTER_AUTH_TOKEN="$(cat data/dashboard.token)"
fi
export CLUSTER_AUTH_TOKEN
for service in $(node -e "import('./cluster/dist/src/services.js').then(m => console.log(m.serviceNames().join(' ')))"); do
  if [ -f "data/$service/cluster.json" ] && node cluster/bin/cluster.js status --data "data/$service" --json | grep -q '"pid": [0-9]'; then
    echo "$service: already running (data/$service)"
    node cluster/bin/cluster.js status --data "data/$service"
    continue
  fi
  scripts/up-service.sh "$service"
done

# The dashboard, in the background (stopped by scripts/down-all.sh); it prints its address with the token.
if [ -f data/dashboard.pid ] && kill -0 "$(cat data/dashboard.pid)" 2>/dev/null; then
  echo "dashboard: already running (pid $(cat data/dashboard.pid))"
else
  nohup node cluster/bin/cluster.js dashboard --data-root data --auth-token "$CLUSTER_AUTH_TOKEN" > data/dashboard.log 2>&1 &
  echo $! > data/dashboard.pid
  for _ in $(seq 1 100); do
    grep -q '^dashboard: ' data/dashboard.log && break
    kill -0 "$(cat data/dashboard.pid)" 2>/dev/null || break
    sleep 0.1
  done
fi
grep '^dashboard: ' data/dashboard.log || { echo "the dashboard did not start; see data/dashboard.log" >&2; cat data/dashboard.log >&2; exit 1; }
