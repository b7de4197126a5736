#!/usr/bin/env bash
# Lists the slowest test files of a tap run, from its log (the top-level "ok N - FILE # time=MSms" lines), so
# make test shows where its time goes as the suite grows. Usage: scripts/slowest-tests.sh TAP_LOG [COUNT]
set -euo pipefail
# Every stage reads its whole input (no head): under pipefail, a stage that stops reading early would kill the
# one before it with SIGPIPE and fail make test (it did, exit 141, once the list grew long enough).
log=${1:?usage: slowest-tests.sh TAP_LOG [COUNT]}
count=${2:-10}
echo "slowest test files:"
grep -E '^(not )?ok [0-9]+ - \S+\.test\.js # time=[0-9.]+ms' "$log" \
  | sed -E 's/^(not )?ok [0-9]+ - (\S+) # time=([0-9.]+)ms.*/\3 \2/' \
  | sort -rn \
  | awk -v count="$count" 'NR <= count { printf "  %7.1f s  %s\n", $1 / 1000, $2 }'
