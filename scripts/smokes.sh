#!/usr/bin/env bash
# The jepsen-like smoke runs of `make test`: every workload for 16-20 s under partitions, kills, pauses and quiet
# spells (clock steps for the auction; wipes for the rate limiter and video), two at a time, each run in a network
# namespace slot of its own. Each run's output goes to jepsen-out/smoke-NAME.log and is printed, in list order, once
# both lanes end; the exit status is 1 when any run is not valid.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p jepsen-out

# name, then the run's arguments. The lanes take turns down this list, longest first, so they end close together.
SMOKES=(
  "video --time 16 --nemesis partition,kill,pause,wipe,quiet --interval 3 --seed 29"
  "flash --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 3 --concurrency 40 --rate 400"
  "lock --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "log --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "kv --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "shortlink --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "auction --time 20 --nemesis partition,kill,pause,clock,quiet --interval 3 --seed 4 --recovery 30"
  "feed --time 16 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "ratelimit --time 20 --nemesis partition,kill,pause,wipe,quiet --interval 3 --seed 29"
  "notify --time 16 --nemesis partition,kill,pause,quiet --interval 3 --seed 29"
  "collab --time 20 --nemesis partition,kill,pause,quiet --interval 3 --seed 3"
)

run_lane() {
  local lane=$1 i
  for ((i = lane; i < ${#SMOKES[@]}; i += 2)); do
    read -r -a args <<<"${SMOKES[$i]}"
    local name=${args[0]}
    if node jepsen-like/bin/jepsen-like.js run --service "$name" "${args[@]:1}" --out "jepsen-out/smoke-$name" \
      >"jepsen-out/smoke-$name.log" 2>&1; then
      echo 0 >"jepsen-out/smoke-$name.status"
    else
      echo 1 >"jepsen-out/smoke-$name.status"
    fi
  done
}

rm -f jepsen-out/smoke-*.status
run_lane 0 &
first=$!
run_lane 1 &
second=$!
wait "$first" "$second"

failed=()
for smoke in "${SMOKES[@]}"; do
  name=${smoke%% *}
  cat "jepsen-out/smoke-$name.log"
  [ "$(cat "jepsen-out/smoke-$name.status" 2>/dev/null)" = 0 ] || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "smoke runs not valid: ${failed[*]}"
  exit 1
fi
echo "${#SMOKES[@]} smoke runs valid"
