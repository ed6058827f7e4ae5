# Shared by the gateway benchmarks (sourced, not run): ports, loadgen output fields, a
# process's CPU ticks, loadgen runs with the CPU a proxy spent on them, and the simulated
# origin and upstream proxy every run measures against (and, for the TLS benchmarks, the
# certificates and an https origin).
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

run() { "$BIN/loadgen" "$@"; }
# run_cpu KEY PID loadgen-args...: one loadgen run, with the CPU the proxy PID spent on it
# and the requests it completed appended to KEY's tally (a file: run_cpu runs in a
# subshell), so CPU per request is summed over both runs of a setup.
run_cpu() {
  local key=$1 pid=$2 u0 s0 u1 s1 out
  shift 2
  read -r u0 s0 < <(ticks "$pid")
  out=$(run "$@")
  read -r u1 s1 < <(ticks "$pid")
  echo "$key $((u1 - u0)) $((s1 - s0)) $(field ok "$out")" >>"$WORK/cpu"
  echo "$out"
}
# us_per KEY [user|sys]: CPU µs per completed request of KEY's runs (user + system, or one).
us_per() {
  awk -v k="$1" -v part="${2:-}" '$1 == k {
      t += (part == "sys" ? 0 : $2) + (part == "user" ? 0 : $3); n += $4 }
    END { if (n) printf "%.1f", t * 10000 / n; else print "n/a" }' "$WORK/cpu"
}
# Each setup runs twice, interleaved (a b c d e a b c d e), and the better run counts for
# requests/s: other jobs on a shared 2-core machine hit one run, rarely both. CPU per
# request sums both runs: it does not depend on how much of the machine the proxy got.
best() { # best of two loadgen result lines by rps
  local r1=$1 r2=$2
  if python3 -c "import sys; sys.exit(0 if float('$(field rps "$r1")' or 0) >= float('$(field rps "$r2")' or 0) else 1)"; then echo "$r1"; else echo "$r2"; fi
}
ratio() { python3 -c "
try: a = float('$1'); b = float('$2'); print(f'{a/b:.2f}' if b else 'n/a')
except ValueError: print('n/a')"; }

# make_certs DIR: the TLS benchmarks' certificates, ECDSA P-256, made with openssl:
# site-ca.pem (the CA of the "public" side: the https origin's certificate origin.pem for
# origin.test, and the gateway's TLS listener's listener.pem for 127.0.0.1) and
# inspect-ca.pem with inspect-ca-key.pem (the operator's CA inspected tunnels' leaves are
# minted under). Keys are <name>-key.pem.
make_certs() {
  local dir=$1 name
  mkdir -p "$dir"
  for name in site-ca inspect-ca; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=bench $name" -keyout "$dir/$name-key.pem" -out "$dir/$name.pem" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  done
  issue() { # issue NAME SAN
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
      -keyout "$dir/$1-key.pem" -out "$dir/$1.csr" 2>/dev/null
    printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' "$2" >"$dir/$1.ext"
    openssl x509 -req -in "$dir/$1.csr" -CA "$dir/site-ca.pem" -CAkey "$dir/site-ca-key.pem" \
      -CAcreateserial -days 2 -extfile "$dir/$1.ext" -out "$dir/$1.pem" 2>/dev/null
  }
  issue origin DNS:origin.test
  issue listener IP:127.0.0.1,DNS:localhost
}

# start_tls_origin DIR: the https origin (bench_sim tls-origin) with DIR's origin.pem on
# 127.0.0.1; sets TLS_ORIGIN (its address) and SITE (origin.test:PORT, the name the
# simulated upstream resolves to it).
start_tls_origin() {
  "$BIN/bench_sim" tls-origin "$1/origin.pem" "$1/origin-key.pem" >"$WORK/tls-origin.out" &
  PIDS+=($!)
  for _ in $(seq 1 200); do grep -q tls_origin= "$WORK/tls-origin.out" 2>/dev/null && break; sleep 0.05; done
  TLS_ORIGIN=$(sed -n 's/.*tls_origin=\([^ ]*\).*/\1/p' "$WORK/tls-origin.out")
  SITE="origin.test:${TLS_ORIGIN##*:}"
}
