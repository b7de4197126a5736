#!/usr/bin/env bash
# Start every service's cluster side by side (each in data/<service>, on its own ports).
set -euo pipefail
cd "$(dirname "$0")/.."
for service in $(node -e "import('./cluster/dist/src/service-list.js').then(m => console.log(m.serviceNames().join(' ')))"); do
  if [ -f "data/$service/cluster.json" ] && node cluster/bin/cluster.js status --data "data/$service" --json | grep -q '"pid": [0-9]'; then
    echo "$service: already running (data/$service)"
    node cluster/bin/cluster.js status --data "data/$service"
    continue
  fi
  scripts/up-service.sh "$service"
done
