#!/usr/bin/env bash
# Where a Redis extraction's time goes, segment by segment. Builds the Redis pool benchmark
# with the Lua instrumented at segment boundaries (crates/redis/benches/extract-profile.patch:
# one `TIME` call per boundary, totals kept in the function library's Lua state), runs it,
# and prints each segment's mean µs per extraction over the benchmark's 2,000 counted
# extractions (one proxy, region filter, 100k AVAILABLE), less the cost of one
# instrumentation mark measured in the same run. The instrumented copy lives in a scratch
# worktree (this checkout's uncommitted changes included); this checkout is not touched.
#
# Usage: scripts/profile-redis-extract.sh        (about 10 minutes with the build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-profile}
WORK=$(mktemp -d)
cleanup() {
  git -C "$ROOT" worktree remove --force "$WORK/tree" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

git worktree add --quiet --detach "$WORK/tree" HEAD
git diff HEAD --binary >"$WORK/local.patch"
if [[ -s $WORK/local.patch ]]; then
  git -C "$WORK/tree" apply "$WORK/local.patch"
fi
git -C "$WORK/tree" apply "$ROOT/crates/redis/benches/extract-profile.patch"

(cd "$WORK/tree" && cargo bench -p proxypool-redis --bench redis_pool) | tee "$WORK/out.txt"

echo
echo "Extraction segments (mean µs per call, one mark's cost subtracted; the rest of the"
echo "call, outside these segments, is FCALL's own argument and reply handling):"
echo
awk '
  $1 == "CALIBRATION" { mark = $3 / $4 }
  $1 == "PROFILE" { total[$2] = $3; calls[$2] = $4 }
  END {
    n = split("fence args remove_expired idem_get stream_open stream_next get_record accept copy put_record extracted_by encode_line loop_tail usage response_build main_tail flush_candidates flush_ttls", order, " ")
    sum = 0
    for (i = 1; i <= n; i++) {
      s = order[i]
      if (!(s in total)) { printf "missing segment %s\n", s > "/dev/stderr"; exit 1 }
      us[s] = total[s] / calls[s] - mark
      sum += us[s]
    }
    print "| segment | µs per extraction | share |"
    print "|---|---|---|"
    for (i = 1; i <= n; i++) {
      s = order[i]
      printf "| %s | %.1f | %.0f%% |\n", s, us[s], 100 * us[s] / sum
    }
    printf "| all segments | %.1f | |\n", sum
    printf "| one instrumentation mark (subtracted) | %.2f | |\n", mark
  }' "$WORK/out.txt"
