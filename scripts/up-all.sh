#!/usr/bin/env bash
# Start every service's cluster side by side, each in DATA_ROOT/<service> on its own ports with its own token, then
# the dashboard; end with one table (service, processes running, the HTTP address to call, the token file) and the
# dashboard's address. Settings, from the environment (`make up SERVICES="kv lock"` passes SERVICES):
#   SERVICES="kv lock"    only these services (default: every one)
#   DATA_ROOT=data        the folder of the clusters' folders
#   PORT_OFFSET=0         added to every service's default ports: a second set of clusters beside the first
#   DASHBOARD_PORT        the dashboard's port (default 6900 + PORT_OFFSET)
#   UP_OPTIONS            more `cluster up` options for every cluster ("--nodes 3"); UP_OPTIONS_<service> for one
#   CLUSTER_AUTH_TOKEN    one token for every cluster instead of one each: a key derived from one cluster (a client
#                         token, a tenant key, a user key) is then valid on all of them. Not recommended.
# The dashboard's login secret is its own (DATA_ROOT/dashboard.token, mode 600), never a cluster's, and no secret is
# put on a command line (`ps` shows those to every user).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
export DATA_ROOT="${DATA_ROOT:-data}"
PORT_OFFSET="${PORT_OFFSET:-0}"
DASHBOARD_PORT="${DASHBOARD_PORT:-$((6900 + PORT_OFFSET))}"
cli=(node cluster/bin/cluster.js)
mkdir -p "$DATA_ROOT"

# Every service with its default base port, in the CLI's order, one "name port" line each.
declare -A base=()
all=()
while read -r name port; do
  base[$name]=$port
  all+=("$name")
done < <(node -e "import('./cluster/dist/src/service-list.js').then((m) => console.log(m.serviceNames().map((n) => n + ' ' + m.defaultBasePort(n)).join('\n')))")
services="${SERVICES:-${all[*]}}"
for service in $services; do
  [ -n "${base[$service]:-}" ] || { echo "up-all: no service $service (services: ${all[*]})" >&2; exit 2; }
done

if [ -n "${CLUSTER_AUTH_TOKEN:-}" ]; then
  echo "up-all: CLUSTER_AUTH_TOKEN is set: every cluster started now takes that one token, so a key derived from one is valid on all" >&2
fi

for service in $services; do
  dir="$DATA_ROOT/$service"
  if [ -f "$dir/cluster.json" ] && "${cli[@]}" status --data "$dir" --json | grep -q '"pid": [0-9]'; then
    echo "$service: already running ($dir)"
    continue
  fi
  options=()
  [ "$PORT_OFFSET" = 0 ] || options+=(--base-port "$((base[$service] + PORT_OFFSET))")
  per_service="UP_OPTIONS_$service"
  # Word-split on purpose: these are option lists.
  # shellcheck disable=SC2206
  options+=(${UP_OPTIONS:-} ${!per_service:-})
  started=$SECONDS
  # The endpoints and the token `cluster up` prints are in the table below and in the token file: kept off the screen.
  if output="$(scripts/up-service.sh "$service" "${options[@]}" 2>&1)"; then
    echo "$service: up in $((SECONDS - started)) s ($(grep -c '^  [a-z]*[0-9]*  http' <<< "$output") processes)"
  else
    echo "$service: cluster up failed:" >&2
    echo "$output" >&2
    exit 1
  fi
done

# The dashboard, in the background (stopped by scripts/down-all.sh). Its log holds the login address with the
# secret, so it is made readable by its owner only (umask above).
if [ -f "$DATA_ROOT/dashboard.pid" ] && kill -0 "$(cat "$DATA_ROOT/dashboard.pid")" 2>/dev/null; then
  echo "dashboard: already running (pid $(cat "$DATA_ROOT/dashboard.pid"))"
else
  : > "$DATA_ROOT/dashboard.log"
  nohup "${cli[@]}" dashboard --data-root "$DATA_ROOT" --port "$DASHBOARD_PORT" >> "$DATA_ROOT/dashboard.log" 2>&1 &
  echo $! > "$DATA_ROOT/dashboard.pid"
  for _ in $(seq 1 100); do
    grep -q '^dashboard: ' "$DATA_ROOT/dashboard.log" && break
    kill -0 "$(cat "$DATA_ROOT/dashboard.pid")" 2>/dev/null || break
    sleep 0.1
  done
fi
url="$(grep '^dashboard: ' "$DATA_ROOT/dashboard.log" | tail -1 | cut -d' ' -f2)" || true
if [ -z "$url" ]; then
  echo "the dashboard did not start; see $DATA_ROOT/dashboard.log:" >&2
  cat "$DATA_ROOT/dashboard.log" >&2
  exit 1
fi

echo
"${cli[@]}" list --data-root "$DATA_ROOT"
echo "dashboard: $url  (login secret in $DATA_ROOT/dashboard.token)"
