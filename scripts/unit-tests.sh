#!/usr/bin/env bash
# The compiled test files of `make check`, one a line: every test file `make test` runs except those named in
# scripts/integration-tests.txt (clusters, browsers, Debian programs, anything slower than about 3 s).
set -euo pipefail
cd "$(dirname "$0")/.."
# Source path to compiled path: packages/x/test/a.test.ts -> packages/x/dist/test/a.test.js.
skip=$(sed -E 's/#.*//' scripts/integration-tests.txt | awk 'NF { print $1 }' | sed -E 's#/test/#/dist/test/#; s#\.tsx?$#.js#')
find packages cluster bench jepsen-like -path '*/dist/test/*' -name '*.test.js' -not -path '*/node_modules/*' 2>/dev/null \
  | sort | grep -vxF -f <(printf '%s\n' "$skip")
