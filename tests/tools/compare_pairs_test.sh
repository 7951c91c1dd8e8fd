#!/usr/bin/env bash
# tools/compare --pairs over the build's own tools: one tiny size, one pair
# each, and the report has a table per comparison it could run (oneCCL
# when oneccl_perf was built, Gloo when gloo_perf was), every run ok.
#   Usage: compare_pairs_test.sh path/to/tools/compare BUILD_DIR
set -uo pipefail
compare="$1" build="$2"
out="$(mktemp -d /tmp/coil-compare-pairs-XXXXXX)"
trap 'rm -rf "$out"' EXIT
fail=0
check() {  # description, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
timeout 240 python3 "$compare" --build "$build" -b 64 -e 4K -f 64 --pairs 2 --iters 3 --warmup 1 \
  --skip yardsticks > "$out/report" 2> "$out/stderr"
status=$?
check "exits 0 (status $status)" test "$status" -eq 0
check "no failed run" bash -c "! grep -q 'Failed runs' '$out/report'"
baselines="$build/benchmarks/baselines"
expect() {  # tool, table title
  if [ -x "$baselines/$1" ]; then
    check "a table: $2" grep -qF "$2:" "$out/report"
    # Two sizes (64 B and 4 KiB), each a row with a median and a range.
    check "$2: two rows" test "$(grep -A 6 "^$2:" "$out/report" | grep -c '^| [0-9].* (.*–.*) |$')" -eq 2
  else
    check "no $1: said why" grep -q "skipped ($1 not built" "$out/report"
  fi
}
expect oneccl_perf "Shared memory, coil vs oneCCL"
expect oneccl_perf "TCP on loopback, coil vs oneCCL"
expect gloo_perf "TCP on loopback, coil vs Gloo"
cat "$out/report"
[ "$fail" -eq 0 ] || tail -20 "$out/stderr"
exit $fail
