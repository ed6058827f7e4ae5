#!/usr/bin/env bash
# The one test command (README, CI): makes sure the test servers are installed, then runs
# the format check, clippy with warnings denied, the structure checks (dependency rules,
# import cycles, file sizes, the docs' paths), the release build, and every test of the
# workspace (one integration-test binary per crate). Each step's duration is printed as it
# ends, and all of them at the end, so a slow step shows in any CI log.
#
# Adapter tests run against private redis-server and PostgreSQL instances started by
# crates/testkit, so both must be installed. When they are missing and we are root on
# Debian/Ubuntu, they are installed from the system packages; otherwise this script
# explains what to install and fails. (Under CI=true a test without its server fails.)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step's name and duration, for the summary at the end.
step_names=()
step_starts=()
step() {
  if ((${#step_starts[@]} > 0)); then
    printf '    (%d s)\n' $((SECONDS - step_starts[-1]))
  fi
  step_names+=("$*")
  step_starts+=("$SECONDS")
  printf '\n==> [%d s] %s\n' "$SECONDS" "$*"
}
summary() {
  local i end
  printf '\n==> step durations (total %d s)\n' "$SECONDS"
  for i in "${!step_names[@]}"; do
    end=${step_starts[i + 1]:-$SECONDS}
    printf '%6d s  %s\n' $((end - step_starts[i])) "${step_names[i]}"
  done
}

# Debian/Ubuntu install initdb/postgres into /usr/lib/postgresql/<major>/bin, off PATH.
# Prints the directory holding both (PATH first, then the newest versioned directory).
postgres_bin_dir() {
  local postgres candidate
  if postgres=$(command -v postgres 2>/dev/null); then
    candidate=$(dirname "$(readlink -f "$postgres")")
    if [[ -x $candidate/initdb ]]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  fi
  while IFS= read -r candidate; do
    if [[ -x $candidate/initdb && -x $candidate/postgres ]]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done < <(compgen -G '/usr/lib/postgresql/*/bin' | sort -V -r)
  return 1
}

missing_packages() {
  command -v redis-server >/dev/null 2>&1 || echo redis-server
  postgres_bin_dir >/dev/null || echo postgresql
  command -v curl >/dev/null 2>&1 || echo curl
  # The gateway's interop and HTTPS tests use real third-party proxies and a TLS origin.
  command -v tinyproxy >/dev/null 2>&1 || echo tinyproxy
  command -v microsocks >/dev/null 2>&1 || echo microsocks
  # The fleet test balances its gateways behind HAProxy (in /usr/sbin, off some PATHs).
  command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || echo haproxy
  command -v openssl >/dev/null 2>&1 || echo openssl
  # The connection-cap tests route an IPv6 /64 to loopback (`ip -6 route`, as root).
  command -v ip >/dev/null 2>&1 || echo iproute2
  # The shipped systemd units are checked with `systemd-analyze verify`.
  command -v systemd-analyze >/dev/null 2>&1 || echo systemd
  # The dashboard's browser tests drive headless Chromium over the DevTools protocol, and
  # the Playwright client example runs it (Playwright's own browser download is not used).
  command -v chromium >/dev/null 2>&1 || echo chromium
  # Chromium's inspected-https test trusts the gateway's CA in an NSS database (certutil).
  command -v certutil >/dev/null 2>&1 || echo libnss3-tools
  # The Prometheus rules and configuration are checked and unit-tested with promtool.
  command -v promtool >/dev/null 2>&1 || echo prometheus
  # scripts/build-release.sh splits the release binary's debug info off with objcopy.
  command -v objcopy >/dev/null 2>&1 || echo binutils
  # The container test builds its Debian base image with debootstrap (no registry to pull from).
  command -v debootstrap >/dev/null 2>&1 || echo debootstrap
  # scripts/build-deb.sh computes the Debian package's Depends with dpkg-shlibdeps.
  command -v dpkg-shlibdeps >/dev/null 2>&1 || echo dpkg-dev
  # The API conformance test runs schemathesis, and the client examples' test requests,
  # Scrapy and Playwright (all from PyPI), each in a virtual environment.
  if ! command -v python3 >/dev/null 2>&1; then
    echo python3
    echo python3-venv
  elif ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    echo python3-venv
  fi
}

install_packages() {
  local packages=("$@")
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    {
      echo "error: missing test dependencies: ${packages[*]}"
      echo "scripts/test.sh installs them only as root on Debian/Ubuntu (apt-get)."
      echo "Install them yourself, e.g.: sudo apt-get install -y redis-server postgresql curl tinyproxy microsocks haproxy openssl iproute2 systemd chromium prometheus binutils debootstrap dpkg-dev python3-venv libnss3-tools"
      echo "(or point the tests at running servers with PROXYPOOL_TEST_REDIS_URL and"
      echo " PROXYPOOL_TEST_POSTGRES_URL), then run scripts/test.sh again."
    } >&2
    exit 1
  fi

  # The tests start private servers; the packages' own services must not start and hold
  # ports 6379/5432 (nor Prometheus 9090, which the prometheus package, installed for
  # promtool, would start). invoke-rc.d asks policy-rc.d first, and 101 means "not allowed".
  local policy=/usr/sbin/policy-rc.d backup=""
  if [[ -e $policy ]]; then
    backup=$(mktemp)
    cp -p "$policy" "$backup"
  fi
  restore_policy() {
    if [[ -n $backup ]]; then
      mv -f "$backup" "$policy"
    else
      rm -f "$policy"
    fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\n# scripts/test.sh: no service starts during package installation\nexit 101\n' >"$policy"
  chmod 0755 "$policy"

  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${packages[@]}"

  restore_policy
  trap - EXIT
}

step "check test dependencies (redis-server, PostgreSQL, curl, tinyproxy, microsocks, haproxy, openssl, iproute2, systemd, chromium, promtool, objcopy, debootstrap, dpkg-shlibdeps, python3-venv, certutil)"
mapfile -t missing < <(missing_packages)
if ((${#missing[@]} > 0)); then
  step "install ${missing[*]}"
  install_packages "${missing[@]}"
fi
# From here on, every exit prints how long each step took.
trap summary EXIT
pg_bin=$(postgres_bin_dir) || {
  echo "error: PostgreSQL installed but initdb/postgres not found" >&2
  exit 1
}
export PATH="$pg_bin:$PATH"
echo "redis-server: $(command -v redis-server) ($(redis-server --version | head -n 1))"
echo "postgres:     $pg_bin ($("$pg_bin/postgres" --version))"
echo "chromium:     $(command -v chromium) ($(chromium --version 2>/dev/null | head -n 1))"

# schemathesis, pinned, in a virtual environment of its own under target/ (kept between
# runs); the conformance test finds it through PROXYPOOL_SCHEMATHESIS.
SCHEMATHESIS_VERSION=4.32.5
venv=target/schemathesis-venv
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  step "install schemathesis $SCHEMATHESIS_VERSION into $venv"
  rm -rf "$venv"
  mkdir -p target
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
export PROXYPOOL_SCHEMATHESIS="$PWD/$venv/bin/st"
echo "schemathesis: $("$PROXYPOOL_SCHEMATHESIS" --version)"

# The Python client package (clients/python, proxypool-client) and the client examples
# that use it (examples/clients). Their pinned packages (examples/clients/requirements.txt:
# requests, Scrapy, Playwright; clients/python/requirements-test.txt: pytest;
# clients/python/requirements-build.txt: the build backend) are downloaded once into a
# wheelhouse under target/ (made again when a pin changes). Every run then builds the
# package's wheel from the tree, offline, and installs it with the scrapy extra into a
# fresh virtual environment, taking every dependency from the wheelhouse only (so the
# wheel's declared dependencies must resolve). The tests (crates/cli/tests/it/clients.rs)
# run the examples and the package's pytest suite against `proxypool dev` with that
# environment's python, PROXYPOOL_CLIENTS_PYTHON, and check the installed package is the
# wheel PROXYPOOL_CLIENTS_WHEEL names. Playwright's wheel carries its driver; the browser is
# the system's chromium.
clients_requirements=(examples/clients/requirements.txt clients/python/requirements-test.txt
  clients/python/requirements-build.txt)
clients_wheelhouse=target/clients-wheelhouse
clients_build_venv=target/clients-build-venv
if ! cat "${clients_requirements[@]}" | cmp -s - "$clients_wheelhouse/requirements.txt" \
  || ! "$clients_build_venv/bin/python" -c 'import setuptools' 2>/dev/null; then
  step "download the client packages' pinned dependencies into $clients_wheelhouse"
  rm -rf "$clients_wheelhouse" "$clients_build_venv"
  mkdir -p "$clients_wheelhouse"
  python3 -m venv "$clients_build_venv"
  "$clients_build_venv/bin/pip" wheel --quiet --disable-pip-version-check -w "$clients_wheelhouse" \
    "${clients_requirements[@]/#/--requirement=}"
  "$clients_build_venv/bin/pip" install --quiet --disable-pip-version-check --no-index \
    --find-links "$clients_wheelhouse" --requirement=clients/python/requirements-build.txt
  cat "${clients_requirements[@]}" >"$clients_wheelhouse/requirements.txt"
fi
step "build the proxypool-client wheel and install it into a fresh target/clients-venv"
# Built from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
rm -rf target/clients-build target/clients-dist target/clients-venv
cp -r clients/python target/clients-build
rm -rf target/clients-build/build target/clients-build/dist target/clients-build/src/*.egg-info
"$clients_build_venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --no-index -w target/clients-dist target/clients-build
clients_wheel=$(compgen -G 'target/clients-dist/proxypool_client-*-py3-none-any.whl')
# The environment gets no pip of its own, and nothing is byte-compiled ahead of use: the
# build environment's pip installs into it (seconds instead of most of a minute).
python3 -m venv --without-pip target/clients-venv
clients_pip=("$clients_build_venv/bin/pip" --python target/clients-venv/bin/python)
"${clients_pip[@]}" install --quiet --disable-pip-version-check --no-compile --no-index \
  --find-links "$clients_wheelhouse" "$clients_wheel[scrapy]" \
  --requirement=examples/clients/requirements.txt --requirement=clients/python/requirements-test.txt
export PROXYPOOL_CLIENTS_PYTHON="$PWD/target/clients-venv/bin/python"
export PROXYPOOL_CLIENTS_WHEEL="$PWD/$clients_wheel"
echo "proxypool-client wheel: $clients_wheel ($(stat -c %s "$clients_wheel") bytes)"
echo "client packages: $("${clients_pip[@]}" freeze --disable-pip-version-check \
  | grep -iE '^(requests|scrapy|playwright|pytest)==' | tr '\n' ' ')"

# A fresh toolchain may lack the components; rustup can add them.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    step "install rustfmt and clippy"
    rustup component add rustfmt clippy
  fi
fi

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# The gateway's hot path reads only its local snapshot, so the gateway must not even be
# able to reach a store: no Redis or SQL driver, no store adapter crate, in its normal
# dependency tree (dev-dependencies may use them in tests). Names match exactly at the
# start of a line (`redis v1.2.3`), never as part of another crate's name.
step "gateway dependency rule: no redis, sqlx, proxypool-redis, proxypool-quota or proxypool-pool"
gateway_tree=$(cargo tree -p proxypool-gateway -e normal --prefix none)
forbidden=$(grep -E '^(redis|sqlx|sqlx-[A-Za-z0-9_-]+|proxypool-redis|proxypool-quota|proxypool-pool) v' \
  <<<"$gateway_tree" | awk '{ print $1, $2 }' | sort -u || true)
if [[ -n $forbidden ]]; then
  {
    echo "error: proxypool-gateway depends on store crates it must never reach:"
    sed 's/^/  /' <<<"$forbidden"
    echo "The gateway reads only its local snapshot; see docs/ARCHITECTURE.md (Dependency rules)."
    echo "Find the path with: cargo tree -p proxypool-gateway -e normal -i <crate>"
  } >&2
  exit 1
fi
echo "ok: the gateway's normal dependency tree holds no store crate"

# TLS is rustls with ring everywhere: no OpenSSL library, no native-tls, no second
# crypto provider. (`openssl-probe`, which rustls-native-certs uses to find the system's
# certificate files, is plain Rust and links nothing; it is allowed by name.)
step "TLS rule: no openssl, openssl-sys, native-tls or aws-lc in the workspace"
tls_forbidden=$(cargo tree --workspace -e normal,build,dev --prefix none \
  | grep -E '^(openssl|openssl-sys|native-tls|tokio-native-tls|aws-lc-rs|aws-lc-sys) v' \
  | awk '{ print $1, $2 }' | sort -u || true)
if [[ -n $tls_forbidden ]]; then
  {
    echo "error: a crate brings another TLS stack or crypto provider:"
    sed 's/^/  /' <<<"$tls_forbidden"
    echo "Find the path with: cargo tree --workspace -i <crate>"
  } >&2
  exit 1
fi
echo "ok: one TLS stack (rustls) and one provider (ring)"

# Files import each other in one direction only: a cycle between two files of a crate
# means neither can be read, moved or tested without the other. The gateway's folders are
# layers along a request's path (inbound -> outbound -> routing -> snapshot -> proxies ->
# policy), so they import each other in one direction too.
step "no import cycle between the files of any crate"
python3 scripts/module-cycles.py --layers gateway crates

# Files drift past what one reader can hold one small addition at a time: a production
# source file may have at most 500 lines of non-test code (split it along its concerns).
step "no production source file over 500 lines of non-test code"
python3 scripts/check-file-size.py

# The architecture map and the design notes name the files to open: every path they name
# must exist, so the map cannot drift from the tree unnoticed.
step "every path the architecture map and the design notes name exists"
python3 scripts/check-doc-paths.py

# The shipped binary: a release build, stripped, its debug info in a separate file; fails if
# the binary reaches 32 MB (scripts/build-release.sh prints both sizes). Built before the
# tests because the container test puts this very binary into the image built from the
# shipped Dockerfile, instead of compiling it a second time inside the image.
step "scripts/build-release.sh target/dist (release binary under 32 MB)"
scripts/build-release.sh target/dist
export PROXYPOOL_TEST_RELEASE_BINARY="$PWD/target/dist/proxypool"

# --no-fail-fast: one failing test binary must not hide the failures of the ones after it.
# The output is kept to add up every binary's result into one closing line.
step "cargo test --workspace --no-fail-fast"
test_log=target/test-output.log
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee "$test_log"
test_status=${PIPESTATUS[0]}
set -e

trap - EXIT
summary
awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i + 1) ~ /^passed/) passed += $i
         if ($(i + 1) ~ /^failed/) failed += $i
         if ($(i + 1) ~ /^ignored/) ignored += $i
       }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$test_log"
exit "$test_status"
