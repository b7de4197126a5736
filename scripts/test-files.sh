#!/usr/bin/env bash
# The compiled test files of `make test`, one a line, in the order tap starts them: the integration tests of
# scripts/integration-tests.txt (slowest first), then every other test file. Started longest first, the two jobs
# end close together instead of one running a long cluster test alone at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
sed -E 's/#.*//' scripts/integration-tests.txt | awk 'NF { print $1 }' | sed -E 's#/test/#/dist/test/#; s#\.tsx?$#.js#'
scripts/unit-tests.sh
