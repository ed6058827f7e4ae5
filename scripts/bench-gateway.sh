#!/usr/bin/env bash
# Gateway benchmark: one run on loopback, side by side.
#
#   plain HTTP requests/s, p50, p99 through
#     (a) the simulated upstream HTTP proxy directly (the bound),
#     (b) proxypool's gateway chained to it, and (b') a second one with the access log on
#         (JSON lines to a file, the default queue), to tell what the log costs,
#     (c) tinyproxy chained to it (Upstream http user:pass@host:port, same client auth),
#     (d) squid chained to it (cache_peer … parent … login=user:pass, never_direct, no
#         cache, client Basic auth through basic_ncsa_auth),
#     (e) a byte relay chained to it (the floor: accept, dial, copy bytes both ways, laid
#         out on threads like the gateway; examples/bench_relay.rs), the client speaking
#         to the upstream through it as in (a);
#     (f) g3proxy chained to it (an http_proxy server whose proxy_http escaper carries the
#         upstream's credentials, same client Basic auth through a static user, 2 threads,
#         log discard, resolver deny_all), when a g3proxy binary is found: $G3PROXY, else
#         `g3proxy` on PATH; without one the row is left out and stderr says so;
#   CONNECT tunnel setups/s for (a) to (f);
#   CPU time per request / per CONNECT setup of each proxy (user+system ticks of its
#   processes from /proc around its runs, divided by the requests it completed), and
#   that time split into user and system (what the kernel's socket work costs every
#   proxy alike, the relay included, against what each proxy adds in user space);
#   refusals at 32 clients over one proxy with max_sessions 16, without and with the
#   capacity wait;
#   resident memory per idle open tunnel at 10,000 tunnels through the gateway.
#
# Usage: scripts/bench-gateway.sh [SECONDS_PER_HTTP_PHASE (default 10)]
#        (SKIP_HOLD=1 skips the idle-tunnel phase; G3PROXY=/path/to/g3proxy adds (f);
#        CONNS=N sets the concurrent connections of the plain-HTTP and CONNECT loads,
#        default 32)
# Needs root for apt-get (tinyproxy, squid) and for raising the descriptor limit.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-10}
CONNECT_SECS=5
CONNS=${CONNS:-32}
# 10,000 idle tunnels need 20,000 descriptors in the gateway (client + upstream side);
# where the hard limit is lower (containers), hold as many as fit and say so.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
FD_LIMIT=$(ulimit -n)
TUNNELS=10000
if [ "$FD_LIMIT" != unlimited ] && [ $((TUNNELS * 2 + 400)) -gt "$FD_LIMIT" ]; then
  TUNNELS=$(( (FD_LIMIT - 400) / 2 ))
fi
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

for tool in tinyproxy squid; do
  if ! command -v "$tool" >/dev/null; then
    (apt-get install -y "$tool" || (apt-get update && apt-get install -y "$tool")) >/dev/null
  fi
done
SQUID_AUTH=
for helper in /usr/lib/squid/basic_ncsa_auth /usr/lib64/squid/basic_ncsa_auth; do
  [ -x "$helper" ] && SQUID_AUTH=$helper && break
done
[ -n "$SQUID_AUTH" ] || { echo "squid's basic_ncsa_auth helper not found" >&2; exit 1; }
# Tunnel setups churn through ports; allow reuse (best effort: may be read-only here).
# The simulated upstream opens one origin connection per request: tens of thousands of
# TIME_WAIT sockets make every later connect() on loopback crawl (kernel port search),
# which would measure the kernel, not the proxies. Cap them for the run (restored on exit).
sysctl -qw net.ipv4.tcp_tw_reuse=1 2>/dev/null || true
sysctl -qw net.ipv4.tcp_max_tw_buckets=4096 2>/dev/null || true
sysctl -qw net.ipv4.ip_local_port_range="1024 65000" 2>/dev/null || true

echo "building release examples..." >&2
cargo build --release -q -p proxypool-gateway --example bench_sim --example bench_gateway --example bench_relay --example loadgen

. scripts/bench-lib.sh
start_sim

GW_PORT=$(free_port)
"$BIN/bench_gateway" "127.0.0.1:$GW_PORT" "$UPSTREAM" "$UP_CRED" http "$CLIENT" "$CLIENT_PASS" "$ORIGIN" 2>"$WORK/gw.err" &
GW_PID=$!
PIDS+=($GW_PID)
wait_port "$GW_PORT"
GL_PORT=$(free_port)
BENCH_ACCESS_LOG="$WORK/access.log" "$BIN/bench_gateway" "127.0.0.1:$GL_PORT" "$UPSTREAM" "$UP_CRED" http "$CLIENT" "$CLIENT_PASS" "$ORIGIN" 2>"$WORK/gwl.err" &
GL_PID=$!
PIDS+=($GL_PID)
wait_port "$GL_PORT"

TP_PORT=$(free_port)
cat >"$WORK/tinyproxy.conf" <<CONF
Port $TP_PORT
Listen 127.0.0.1
Timeout 60
MaxClients 1024
LogLevel Critical
DisableViaHeader Yes
Allow 127.0.0.1
BasicAuth $CLIENT $CLIENT_PASS
Upstream http ${UP_CRED}@${UPSTREAM}
PidFile "$WORK/tinyproxy.pid"
CONF
tinyproxy -d -c "$WORK/tinyproxy.conf" >/dev/null 2>&1 &
TP_PID=$!
PIDS+=($TP_PID)
wait_port "$TP_PORT"

# squid: a forward proxy whose only way out is the upstream as a parent peer (the
# vendor credentials sent with login=), caching off, the same client Basic auth checked
# by squid's own helper against an htpasswd file. -N: no daemon, one process (its
# helpers are children, counted in its CPU).
SQ_PORT=$(free_port)
mkdir -p "$WORK/squid"
printf '%s:%s\n' "$CLIENT" "$(openssl passwd -apr1 "$CLIENT_PASS")" >"$WORK/squid/passwd"
# squid will not keep root: as root it runs as the packaged 'proxy' user, which needs its
# directory.
SQ_USER=$(id -un)
if [ "$(id -u)" = 0 ]; then
  SQ_USER=proxy
  chmod 755 "$WORK"
  chown -R "$SQ_USER" "$WORK/squid"
fi
UP_HOST=${UPSTREAM%:*}; UP_PORT=${UPSTREAM##*:}
cat >"$WORK/squid.conf" <<CONF
http_port 127.0.0.1:$SQ_PORT
pid_filename $WORK/squid/squid.pid
cache_effective_user $SQ_USER
coredump_dir $WORK/squid
cache deny all
cache_mem 0 MB
access_log none
cache_store_log none
cache_log $WORK/squid/cache.log
logfile_rotate 0
max_filedescriptors 8192
client_persistent_connections on
server_persistent_connections on
via off
forwarded_for delete
auth_param basic program $SQUID_AUTH $WORK/squid/passwd
auth_param basic children 2
auth_param basic credentialsttl 1 hour
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
cache_peer $UP_HOST parent $UP_PORT 0 no-query no-digest default login=$UP_CRED
never_direct allow all
shutdown_lifetime 0 seconds
CONF
squid -N -f "$WORK/squid.conf" >"$WORK/squid/stdout" 2>&1 &
SQ_PID=$!
PIDS+=($SQ_PID)
wait_port "$SQ_PORT"

# g3proxy: the same job as the gateway (client Basic auth, every request chained to the
# upstream with its credentials, no log), on two worker threads like the gateway's on this
# 2-core machine. Its static user's token is md5(password + salt) in hex. The resolver
# refuses every name: the escaper dials only the upstream, by address.
G3PROXY=${G3PROXY:-$(command -v g3proxy || true)}
G3_PID=
if [ -n "$G3PROXY" ] && [ -x "$G3PROXY" ]; then
  G3_PORT=$(free_port)
  G3_SALT=0123456789abcdef
  G3_MD5=$(python3 -c "import hashlib, sys; print(hashlib.md5(sys.argv[1].encode() + bytes.fromhex(sys.argv[2])).hexdigest())" "$CLIENT_PASS" "$G3_SALT")
  cat >"$WORK/g3proxy.yaml" <<CONF
runtime:
  thread_number: 2
log: discard
user_group:
  - name: bench
    static_users:
      - name: $CLIENT
        token:
          salt: $G3_SALT
          md5: $G3_MD5
server:
  - name: http
    type: http_proxy
    escaper: up
    user_group: bench
    listen:
      address: "127.0.0.1:$G3_PORT"
resolver:
  - name: none
    type: deny_all
escaper:
  - name: up
    type: proxy_http
    proxy_addr: $UPSTREAM
    proxy_username: ${UP_CRED%%:*}
    proxy_password: ${UP_CRED#*:}
    resolver: none
CONF
  "$G3PROXY" -t -c "$WORK/g3proxy.yaml" >"$WORK/g3proxy.check" 2>&1 ||
    { cat "$WORK/g3proxy.check" >&2; echo "g3proxy refused its configuration" >&2; exit 1; }
  # -C: its control socket in the scratch directory (default /tmp/g3), gone with it.
  mkdir -p "$WORK/g3"
  "$G3PROXY" -C "$WORK/g3" -c "$WORK/g3proxy.yaml" >"$WORK/g3proxy.out" 2>&1 &
  G3_PID=$!
  PIDS+=($G3_PID)
  wait_port "$G3_PORT"
elif [ -n "$G3PROXY" ]; then
  echo "note: G3PROXY=$G3PROXY is not an executable: the g3proxy rows are left out" >&2
else
  echo "note: no g3proxy (set G3PROXY=/path/to/g3proxy or put g3proxy on PATH): its rows are left out" >&2
fi

RL_PORT=$(free_port)
"$BIN/bench_relay" "127.0.0.1:$RL_PORT" "$UPSTREAM" 2>"$WORK/relay.err" &
RL_PID=$!
PIDS+=($RL_PID)
wait_port "$RL_PORT"

ORIGIN1=${ORIGIN%%,*}
# Wait until the gateway applied its snapshot and serves.
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GW_PORT" "http://$ORIGIN1/" || true)
  code_l=$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$GL_PORT" "http://$ORIGIN1/" || true)
  [ "$code" = 200 ] && [ "$code_l" = 200 ] && break
  sleep 0.1
done

GW=("127.0.0.1:$GW_PORT" "$CLIENT:$CLIENT_PASS")
GL=("127.0.0.1:$GL_PORT" "$CLIENT:$CLIENT_PASS")
TP=("127.0.0.1:$TP_PORT" "$CLIENT:$CLIENT_PASS")
SQ=("127.0.0.1:$SQ_PORT" "$CLIENT:$CLIENT_PASS")
RL=("127.0.0.1:$RL_PORT" "$UP_CRED")
G3=("127.0.0.1:${G3_PORT:-0}" "$CLIENT:$CLIENT_PASS")
g3() { # g3 KEY KIND TARGET SECS: one g3proxy run, nothing without the binary
  [ -z "$G3_PID" ] || run_cpu "$1" "$G3_PID" "$2" "${G3[@]}" "$3" "$CONNS" "$4"
}
echo "plain HTTP, $CONNS keep-alive connections, ${SECS}s per run, 2 runs each..." >&2
A1=$(run http "$UPSTREAM" "$UP_CRED" "$URLS" "$CONNS" "$SECS")
B1=$(run_cpu gw "$GW_PID" http "${GW[@]}" "$URLS" "$CONNS" "$SECS")
L1=$(run_cpu gwl "$GL_PID" http "${GL[@]}" "$URLS" "$CONNS" "$SECS")
C1=$(run_cpu tp "$TP_PID" http "${TP[@]}" "$URLS" "$CONNS" "$SECS")
D1=$(run_cpu sq "$SQ_PID" http "${SQ[@]}" "$URLS" "$CONNS" "$SECS")
E1=$(run_cpu rl "$RL_PID" http "${RL[@]}" "$URLS" "$CONNS" "$SECS")
F1=$(g3 g3 http "$URLS" "$SECS")
A2=$(run http "$UPSTREAM" "$UP_CRED" "$URLS" "$CONNS" "$SECS")
B2=$(run_cpu gw "$GW_PID" http "${GW[@]}" "$URLS" "$CONNS" "$SECS")
L2=$(run_cpu gwl "$GL_PID" http "${GL[@]}" "$URLS" "$CONNS" "$SECS")
C2=$(run_cpu tp "$TP_PID" http "${TP[@]}" "$URLS" "$CONNS" "$SECS")
D2=$(run_cpu sq "$SQ_PID" http "${SQ[@]}" "$URLS" "$CONNS" "$SECS")
E2=$(run_cpu rl "$RL_PID" http "${RL[@]}" "$URLS" "$CONNS" "$SECS")
F2=$(g3 g3 http "$URLS" "$SECS")
A=$(best "$A1" "$A2"); B=$(best "$B1" "$B2"); C=$(best "$C1" "$C2"); D=$(best "$D1" "$D2"); E=$(best "$E1" "$E2")
F=$(best "$F1" "$F2"); L=$(best "$L1" "$L2")
echo "CONNECT setups, $CONNS concurrent, ${CONNECT_SECS}s per run, 2 runs each..." >&2
CA1=$(run connect "$UPSTREAM" "$UP_CRED" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CB1=$(run_cpu cgw "$GW_PID" connect "${GW[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CL1=$(run_cpu cgwl "$GL_PID" connect "${GL[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CC1=$(run_cpu ctp "$TP_PID" connect "${TP[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CD1=$(run_cpu csq "$SQ_PID" connect "${SQ[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CE1=$(run_cpu crl "$RL_PID" connect "${RL[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CF1=$(g3 cg3 connect "$ORIGIN" "$CONNECT_SECS")
CA2=$(run connect "$UPSTREAM" "$UP_CRED" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CB2=$(run_cpu cgw "$GW_PID" connect "${GW[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CL2=$(run_cpu cgwl "$GL_PID" connect "${GL[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CC2=$(run_cpu ctp "$TP_PID" connect "${TP[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CD2=$(run_cpu csq "$SQ_PID" connect "${SQ[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CE2=$(run_cpu crl "$RL_PID" connect "${RL[@]}" "$ORIGIN" "$CONNS" "$CONNECT_SECS")
CF2=$(g3 cg3 connect "$ORIGIN" "$CONNECT_SECS")
CA=$(best "$CA1" "$CA2"); CB=$(best "$CB1" "$CB2"); CC=$(best "$CC1" "$CC2"); CD=$(best "$CD1" "$CD2"); CE=$(best "$CE1" "$CE2")
CF=$(best "$CF1" "$CF2"); CL=$(best "$CL1" "$CL2")
if [ "${SKIP_HOLD:-}" != 1 ]; then
  echo "holding $TUNNELS idle tunnels (descriptor limit $FD_LIMIT) through the gateway..." >&2
  H=$(run hold "127.0.0.1:$GW_PORT" "$CLIENT:$CLIENT_PASS" "$ORIGIN" "$TUNNELS" "$GW_PID")
fi

# A full pool: two more gateways whose one proxy has the default max_sessions (16), one
# refusing at once (capacity_wait "0s", the behaviour before the wait existed) and one
# with the default wait; 32 clients each, plain HTTP and CONNECT, refusals counted.
full_pool() { # full_pool WAIT_MS: starts the gateway, sets FP_PORT
  FP_PORT=$(free_port)
  BENCH_MAX_SESSIONS=16 BENCH_CAPACITY_WAIT_MS=$1 "$BIN/bench_gateway" "127.0.0.1:$FP_PORT" \
    "$UPSTREAM" "$UP_CRED" http "$CLIENT" "$CLIENT_PASS" "$ORIGIN" >/dev/null 2>>"$WORK/gw.err" &
  PIDS+=($!)
  wait_port "$FP_PORT"
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -x "http://$CLIENT:$CLIENT_PASS@127.0.0.1:$FP_PORT" "http://$ORIGIN1/" || true)" = 200 ] && break
    sleep 0.1
  done
}
echo "full pool (max_sessions 16, 32 clients), capacity_wait 0s vs default..." >&2
full_pool 0; FP0=$FP_PORT
full_pool 300; FPW=$FP_PORT
F0=$(run http "127.0.0.1:$FP0" "$CLIENT:$CLIENT_PASS" "$URLS" 32 "$CONNECT_SECS")
FW=$(run http "127.0.0.1:$FPW" "$CLIENT:$CLIENT_PASS" "$URLS" 32 "$CONNECT_SECS")
FC0=$(run connect "127.0.0.1:$FP0" "$CLIENT:$CLIENT_PASS" "$ORIGIN" 32 "$CONNECT_SECS")
FCW=$(run connect "127.0.0.1:$FPW" "$CLIENT:$CLIENT_PASS" "$ORIGIN" 32 "$CONNECT_SECS")

echo "all runs: A=[$A1 | $A2] B=[$B1 | $B2] B'=[$L1 | $L2] C=[$C1 | $C2] D=[$D1 | $D2] E=[$E1 | $E2] F=[$F1 | $F2]" >&2
echo "          CA=[$CA1 | $CA2] CB=[$CB1 | $CB2] CB'=[$CL1 | $CL2] CC=[$CC1 | $CC2] CD=[$CD1 | $CD2] CE=[$CE1 | $CE2] CF=[$CF1 | $CF2]" >&2
echo
# table TITLE UNIT SQUID_KEY RELAY_KEY G3_KEY ROWS...: one markdown table, each row
# "name|loadgen line|cpu key" (no key: no CPU column for it; an empty loadgen line: the
# row is left out). CPU vs g3proxy is given for the gateway's row, the one it is for.
table() {
  local title=$1 unit=$2 squid=$3 relay=$4 g3key=$5 row name rest r key cpu vs_squid vs_relay vs_g3
  shift 5
  echo "| $title | ${unit}s/s | p50 ms | p99 ms | errors | CPU µs/$unit | user + sys | CPU vs squid | CPU vs relay | CPU vs g3proxy |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for row in "$@"; do
    name=${row%%|*}; rest=${row#*|}; r=${rest%|*}; key=${rest##*|}
    [ -n "$r" ] || continue
    cpu=—; split=—; vs_squid=—; vs_relay=—; vs_g3=—
    if [ -n "$key" ]; then
      cpu=$(us_per "$key")
      split="$(us_per "$key" user) + $(us_per "$key" sys)"
      vs_squid=$(ratio "$cpu" "$(us_per "$squid")")
      vs_relay=$(ratio "$cpu" "$(us_per "$relay")")
      if [ -n "$G3_PID" ] && [[ $key =~ ^c?gwl?$ ]]; then
        vs_g3=$(ratio "$cpu" "$(us_per "$g3key")")
      fi
    fi
    echo "| $name | $(field rps "$r") | $(field p50_ms "$r") | $(field p99_ms "$r") | $(field errors "$r") | $cpu | $split | $vs_squid | $vs_relay | $vs_g3 |"
  done
}
table "plain HTTP" request sq rl g3 "(a) upstream proxy directly (bound)|$A|" \
  "(b) proxypool gateway → upstream|$B|gw" "(b') proxypool gateway, access log on (JSON)|$L|gwl" \
  "(c) tinyproxy → upstream|$C|tp" \
  "(d) squid → upstream|$D|sq" "(e) byte relay → upstream (floor)|$E|rl" \
  "(f) g3proxy → upstream|$F|g3"
echo
table "CONNECT" setup csq crl cg3 "(a) upstream proxy directly|$CA|" \
  "(b) proxypool gateway → upstream|$CB|cgw" "(b') proxypool gateway, access log on (JSON)|$CL|cgwl" \
  "(c) tinyproxy → upstream|$CC|ctp" \
  "(d) squid → upstream|$CD|csq" "(e) byte relay → upstream (floor)|$CE|crl" \
  "(f) g3proxy → upstream|$CF|cg3"

echo
echo "ratios: plain HTTP (b)/(a) = $(ratio "$(field rps "$B")" "$(field rps "$A")") (target ≥ 0.9)," \
  "(b)/(c) = $(ratio "$(field rps "$B")" "$(field rps "$C")"), (b)/(d) = $(ratio "$(field rps "$B")" "$(field rps "$D")");" \
  "CONNECT (b)/(a) = $(ratio "$(field rps "$CB")" "$(field rps "$CA")")"
echo "gateway CPU vs squid: plain HTTP $(ratio "$(us_per gw)" "$(us_per sq)") (target ≤ 0.3)," \
  "CONNECT setup $(ratio "$(us_per cgw)" "$(us_per csq)") (target ≤ 0.4)"
if [ -n "$G3_PID" ]; then
  echo "gateway vs g3proxy: CPU per plain HTTP request $(ratio "$(us_per gw)" "$(us_per g3)")," \
    "per CONNECT setup $(ratio "$(us_per cgw)" "$(us_per cg3)");" \
    "requests/s (b)/(f) $(ratio "$(field rps "$B")" "$(field rps "$F")"), setups/s $(ratio "$(field rps "$CB")" "$(field rps "$CF")")"
fi
echo "access log on (b')/(b), CPU per plain HTTP request $(ratio "$(us_per gwl)" "$(us_per gw)")," \
  "per CONNECT setup $(ratio "$(us_per cgwl)" "$(us_per cgw)") (target ≤ 1.05)"
echo "the floor (byte relay) vs squid: plain HTTP $(ratio "$(us_per rl)" "$(us_per sq)")," \
  "CONNECT setup $(ratio "$(us_per crl)" "$(us_per csq)")"
refused() { python3 -c "ok=$(field ok "$1"); e=$(field errors "$1"); print(f'{e} of {ok+e} refused ({100*e/max(ok+e,1):.1f} %), {ok} served')"; }
echo "full pool, plain HTTP: capacity_wait 0s: $(refused "$F0"); 300ms: $(refused "$FW")"
echo "full pool, CONNECT: capacity_wait 0s: $(refused "$FC0"); 300ms: $(refused "$FCW")"
if [ "${SKIP_HOLD:-}" != 1 ]; then
  echo "idle tunnels: $(field tunnels "$H") open ($(field failed "$H") failed)," \
    "gateway RSS $(field rss_before_kib "$H") KiB → $(field rss_after_kib "$H") KiB," \
    "$(field bytes_per_tunnel "$H") bytes per idle tunnel (user-space; kernel socket buffers not included)"
fi
