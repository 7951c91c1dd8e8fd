#!/usr/bin/env bash
# coil_perf's command line end to end: nccl-tests' -t, -N, -m, -z, -a, -G,
# -g, -T, -P; --memory; --version; the row count up front; the progress
# line on a terminal only.  Usage: cli_test.sh path/to/coil_perf
set -uo pipefail
perf="$1"
fail=0
out="$(mktemp -d /tmp/coil-perf-cli-XXXXXX)"
trap 'rm -rf "$out"' EXIT
check() {  # description, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
sweep=(-b 8 -e 1K -f 4 -n 2 -w 1)

# -t 2 alone: two ranks as threads of one process; -N 2: the sweep twice.
"$perf" -t 2 -N 2 -m 2 -z 1 -a 0 -G 1 "${sweep[@]}" > "$out/t2" 2> "$out/t2.err"
check "-t 2 -N 2 -m 2 -z 1 -a 0 -G 1 exits 0" test $? -eq 0
check "-t 2: nranks 2 in one process" grep -q "nranks 2, transport auto, launcher fork" "$out/t2"
check "-t 2: rank 1 is thread 1" grep -q "Rank  1 pid [0-9]* thread 1 on" "$out/t2"
check "rows counted up front" grep -q "^# 4 rows per cycle, 2 cycles$" "$out/t2"
check "-N 2: two footers" test "$(grep -c "Out of bounds values : 0 OK" "$out/t2")" -eq 2
check "-N 2: eight rows" test "$(grep -c "^ *[0-9]\+ \+[0-9]\+ \+float" "$out/t2")" -eq 8
check "-G: a note, not an error" grep -q "\-G 1 ignored" "$out/t2.err"
check "no progress line off a terminal" bash -c "! grep -q 'rows, ' '$out/t2.err'"

# -P 2 -t 2: two processes of two threads.
"$perf" -P 2 -t 2 "${sweep[@]}" > "$out/p2t2" 2>&1
check "-P 2 -t 2 exits 0" test $? -eq 0
check "-P 2 -t 2: nranks 4" grep -q "nranks 4," "$out/p2t2"

# A terminal gets the progress line (script gives the program one).
script -qec "$perf ${sweep[*]}" /dev/null > "$out/tty" 2>&1
check "progress line on a terminal" grep -aq "\[1/4 rows, " "$out/tty"

# -T 2: a rank that never comes fails the wait after 2 s (COIL_TIMEOUT_MS),
# not after coil's default 30 minutes. Rank 0 of 2 under Slurm's variables,
# alone.
port=$((20000 + RANDOM % 20000))
start=$SECONDS
SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 \
  "$perf" -T 2 "${sweep[@]}" > "$out/timeout" 2>&1
status=$?
check "-T 2: the lone rank fails (status 1)" test "$status" -eq 1
check "-T 2: within seconds" test $((SECONDS - start)) -lt 20
check "-T 2: the error says it timed out" grep -q "timed out after" "$out/timeout"

# --memory: host or device; by default device where a CUDA device answers
# (as nccl-tests), else host, and the header says why. Where --memory device
# is refused (no usable CUDA device, or a build without CUDA) it says why.
"$perf" --memory bogus > /dev/null 2> "$out/mem-bogus"
check "--memory bogus is refused with status 2" test $? -eq 2
check "--memory bogus: the error names the flag" grep -q "\-\-memory: 'bogus'" "$out/mem-bogus"
"$perf" --memory host -t 2 "${sweep[@]}" > "$out/mem-host" 2>&1
check "--memory host exits 0" test $? -eq 0
check "--memory host: the header says memory: host" grep -q "^# memory: host$" "$out/mem-host"
"$perf" --memory device -t 2 "${sweep[@]}" > "$out/mem-device" 2>&1
status=$?
if [ "$status" -ne 2 ]; then  # a usable CUDA device
  check "--memory device exits 0 on a machine with a CUDA device" test "$status" -eq 0
  check "--memory device: the header names the device" grep -q "^# memory: device (CUDA device 0)$" "$out/mem-device"
  check "the default is device where a CUDA device answers" \
    grep -q "^# memory: device (CUDA device 0)$" "$out/t2"
else
  check "no usable CUDA device: --memory device is refused with status 2" test "$status" -eq 2
  check "no usable CUDA device: the error says why" \
    grep -Eq "^coil_perf: --memory device: (no usable CUDA device \(.+\)|coil_perf was built without CUDA)" "$out/mem-device"
  check "no usable CUDA device: the default is host, and the header says why" \
    grep -Eq "^# memory: host \((no usable CUDA device: .+|coil_perf was built without CUDA .+)\)$" "$out/t2"
fi
"$perf" --memory device --baseline mpi > /dev/null 2> "$out/mem-mpi"
check "--memory device --baseline mpi is refused with status 2" test $? -eq 2
check "--memory device --baseline mpi: use --memory host" grep -q "run it with --memory host" "$out/mem-mpi"

"$perf" --version > "$out/version"
check "--version" grep -q "^coil_perf [0-9]*\.[0-9]*\.[0-9]* (built with coil.h .*; libcoil " "$out/version"
"$perf" -g 2 > /dev/null 2>&1
check "-g 2 is refused with status 2" test $? -eq 2
"$perf" --help > "$out/help"
check "--help names -P and -N's new meaning" grep -q "\-N, --run_cycles" "$out/help"
check "--help names --memory" grep -q "\-\-memory host|device" "$out/help"
exit $fail
