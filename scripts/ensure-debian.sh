#!/usr/bin/env bash
# Install Debian packages whose binary is missing: scripts/ensure-debian.sh package:/path/to/binary ...
# Needs root (apt-get) only when something is missing; says what it installs.
set -euo pipefail
missing=()
for pair in "$@"; do
  package="${pair%%:*}"
  binary="${pair#*:}"
  [ -x "$binary" ] || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-debian: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "ensure-debian: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
