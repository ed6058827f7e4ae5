# Shared by the gateway benchmarks (sourced, not run): ports, loadgen output fields, a
# process's CPU ticks, and the simulated origin and upstream proxy every run measures
# against.
# Expects BIN (the release examples directory), WORK (a scratch directory) and PIDS (an
# array the caller's cleanup kills).

UP_CRED=vendor:vendor-pass
CLIENT=bench
CLIENT_PASS=bench-pass

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }
# field NAME LINE: the value of NAME=... in a loadgen result line.
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# ticks PID: "utime stime" of a process and its children (squid's auth helpers), in 1/100 s.
ticks() {
  local user=0 sys=0 pid u s
  for pid in $1 $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    read -r u s < <(awk '{print $14, $15}' "/proc/$pid/stat" 2>/dev/null || echo 0 0)
    user=$((user + u)); sys=$((sys + s))
  done
  echo "$user $sys"
}

# start_sim: the origin (8 addresses) and the upstream proxy; sets UPSTREAM, ORIGIN (the
# origin's addresses, comma-separated) and URLS (one http:// URL per address).
start_sim() {
  "$BIN/bench_sim" origin 8 >"$WORK/origin.out" &
  PIDS+=($!)
  "$BIN/bench_sim" upstream "$UP_CRED" >"$WORK/upstream.out" &
  PIDS+=($!)
  for _ in $(seq 1 200); do grep -q upstream= "$WORK/upstream.out" 2>/dev/null && grep -q origin= "$WORK/origin.out" 2>/dev/null && break; sleep 0.05; done
  UPSTREAM=$(sed -n 's/.*upstream=\([^ ]*\).*/\1/p' "$WORK/upstream.out")
  ORIGIN=$(sed -n 's/.*origin=\([^ ]*\).*/\1/p' "$WORK/origin.out")
  URLS=$(tr ',' '\n' <<<"$ORIGIN" | sed 's|.*|http://&/|' | paste -sd, -)
}
