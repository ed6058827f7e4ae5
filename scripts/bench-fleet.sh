#!/usr/bin/env bash
# Fleet relay benchmark: what a relayed request costs against one served by its owner.
#
# Two `proxypool gateway` processes in a fleet ([gateway.fleet]) under one
# `proxypool controller` (embedded memory store) against `proxypool sim`. One sticky
# session owned by gateway 1 is loaded with the same keep-alive plain-HTTP requests
#   (a) sent to its owner, gateway 1 (served locally, no hop), and
#   (b) sent to gateway 2, which relays each request to gateway 1 over the fleet hop
#       (pooled TLS 1.3 connections, mutually pinned),
# side by side in one run, each setup twice, interleaved (a b a b; the better run counts
# for requests/s). Printed: requests/s, p50/p99 latency, errors, and the CPU time per
# request of both gateway processes (utime+stime from /proc/<pid>/stat around each run,
# summed over both runs), with the ratios relayed / owned.
#
# Usage: scripts/bench-fleet.sh [SECONDS_PER_RUN (default 10)] [CONNECTIONS (default 8)]
#        (KEEP_WORK=1 keeps the configurations and every process's log)
# Builds `proxypool` and the loadgen in release (target/release), or reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-10}
# A session's requests all go to its one proxy, which takes max_sessions (16) at once:
# stay under it, so the run measures the hop and not the capacity wait.
CONNS=${2:-8}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
PROXYPOOL=$TARGET/release/proxypool
BIN=$TARGET/release/examples
WORK=$(mktemp -d)
PIDS=()
OLD_TW=$(cat /proc/sys/net/ipv4/tcp_max_tw_buckets 2>/dev/null || echo)
cleanup() {
  [ -n "$OLD_TW" ] && sysctl -qw net.ipv4.tcp_max_tw_buckets="$OLD_TW" 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The simulated upstream opens one origin connection per request: tens of thousands of
# TIME_WAIT sockets exhaust loopback's ephemeral ports (every process's connect() then
# fails with EADDRNOTAVAIL, the gateways' control calls included), as in
# scripts/bench-gateway.sh. Cap them for the run (restored on exit; best effort).
sysctl -qw net.ipv4.tcp_tw_reuse=1 2>/dev/null || true
sysctl -qw net.ipv4.tcp_max_tw_buckets=4096 2>/dev/null || true
sysctl -qw net.ipv4.ip_local_port_range="1024 65000" 2>/dev/null || true

echo "building release proxypool and loadgen..." >&2
cargo build --release -q -p proxypool
cargo build --release -q -p proxypool-gateway --example loadgen

. scripts/bench-lib.sh

CLIENT_PASS=bench-gateway-password
export BENCH_WORKER_TOKEN_1=bench-worker-token-1 BENCH_WORKER_TOKEN_2=bench-worker-token-2
export BENCH_API_TOKEN=bench-api-token-0001 BENCH_PASSWORD=$CLIENT_PASS

# The simulated vendor, without proxy rotation (a run must not lose its proxy).
"$PROXYPOOL" sim --proxies 8 --proxy-ttl 0 --tls-dir "$WORK/sim-tls" >"$WORK/sim.out" 2>"$WORK/sim.err" &
PIDS+=($!)
for _ in $(seq 1 200); do grep -q '^Stop with' "$WORK/sim.out" 2>/dev/null && break; sleep 0.05; done
ORIGIN=$(sed -n 's|^  origin *\(http://[^ ]*\).*|\1|p' "$WORK/sim.out")
ORIGIN_PORT=$(sed 's|.*:\([0-9]*\)/$|\1|' <<<"$ORIGIN")
# The first [[upstreams]] entry the banner prints (the JSON list).
UPSTREAM=$(awk '/^\[\[upstreams\]\]/ { n++ } n == 1 && /^$/ { exit } n == 1' "$WORK/sim.out")
[ -n "$ORIGIN" ] && [ -n "$UPSTREAM" ] || { echo "proxypool sim did not start" >&2; cat "$WORK/sim.err" >&2; exit 1; }

CONTROL=$(free_port); API=$(free_port)
cat >"$WORK/controller.toml" <<CONF
[store]
url = "memory"

[listen]
control = "127.0.0.1:$CONTROL"
api = "127.0.0.1:$API"

[[worker_tokens]]
name = "gw-1"
token = { env = "BENCH_WORKER_TOKEN_1" }
workers = ["gw-1"]

[[worker_tokens]]
name = "gw-2"
token = { env = "BENCH_WORKER_TOKEN_2" }
workers = ["gw-2"]

$UPSTREAM

[[clients]]
id = "$CLIENT"
project = "$CLIENT"
api_token = { env = "BENCH_API_TOKEN" }
gateway_password = { env = "BENCH_PASSWORD" }
CONF
PROXYPOOL_LOG=warn "$PROXYPOOL" controller --config "$WORK/controller.toml" >"$WORK/controller.out" 2>"$WORK/controller.err" &
PIDS+=($!)
# started NAME PORT: waits for a process of ours to listen, or shows why it did not.
started() {
  for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0; sleep 0.05; done
  echo "$1 did not listen on $2:" >&2
  tail -20 "$WORK/$1.err" >&2
  exit 1
}
started controller "$CONTROL"

# gateway N: starts gw-N; sets GW_PORT_N, ADMIN_N, PID_N.
gateway() {
  local n=$1 http admin fleet pid
  http=$(free_port); admin=$(free_port); fleet=$(free_port)
  cat >"$WORK/gw-$n.toml" <<CONF
[gateway]
worker_id = "gw-$n"
controller_url = ["http://127.0.0.1:$CONTROL"]
worker_token = { env = "BENCH_WORKER_TOKEN_$n" }
[gateway.listeners]
http = "127.0.0.1:$http"
admin = "127.0.0.1:$admin"
[gateway.fleet]
listen = "127.0.0.1:$fleet"
# One load generator on one address: the per-IP shield would be the benchmark.
[gateway.shield]
requests_per_second = 1000000.0
burst = 1000000.0
[gateway.destinations]
allow_cidrs = ["127.0.0.1/32"]
ports = [80, 443, $ORIGIN_PORT]
CONF
  PROXYPOOL_LOG=warn "$PROXYPOOL" gateway --config "$WORK/gw-$n.toml" >"$WORK/gw-$n.out" 2>"$WORK/gw-$n.err" &
  pid=$!
  PIDS+=($pid)
  started "gw-$n" "$http"
  printf -v "GW_PORT_$n" '%s' "$http"
  printf -v "ADMIN_$n" '%s' "$admin"
  printf -v "PID_$n" '%s' "$pid"
}
gateway 1
gateway 2
# metric ADMIN NAME: the sum of a family's samples on a gateway's /metrics (0 if none).
metric() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v name="$2" '$1 == name || index($1, name "{") == 1 { s += $2 } END { print s + 0 }'
}
echo "waiting for both gateways to serve in a fleet of 2..." >&2
for _ in $(seq 1 600); do
  [ "$(metric "$ADMIN_1" proxypool_gateway_fleet_members)" = 2 ] &&
    [ "$(metric "$ADMIN_2" proxypool_gateway_fleet_members)" = 2 ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GW_PORT_1" "$ORIGIN")" = 200 ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GW_PORT_2" "$ORIGIN")" = 200 ] &&
    break
  sleep 0.1
done
[ "$(metric "$ADMIN_1" proxypool_gateway_fleet_members)" = 2 ] || {
  echo "no fleet of 2 (gateway 1 sees $(metric "$ADMIN_1" proxypool_gateway_fleet_members))" >&2
  tail -5 "$WORK"/gw-*.err >&2
  exit 1
}

# A session gateway 1 owns: one request to gateway 2 that gateway 2 relays.
USER_NAME=
for i in $(seq 0 31); do
  candidate="$CLIENT-session-bench$i"
  before=$(metric "$ADMIN_2" proxypool_gateway_fleet_relayed_total)
  curl -s -o /dev/null -x "http://$candidate:$CLIENT_PASS@127.0.0.1:$GW_PORT_2" "$ORIGIN"
  if [ "$(metric "$ADMIN_2" proxypool_gateway_fleet_relayed_total)" != "$before" ]; then
    USER_NAME=$candidate
    break
  fi
done
[ -n "$USER_NAME" ] || { echo "gateway 2 relayed none of 32 sessions" >&2; exit 1; }
echo "session $USER_NAME is owned by gateway 1" >&2

# load KEY PORT: one loadgen run through PORT, with both gateways' CPU ticks around it
# appended to KEY's tally ("key entry owner ok": entry = gateway 2's, owner = gateway 1's).
load() {
  local key=$1 port=$2 a0 b0 a1 b1 out u s
  read -r u s < <(ticks "$PID_1"); a0=$((u + s))
  read -r u s < <(ticks "$PID_2"); b0=$((u + s))
  out=$(run http "127.0.0.1:$port" "$USER_NAME:$CLIENT_PASS" "$ORIGIN" "$CONNS" "$SECS")
  read -r u s < <(ticks "$PID_1"); a1=$((u + s))
  read -r u s < <(ticks "$PID_2"); b1=$((u + s))
  echo "$key $((b1 - b0)) $((a1 - a0)) $(field ok "$out")" >>"$WORK/cpu"
  echo "$out"
}
# per KEY entry|owner|total: CPU µs per completed request of KEY's runs.
per() {
  awk -v k="$1" -v part="$2" '$1 == k {
      t += (part == "owner" ? 0 : $2) + (part == "entry" ? 0 : $3); n += $4 }
    END { if (n) printf "%.1f", t * 10000 / n; else print "n/a" }' "$WORK/cpu"
}

echo "plain HTTP, one session, $CONNS keep-alive connections, ${SECS}s per run, 2 runs each..." >&2
A1=$(load owned "$GW_PORT_1")
B1=$(load relayed "$GW_PORT_2")
A2=$(load owned "$GW_PORT_1")
B2=$(load relayed "$GW_PORT_2")
A=$(best "$A1" "$A2"); B=$(best "$B1" "$B2")
echo "all runs: owned=[$A1 | $A2] relayed=[$B1 | $B2]" >&2
echo "relayed by gateway 2: $(metric "$ADMIN_2" proxypool_gateway_fleet_relayed_total)," \
  "served for a peer by gateway 1: $(metric "$ADMIN_1" proxypool_gateway_fleet_served_total)" >&2

echo
echo "| plain HTTP, one session | requests/s | p50 ms | p99 ms | errors | CPU µs/request, gateway 2 (entry) | gateway 1 (owner) | both |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
row() { # row NAME LINE KEY
  echo "| $1 | $(field rps "$2") | $(field p50_ms "$2") | $(field p99_ms "$2") | $(field errors "$2") | $(per "$3" entry) | $(per "$3" owner) | $(per "$3" total) |"
}
row "(a) to the owner (gateway 1)" "$A" owned
row "(b) to the other gateway, relayed to the owner" "$B" relayed
echo
echo "ratios relayed / owned: requests/s $(ratio "$(field rps "$B")" "$(field rps "$A")")," \
  "p50 $(ratio "$(field p50_ms "$B")" "$(field p50_ms "$A")")," \
  "p99 $(ratio "$(field p99_ms "$B")" "$(field p99_ms "$A")")," \
  "CPU per request (both gateways) $(ratio "$(per relayed total)" "$(per owned total)")"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
