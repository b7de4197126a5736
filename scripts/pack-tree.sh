#!/usr/bin/env bash
# Packs the repository as `make build` left it (sources, dist, node_modules) into DIR/raftkit.tar: the build
# context of deploy/Dockerfile's `prebuilt` target, which adds it at /opt/raftkit.
#
#   scripts/pack-tree.sh DIR
#
# One tar file rather than the tree itself as the context: the builder then copies one file, not the 27,000 files
# of node_modules one by one (with Podman 4.3 that was 25 s against several minutes for the same image).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/cluster/dist/src/member.js" ] && [ -d "$repo/node_modules" ] \
  || { echo "$0: build the repository first (make build: npm ci, tsc -b)" >&2; exit 2; }
mkdir -p "$1"
tar -C "$repo" -cf "$1/raftkit.tar" --exclude='.tap' --exclude='*.log' \
  package.json package-lock.json tsconfig.json tsconfig.base.json node_modules packages cluster bench jepsen-like
echo "pack-tree: $1/raftkit.tar ($(du -m "$1/raftkit.tar" | cut -f1) MB)"
