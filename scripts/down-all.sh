#!/usr/bin/env bash
# Stop every cluster under data/ (keeps the data; add --wipe to delete it).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
for state in data/*/cluster.json; do
  node cluster/bin/cluster.js down --data "$(dirname "$state")" "$@"
done
