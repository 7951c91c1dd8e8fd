#!/usr/bin/env bash
# tools/lib/test-summary.py on a made-up meson test log: it lists each skip
# with its reason, and with CI=true fails on a skip of a suite this machine
# kind can run, but not on one of COIL_CI_MAY_SKIP (default gpu).
set -u
summary=${1:?usage: test_summary_test.sh TEST_SUMMARY_PY}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/meson-logs"
status=0
check() {  # name, expected exit, expected text, command...
  local name=$1 want=$2 text=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" = "$want" ] && grep -qF -- "$text" <<<"$out"; then echo "PASS: $name"; else
    echo "FAIL: $name (exit $rc, wanted $want and '$text'):"; echo "$out"; status=1; fi
}
printf '%s\n' '{"name": "coil:unit / a", "stdout": "", "result": "OK"}' \
  '{"name": "coil:gpu / p2p", "stdout": "x\nSKIP: no CUDA device\n", "result": "SKIP"}' \
  >"$dir/meson-logs/testlog.json"
check "a GPU suite's skip is listed with its reason" 0 "skipped: gpu/p2p: SKIP: no CUDA device" \
  env CI=true python3 "$summary" "$dir"
printf '%s\n' '{"name": "coil:torch / ops", "stdout": "SKIP: torch does not import\n", "result": "SKIP"}' \
  >>"$dir/meson-logs/testlog.json"
check "without CI a torch skip passes" 0 "skipped: torch/ops" env -u CI python3 "$summary" "$dir"
check "with CI=true a torch skip fails" 1 "torch/ops" env CI=true python3 "$summary" "$dir"
check "COIL_CI_MAY_SKIP widens it" 0 "skipped: torch/ops" \
  env CI=true COIL_CI_MAY_SKIP=gpu,torch python3 "$summary" "$dir"
exit $status
