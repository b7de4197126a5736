#!/usr/bin/env bash
# Start one service's 5-member cluster in DATA_ROOT/<service> (default data/<service>) and print its endpoints.
# Usage: scripts/up-service.sh SERVICE [extra `cluster up` options]
set -euo pipefail
cd "$(dirname "$0")/.."
service="${1:?usage: scripts/up-service.sh SERVICE [options]}"
shift
node cluster/bin/cluster.js up --service "$service" --nodes 5 --data "${DATA_ROOT:-data}/$service" "$@"
