#!/usr/bin/env bash
# Install Debian packages whose binary is missing: scripts/ensure-debian.sh package:/path/to/binary ...
# Needs root (apt-get) only when something is missing. Prints one line for the whole set (apt's own output, hundreds
# of lines, goes to a log file it names, and is shown only when apt fails).
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
log="$(mktemp "${TMPDIR:-/tmp}/ensure-debian.XXXXXX.log")"
printf 'ensure-debian: installing %s ... ' "${missing[*]}"
started=$SECONDS
export DEBIAN_FRONTEND=noninteractive
if { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } > "$log" 2>&1; then
  echo "done in $((SECONDS - started)) s (apt's output: $log)"
else
  echo "failed"
  tail -n 25 "$log" >&2
  echo "ensure-debian: apt-get failed; its whole output is in $log" >&2
  exit 1
fi
