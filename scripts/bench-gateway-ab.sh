#!/usr/bin/env bash
# Gateway A/B: gateway builds side by side against one simulated upstream, to tell
# whether a change costs CPU on the hot path. All serve at once; rounds interleave
# (A B A B ..., or A B R A B R ... with a reference) so machine noise hits them alike; CPU
# per request and per CONNECT setup come from /proc (user + system ticks of each gateway
# process over its runs). One load generator (the candidate's) drives every side, so only
# the gateway differs.
#
# Usage: scripts/bench-gateway-ab.sh [--reference COMMIT] [BASELINE (HEAD)] [ROUNDS (3)] [SECONDS (4)]
#   BASELINE is either a directory holding a `bench_gateway` built from the baseline, or a
#   commit, built like the reference (below); the default, HEAD, is the working tree's
#   parent, so `scripts/bench-gateway-ab.sh` alone measures the uncommitted change. A
#   directory built by hand:
#     git worktree add /tmp/base <rev> && (cd /tmp/base &&
#       CARGO_TARGET_DIR=/tmp/base/target cargo build --release -p proxypool-gateway --example bench_gateway)
#     scripts/bench-gateway-ab.sh /tmp/base/target/release/examples
#   --reference COMMIT (or REFERENCE=COMMIT) adds a third gateway, that commit's, and the
#   candidate is compared with both the baseline and the reference (a fixed point to
#   tell drift over many changes from one change's cost; docs/BENCHMARKS.md names the
#   one to use). A commit is built once, in release, in a git worktree of its own under
#   target/bench-reference/<full commit id> with CARGO_TARGET_DIR inside it (the main
#   target is untouched), and reused by later runs.
#   The candidate is this checkout's, built here. BASE_ENV, CANDIDATE_ENV and
#   REFERENCE_ENV add environment to one side, so one build can be measured against itself
#   with a setting changed, e.g. the access log's cost (the baseline directory is then the
#   candidate's):
#     CANDIDATE_ENV="BENCH_ACCESS_LOG=/tmp/access.log" \
#       scripts/bench-gateway-ab.sh target-gateway/release/examples 5 4
set -euo pipefail
cd "$(dirname "$0")/.."

REFERENCE=${REFERENCE:-}
ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --reference) REFERENCE=${2:?--reference needs a commit}; shift 2 ;;
    --reference=*) REFERENCE=${1#--reference=}; shift ;;
    -*) echo "unknown option $1 (usage: see the top of $0)" >&2; exit 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
BASELINE=${ARGS[0]:-HEAD}
ROUNDS=${ARGS[1]:-3}
SECS=${ARGS[2]:-4}
CONNS=32

# built COMMIT: the examples directory of COMMIT's release bench_gateway, built (or
# reused) in its cached worktree. Build output goes to stderr: stdout is the directory.
built() {
  local sha dir
  sha=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "not a commit: $1" >&2; return 1; }
  dir=$PWD/target/bench-reference/$sha
  if [ ! -e "$dir/.git" ]; then
    mkdir -p "${dir%/*}"
    # --force: a worktree whose directory was deleted by hand is still registered.
    git worktree add --force --detach "$dir" "$sha" >&2
  fi
  echo "building $1 ($sha) in $dir..." >&2
  (cd "$dir" && CARGO_TARGET_DIR=$dir/target cargo build --release -q -p proxypool-gateway --example bench_gateway) >&2
  echo "$dir/target/release/examples"
}
# Commits are resolved before anything starts, so a typo fails here and changes nothing.
if [ -d "$BASELINE" ]; then
  BASE_BIN=$BASELINE
else
  git rev-parse --verify --quiet "$BASELINE^{commit}" >/dev/null ||
    { echo "baseline $BASELINE is neither a directory nor a commit" >&2; exit 2; }
  BASE_BIN=
fi
if [ -n "$REFERENCE" ]; then
  git rev-parse --verify --quiet "$REFERENCE^{commit}" >/dev/null ||
    { echo "reference $REFERENCE is not a commit" >&2; exit 2; }
fi
[ -n "$BASE_BIN" ] || BASE_BIN=$(built "$BASELINE")
REF_BIN=
[ -z "$REFERENCE" ] || REF_BIN=$(built "$REFERENCE")

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
PORTS="$A_PORT $B_PORT"
if [ -n "$REF_BIN" ]; then
  read -r R_PORT R_PID < <(start reference "$REF_BIN" "${REFERENCE_ENV:-}")
  PIDS+=("$R_PID")
  PORTS="$PORTS $R_PORT"
fi
for port in $PORTS; do
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
if [ -n "$REF_BIN" ]; then
  echo "| kind | round | baseline µs | candidate µs | reference µs | baseline rps | candidate rps | reference rps |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
else
  echo "| kind | round | baseline µs | candidate µs | baseline rps | candidate rps |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
fi
# Each round appends "kind round base_us cand_us ref_us base_rps cand_rps ref_rps" to
# rows (ref_* 0 without a reference) and prints its table row.
for kind in http connect; do
  for round in $(seq 1 "$ROUNDS"); do
    read -r at ao ar < <(measure "$kind" "$A_PORT" "$A_PID")
    read -r bt bo br < <(measure "$kind" "$B_PORT" "$B_PID")
    rt=0 ro=1 rr=0
    [ -z "$REF_BIN" ] || read -r rt ro rr < <(measure "$kind" "$R_PORT" "$R_PID")
    awk -v k="$kind" -v r="$round" -v at="$at" -v ao="$ao" -v bt="$bt" -v bo="$bo" -v rt="$rt" \
      -v ro="$ro" -v ar="$ar" -v br="$br" -v rr="$rr" -v ref="$REF_BIN" -v rows="$WORK/rows" 'BEGIN {
        a = at*10000/(ao ? ao : 1); b = bt*10000/(bo ? bo : 1); c = rt*10000/(ro ? ro : 1)
        printf "%s %d %.1f %.1f %.1f %s %s %s\n", k, r, a, b, c, ar, br, rr >> rows
        if (ref != "") printf "| %s | %d | %.1f | %.1f | %.1f | %s | %s | %s |\n", k, r, a, b, c, ar, br, rr
        else printf "| %s | %d | %.1f | %.1f | %s | %s |\n", k, r, a, b, ar, br }'
  done
done
# Means over the rounds: the candidate's CPU per request over the baseline's (and over
# the reference's), and its throughput over theirs.
echo
awk -v ref="$REFERENCE" '{ a[$1] += $3; b[$1] += $4; c[$1] += $5; ar[$1] += $6; br[$1] += $7; cr[$1] += $8; n[$1]++ }
  END { for (k in a) {
    printf "%s: candidate/baseline CPU per request %.3f (mean %.1f / %.1f µs), rps %.3f\n",
      k, b[k]/a[k], a[k]/n[k], b[k]/n[k], br[k]/ar[k]
    if (ref != "") printf "%s: candidate/reference (%s) CPU per request %.3f (mean %.1f / %.1f µs), rps %.3f\n",
      k, ref, b[k]/c[k], c[k]/n[k], b[k]/n[k], br[k]/cr[k] } }' "$WORK/rows"
