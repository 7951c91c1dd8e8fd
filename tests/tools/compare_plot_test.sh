#!/usr/bin/env bash
# tools/compare --plot without matplotlib fails at once, with status 2 and
# the package to install, instead of measuring for minutes and then
# leaving the plot out. matplotlib is hidden by a package of that name on
# PYTHONPATH that fails to import (the re-run under /usr/bin/python3
# inherits it).  Usage: compare_plot_test.sh path/to/tools/compare
set -uo pipefail
compare="$1"
dir="$(mktemp -d /tmp/coil-compare-plot-XXXXXX)"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/matplotlib"
echo 'raise ImportError("hidden by compare_plot_test.sh")' > "$dir/matplotlib/__init__.py"

PYTHONPATH="$dir" timeout 60 python3 "$compare" --build "$dir/no-build" --plot "$dir/out.png" \
  > "$dir/stdout" 2> "$dir/stderr"
status=$?
fail=0
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status, expected 2"; fail=1; }
grep -q "needs matplotlib" "$dir/stderr" || { echo "FAIL: no 'needs matplotlib' message"; fail=1; }
grep -q "python3-matplotlib" "$dir/stderr" || { echo "FAIL: the package is not named"; fail=1; }
[ ! -e "$dir/out.png" ] || { echo "FAIL: a plot was written"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: --plot without matplotlib exits 2 before any run"
cat "$dir/stderr"
exit "$fail"
