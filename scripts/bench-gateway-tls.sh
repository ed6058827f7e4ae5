#!/usr/bin/env bash
# Gateway benchmarks of https at the front door, all in one run against one gateway, each
# measured against its plain counterpart: the gateway's CPU per operation from /proc (user
# + system ticks of its process over both runs of a setup, ÷ what they completed) beside
# the rate, and the ratio printed.
#
# 1. A warm https connection: keep-alive GETs inside one CONNECT per connection.
#    (a) through a plain tunnel: TLS end to end, client to origin; the gateway relays
#        bytes; (b) inspected (`-inspect`): the gateway ends the client's TLS with a leaf it
#        minted for the host, reads each request and forwards it over its own pooled TLS
#        link to the origin, through the upstream proxy's tunnel.
# 2. A new https connection: (c) a plain CONNECT set-up (connect, 200, close: the gateway
#    dials the upstream and opens the tunnel); an inspected one (connect, 200, TLS
#    handshake with the gateway, close; no upstream is dialed before a request) with
#    (d) the leaf from the cache (one host name) and (e) a freshly minted leaf (a new host
#    name per connection, h<pid>x<n>.test).
# 3. Plain-HTTP keep-alive requests (absolute form) through (f) the plain listener and
#    (g) the TLS listener.
#
# What runs, on loopback: bench_sim's plain origins, an https origin (origin.test, a
# certificate of a private "site" CA the gateway's origin_ca names) and one upstream HTTP
# proxy; bench_gateway with both listeners and inspection allowed for its client; loadgen.
# Certificates: openssl, ECDSA P-256 (scripts/bench-lib.sh make_certs).
#
# Usage: scripts/bench-gateway-tls.sh [SECONDS_PER_RUN (default 5)]
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-5}
CONNS=32
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-gateway}
BIN=$CARGO_TARGET_DIR/release/examples
WORK=$(mktemp -d)
PIDS=()
OLD_TW=$(cat /proc/sys/net/ipv4/tcp_max_tw_buckets 2>/dev/null || echo)
cleanup() {
  [ -n "$OLD_TW" ] && sysctl -qw net.ipv4.tcp_max_tw_buckets="$OLD_TW" 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# As in bench-gateway.sh: the connection set-ups and the simulated upstream's per-request
# origin connections would otherwise fill loopback with TIME_WAIT sockets, and every later
# connect() would crawl in the kernel's port search (best effort: may be read-only here;
# restored on exit).
sysctl -qw net.ipv4.tcp_tw_reuse=1 2>/dev/null || true
sysctl -qw net.ipv4.tcp_max_tw_buckets=4096 2>/dev/null || true
sysctl -qw net.ipv4.ip_local_port_range="1024 65000" 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "building release examples..." >&2
cargo build --release -q -p proxypool-gateway --example bench_sim --example bench_gateway --example loadgen

. scripts/bench-lib.sh
CERTS=$WORK/certs
make_certs "$CERTS"
start_sim
start_tls_origin "$CERTS"

GW_PORT=$(free_port)
GWS_PORT=$(free_port)
BENCH_HTTPS="127.0.0.1:$GWS_PORT" BENCH_TLS_CERT="$CERTS/listener.pem" BENCH_TLS_KEY="$CERTS/listener-key.pem" \
  BENCH_INSPECT_CA="$CERTS/inspect-ca.pem" BENCH_INSPECT_CA_KEY="$CERTS/inspect-ca-key.pem" \
  BENCH_ORIGIN_CA="$CERTS/site-ca.pem" \
  "$BIN/bench_gateway" "127.0.0.1:$GW_PORT" "$UPSTREAM" "$UP_CRED" http "$CLIENT" "$CLIENT_PASS" \
  "$ORIGIN,$TLS_ORIGIN" 2>"$WORK/gw.err" &
GW_PID=$!
PIDS+=($GW_PID)
wait_port "$GW_PORT"
wait_port "$GWS_PORT"
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GW_PORT" "http://${ORIGIN%%,*}/" || true)
  [ "$code" = 200 ] && break
  sleep 0.1
done
# Each path once before measuring, so a broken one stops the run here with its error.
check() { # check WHAT CURL-ARGS...
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "${@:2}" || true)
  [ "$code" = 200 ] || { echo "$1: curl answered $code; gateway log:" >&2; cat "$WORK/gw.err" >&2; exit 1; }
}
SITE_PORT=${SITE##*:}
check "plain tunnel" -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GW_PORT" --cacert "$CERTS/site-ca.pem" "https://$SITE/"
check "inspected tunnel" -x "http://$CLIENT-inspect:$CLIENT_PASS@127.0.0.1:$GW_PORT" --cacert "$CERTS/inspect-ca.pem" "https://$SITE/"
check "TLS listener" -x "https://$CLIENT:$CLIENT_PASS@127.0.0.1:$GWS_PORT" --proxy-cacert "$CERTS/site-ca.pem" "http://${ORIGIN%%,*}/"

GW=("127.0.0.1:$GW_PORT" "$CLIENT:$CLIENT_PASS")
GWI=("127.0.0.1:$GW_PORT" "$CLIENT-inspect:$CLIENT_PASS")
GWS=("127.0.0.1:$GWS_PORT" "$CLIENT:$CLIENT_PASS")
FRESH="{n}.test:$SITE_PORT"
tunnel_plain() { run_cpu tp "$GW_PID" tunnel-requests "${GW[@]}" "$SITE" "$CERTS/site-ca.pem" "$CONNS" "$SECS"; }
tunnel_inspected() { run_cpu ti "$GW_PID" tunnel-requests "${GWI[@]}" "$SITE" "$CERTS/inspect-ca.pem" "$CONNS" "$SECS"; }
setup_plain() { run_cpu cp "$GW_PID" connect "${GW[@]}" "$SITE" "$CONNS" "$SECS"; }
setup_cached() { run_cpu cc "$GW_PID" tls-connect "${GWI[@]}" "$SITE" "$CERTS/inspect-ca.pem" "$CONNS" "$SECS"; }
setup_fresh() { run_cpu cf "$GW_PID" tls-connect "${GWI[@]}" "$FRESH" "$CERTS/inspect-ca.pem" "$CONNS" "$SECS"; }
listener_plain() { run_cpu lp "$GW_PID" http "${GW[@]}" "$URLS" "$CONNS" "$SECS"; }
listener_tls() { LOADGEN_PROXY_CA="$CERTS/site-ca.pem" run_cpu ls "$GW_PID" http "${GWS[@]}" "$URLS" "$CONNS" "$SECS"; }

echo "load before the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "warm https requests, $CONNS connections, ${SECS}s per run, 2 runs each..." >&2
A1=$(tunnel_plain); B1=$(tunnel_inspected); A2=$(tunnel_plain); B2=$(tunnel_inspected)
echo "new https connections, $CONNS concurrent..." >&2
C1=$(setup_plain); D1=$(setup_cached); E1=$(setup_fresh)
C2=$(setup_plain); D2=$(setup_cached); E2=$(setup_fresh)
echo "plain HTTP through each listener..." >&2
F1=$(listener_plain); G1=$(listener_tls); F2=$(listener_plain); G2=$(listener_tls)
echo "load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
A=$(best "$A1" "$A2"); B=$(best "$B1" "$B2"); C=$(best "$C1" "$C2"); D=$(best "$D1" "$D2")
E=$(best "$E1" "$E2"); F=$(best "$F1" "$F2"); G=$(best "$G1" "$G2")
echo "all runs: A=[$A1 | $A2] B=[$B1 | $B2] C=[$C1 | $C2] D=[$D1 | $D2] E=[$E1 | $E2]" >&2
echo "          F=[$F1 | $F2] G=[$G1 | $G2]" >&2

# table TITLE UNIT BASE_KEY ROWS...: one markdown table, each row "name|loadgen line|cpu
# key", CPU compared with BASE_KEY's.
table() {
  local title=$1 unit=$2 base=$3 row name rest r key cpu
  shift 3
  echo "| $title | ${unit}s/s | p50 ms | p99 ms | errors | gateway CPU µs/$unit | user + sys | CPU vs first row |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for row in "$@"; do
    name=${row%%|*}; rest=${row#*|}; r=${rest%|*}; key=${rest##*|}
    cpu=$(us_per "$key")
    echo "| $name | $(field rps "$r") | $(field p50_ms "$r") | $(field p99_ms "$r") | $(field errors "$r") | $cpu |" \
      "$(us_per "$key" user) + $(us_per "$key" sys) | $(ratio "$cpu" "$(us_per "$base")") |"
  done
}
echo
table "warm https, keep-alive inside one CONNECT" request tp \
  "(a) plain tunnel (TLS client to origin)|$A|tp" "(b) inspected (TLS ended at the gateway)|$B|ti"
echo
table "new https connection" connection cp \
  "(c) plain CONNECT set-up|$C|cp" "(d) inspected, leaf from the cache|$D|cc" \
  "(e) inspected, leaf minted (new host)|$E|cf"
echo
table "plain HTTP, keep-alive" request lp "(f) plain listener|$F|lp" "(g) TLS listener|$G|ls"
echo
echo "ratios of gateway CPU: inspected / plain tunnel per warm request $(ratio "$(us_per ti)" "$(us_per tp)");" \
  "inspected connection / CONNECT set-up: cached leaf $(ratio "$(us_per cc)" "$(us_per cp)")," \
  "minted leaf $(ratio "$(us_per cf)" "$(us_per cp)"); TLS listener / plain listener per request" \
  "$(ratio "$(us_per ls)" "$(us_per lp)")"
echo "rates: inspected / plain tunnel $(ratio "$(field rps "$B")" "$(field rps "$A")");" \
  "TLS / plain listener $(ratio "$(field rps "$G")" "$(field rps "$F")")"
