#!/usr/bin/env bash
# tools/compare's sweep over the build's own tools, tiny: every run it can
# do ends ok, the shared-memory table has a number in each library's column
# that ran (MPICH's where coil_perf_mpich was built), and a run it cannot
# do says why.  Usage: compare_sweep_test.sh path/to/tools/compare BUILD_DIR
set -uo pipefail
compare="$1" build="$2"
out="$(mktemp -d /tmp/coil-compare-sweep-XXXXXX)"
trap 'rm -rf "$out"' EXIT
fail=0
check() {  # description, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
# In the sanitizer leg LeakSanitizer reports what Open MPI's and MPICH's
# MPI_Init allocate and never free (600-750 KiB each, in their own
# frames), which fails those runs; leaks are not what this test checks.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  timeout 240 python3 "$compare" --build "$build" -b 64 -e 4K -f 64 --iters 3 --warmup 1 \
  --skip yardsticks > "$out/report" 2> "$out/stderr"
status=$?
check "exits 0 (status $status)" test "$status" -eq 0
check "no failed run" bash -c "! grep -q 'FAILED' '$out/report'"
# The shared-memory table: its header, then its rows (64 B and 4 KiB).
header=$(grep -A 2 "^Shared memory:" "$out/report" | tail -n 1)
check "shared-memory table with an MPICH column" grep -q "| MPICH |" <<<"$header"
column=$(tr '|' '\n' <<<"$header" | grep -n "^ MPICH $" | cut -d: -f1)
rows=$(grep -A 5 "^Shared memory:" "$out/report" | grep '^| [0-9]')
if [ -x "$build/benchmarks/perf/coil_perf_mpich" ] && command -v mpiexec.hydra > /dev/null; then
  check "MPICH ran: a number in its column at each size" \
    test "$(cut -d'|' -f"$column" <<<"$rows" | grep -c '[0-9]')" -eq 2
  check "MPICH's run is listed ok" grep -q "^- MPICH (its shared memory): ok" "$out/report"
else
  check "no MPICH: said why" grep -q "^- MPICH (its shared memory): skipped (" "$out/report"
fi
if [ "$fail" -ne 0 ]; then cat "$out/report" "$out/stderr"; fi
exit "$fail"
