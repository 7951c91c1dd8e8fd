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

# From a venv (as the README's "Try it" has it active): its python3 is a
# link to the system's (/usr/bin/python3, as tools/lib/torch-venv.sh makes it)
# but does not see the system's packages. Where the
# system's python3 has matplotlib, --plot must re-run under it rather than
# refuse; where it has none, it must refuse once, not loop.
/usr/bin/python3 -m venv --without-pip "$dir/venv" || { echo "FAIL: cannot make a venv"; exit 1; }
timeout 60 "$dir/venv/bin/python3" "$compare" --build "$dir/no-build" --plot "$dir/out.png" \
  > "$dir/stdout" 2> "$dir/stderr"
status=$?
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  if grep -q "needs matplotlib" "$dir/stderr"; then
    echo "FAIL: from a venv, --plot refused although /usr/bin/python3 has matplotlib"; fail=1
  else
    echo "ok: from a venv, --plot re-ran under /usr/bin/python3 (status $status: no build here)"
  fi
else
  if [ "$status" -eq 2 ] && grep -q "needs matplotlib" "$dir/stderr"; then
    echo "ok: from a venv without matplotlib anywhere, --plot exits 2 once"
  else
    echo "FAIL: from a venv without matplotlib anywhere: status $status"; fail=1
  fi
fi
cat "$dir/stderr"
exit "$fail"
