#!/usr/bin/env bash
# Builds the release binary as it ships, in two files:
#
#   OUT_DIR/proxypool        the binary, stripped, with a .gnu_debuglink naming the file below
#   OUT_DIR/proxypool.debug  its symbols and debug info (line tables), for gdb, perf and
#                            backtraces: keep it next to the binary, or in /usr/lib/debug
#
# `[profile.release]` keeps line tables (`debug = "line-tables-only"`), so a crash can be
# traced to a line; with the symbol table they make most of the unstripped binary (about
# 175 MB, 30.5 MB stripped), and nobody needs them on every host. The symbol table goes too
# (--strip-all): kept, it alone would take the binary well past the limit. The binary must
# stay under 32 MB: this script fails otherwise. (The limit was 30 MB until the gateway
# learned to serve TLS itself: the TLS listener, the inspection CA's leaves and the X.509
# parser they need took the binary to 30.5 MB.)
#
# Usage: scripts/build-release.sh [OUT_DIR]   (default target/dist)
# Needs objcopy (binutils). The Dockerfile and scripts/test.sh call it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${1:-target/dist}
# 32 MB, in bytes (decimal megabytes, the stricter reading).
limit=32000000

if ! command -v objcopy >/dev/null 2>&1; then
  echo "error: objcopy not found; install binutils" >&2
  exit 1
fi

# The executable's path from cargo itself, wherever CARGO_TARGET_DIR or a cargo config puts
# the target directory. Diagnostics still go to stderr, rendered.
built=$(cargo build --release --locked -p proxypool --message-format=json-render-diagnostics |
  sed -n 's/.*"executable":"\([^"]*\/proxypool\)".*/\1/p' | tail -n 1)
if [[ -z $built || ! -x $built ]]; then
  echo "error: cargo did not report the proxypool executable" >&2
  exit 1
fi

mkdir -p "$out"
rm -f "$out/proxypool" "$out/proxypool.debug"
# The debug file first: --add-gnu-debuglink records its name and a CRC of its contents.
objcopy --only-keep-debug "$built" "$out/proxypool.debug"
objcopy --strip-all --add-gnu-debuglink="$out/proxypool.debug" "$built" "$out/proxypool"

size() {
  stat -c %s "$1"
}
mb() {
  awk -v bytes="$1" 'BEGIN { printf "%.1f MB", bytes / 1000000 }'
}
binary=$(size "$out/proxypool")
debug=$(size "$out/proxypool.debug")
echo "built $built ($(mb "$(size "$built")") with debug info)"
echo "  $out/proxypool        $(mb "$binary") ($binary bytes), stripped"
echo "  $out/proxypool.debug  $(mb "$debug") ($debug bytes), symbols and line tables"
if ((binary >= limit)); then
  echo "error: $out/proxypool is $(mb "$binary"); it must stay under $(mb "$limit")" >&2
  exit 1
fi
