#!/usr/bin/env bash
# Gateway A/B: two gateway builds side by side against one simulated upstream, to tell
# whether a change costs CPU on the hot path. Both serve at once; rounds interleave
# (A B A B ...) so machine noise hits both alike; CPU per request and per CONNECT setup
# come from /proc (user + system ticks of each gateway process over its runs).
#
# Usage: scripts/bench-gateway-ab.sh BASELINE_EXAMPLES_DIR [ROUNDS (3)] [SECONDS (4)]
#   BASELINE_EXAMPLES_DIR holds a `bench_gateway` built from the baseline, e.g.
#     git worktree add /tmp/base <rev> && (cd /tmp/base &&
#       CARGO_TARGET_DIR=/tmp/base/target cargo build --release -p proxypool-gateway --example bench_gateway)
#     scripts/bench-gateway-ab.sh /tmp/base/target/release/examples
#   The candidate is this checkout's, built here. BASE_ENV and CANDIDATE_ENV add
#   environment to one side, so one build can be measured against itself with a setting
#   changed, e.g. the access log's cost (the baseline directory is then the candidate's):
#     CANDIDATE_ENV="BENCH_ACCESS_LOG=/tmp/access.log" \
#       scripts/bench-gateway-ab.sh target-gateway/release/examples 5 4
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_BIN=${1:?the baseline examples directory}
ROUNDS=${2:-3}
SECS=${3:-4}
CONNS=32
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-gateway}
BIN=$CARGO_TARGET_DIR/release/examples
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
sysctl -qw net.ipv4.tcp_tw_reuse=1 2>/dev/null || true
sysctl -qw net.ipv4.tcp_max_tw_buckets=4096 2>/dev/null || true

echo "building the candidate's release examples..." >&2
cargo build --release -q -p proxypool-gateway --example bench_sim --example bench_gateway --example loadgen

. scripts/bench-lib.sh
start_sim

start() { # start NAME EXAMPLES_DIR [VAR=VALUE...]: a gateway; prints its port and pid
  local port
  port=$(free_port)
  # shellcheck disable=SC2086 # the extra environment is words on purpose
  env ${3:-} "$2/bench_gateway" "127.0.0.1:$port" "$UPSTREAM" "$UP_CRED" http "$CLIENT" "$CLIENT_PASS" "$ORIGIN" 2>"$WORK/$1.err" &
  PIDS+=($!)
  echo "$port $!"
}
read -r A_PORT A_PID < <(start base "$BASE_BIN" "${BASE_ENV:-}")
read -r B_PORT B_PID < <(start candidate "$BIN" "${CANDIDATE_ENV:-}")
# start ran in a process substitution: its PIDS+= did not reach this shell.
PIDS+=("$A_PID" "$B_PID")
for port in $A_PORT $B_PORT; do
  wait_port "$port"
  for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$port" "http://${ORIGIN%%,*}/" || true)
    [ "$code" = 200 ] && break
    sleep 0.1
  done
done

# measure KIND PORT PID: one loadgen run; prints "ticks ok rps"
measure() {
  local u0 s0 u1 s1 out target
  read -r u0 s0 < <(ticks "$3")
  if [ "$1" = http ]; then target=$URLS; else target=$ORIGIN; fi
  out=$("$BIN/loadgen" "$1" "127.0.0.1:$2" "$CLIENT:$CLIENT_PASS" "$target" "$CONNS" "$SECS")
  read -r u1 s1 < <(ticks "$3")
  echo "$(( u1 + s1 - u0 - s0 )) $(field ok "$out") $(field rps "$out")"
}
echo "| kind | round | baseline µs | candidate µs | baseline rps | candidate rps |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for kind in http connect; do
  for round in $(seq 1 "$ROUNDS"); do
    read -r at ao ar < <(measure "$kind" "$A_PORT" "$A_PID")
    read -r bt bo br < <(measure "$kind" "$B_PORT" "$B_PID")
    awk -v k="$kind" -v r="$round" -v at="$at" -v ao="$ao" -v bt="$bt" -v bo="$bo" -v ar="$ar" -v br="$br" \
      'BEGIN { printf "| %s | %d | %.1f | %.1f | %s | %s |\n", k, r, at*10000/ao, bt*10000/bo, ar, br }' |
      tee -a "$WORK/rows"
  done
done
# Means over the rounds: the candidate's CPU per request over the baseline's, and its
# throughput over the baseline's.
echo
awk -F'|' '{ gsub(/ /, "", $2); a[$2] += $4; b[$2] += $5; ar[$2] += $6; br[$2] += $7; n[$2]++ }
  END { for (k in a) printf "%s: candidate/baseline CPU per request %.3f (mean %.1f / %.1f µs), rps %.3f\n",
    k, b[k]/a[k], a[k]/n[k], b[k]/n[k], br[k]/ar[k] }' "$WORK/rows"
