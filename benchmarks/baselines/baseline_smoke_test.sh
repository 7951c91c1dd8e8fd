#!/usr/bin/env bash
# A baseline (gloo_perf, oneccl_perf) end to end, as tools/compare runs it:
# a short sweep at 2 and 3 ranks that must finish with every value checked
# right (the tool compares each result with the reference itself), its JSON,
# the header's transport line, and a bad flag refused with status 2.
#   Usage: baseline_smoke_test.sh path/to/tool "transport line" [tool flags...]
set -uo pipefail
tool="$1" transport_line="$2"
shift 2
fail=0
out="$(mktemp -d /tmp/coil-baseline-XXXXXX)"
trap 'rm -rf "$out"' EXIT
check() {  # description, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
# 8 B .. 1 MiB by 8: 8, 64, 512, 4K, 32K, 256K (3 ranks: counts of 2 and
# 16 floats are below and not a multiple of the rank count).
sweep=(-b 8 -e 1M -f 8 -n 3 -w 1)

for n in 2 3; do
  timeout 300 "$tool" "$@" -P "$n" "${sweep[@]}" --json "$out/p$n.json" > "$out/p$n" 2>&1
  status=$?
  check "-P $n exits 0 (status $status)" test "$status" -eq 0
  check "-P $n: nranks $n" grep -q "nranks $n," "$out/p$n"
  check "-P $n: the transport line names $transport_line" grep -qF "$transport_line" "$out/p$n"
  check "-P $n: six rows" test "$(grep -c "^ *[0-9]\+ \+[0-9]\+ \+float" "$out/p$n")" -eq 6
  check "-P $n: no wrong value" grep -q "Out of bounds values : 0 OK" "$out/p$n"
  check "-P $n: JSON written and ok" python3 -c "
import json, sys
d = json.load(open('$out/p$n.json'))
sys.exit(0 if d['ok'] and d['wrong_total'] == 0 and len(d['rows']) == 6 else 1)"
  if [ "$status" -ne 0 ]; then tail -20 "$out/p$n"; fi
done

timeout 30 "$tool" "$@" --no-such-flag 1 > "$out/bad" 2>&1
status=$?
check "an unknown flag exits 2 (status $status)" test "$status" -eq 2
check "and names it" grep -q "unknown argument '--no-such-flag'" "$out/bad"
exit $fail
