#!/usr/bin/env python3
"""After `meson test`: which suites ran, which tests were skipped and why.

  test-summary.py BUILD_DIR

Reads BUILD_DIR/meson-logs/testlog.json. Prints one line per suite (ok,
failed, skipped) and each skipped test with its reason (the line where it
said SKIP, else its last line of output). With CI=true a skip fails (exit 1)
unless its suite needs hardware this machine kind does not have: the suites
in COIL_CI_MAY_SKIP (comma-separated, default "gpu"). A green CI that
silently dropped a suite it could run would be a lie.
"""
import collections
import json
import os
import sys


def reason(test):
    lines = [l.strip() for l in (test.get("stdout") or "").splitlines() if l.strip()]
    for line in lines:
        if "SKIP" in line or "skipping" in line.lower():
            return line
    return lines[-1] if lines else "(no output)"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test-summary.py BUILD_DIR")
    path = os.path.join(sys.argv[1], "meson-logs", "testlog.json")
    try:
        with open(path) as f:
            tests = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        sys.exit(f"test-summary: cannot read {path}: {e}")
    per_suite = collections.OrderedDict()
    skipped = []
    for t in tests:
        # "coil:procs / install" -> suite "procs"
        suite = t["name"].split(" / ")[0].split(":")[-1]
        counts = per_suite.setdefault(suite, collections.Counter())
        result = t.get("result", "")
        counts["skipped" if result == "SKIP" else "ok" if result in ("OK", "EXPECTEDFAIL")
               else "failed"] += 1
        if result == "SKIP":
            skipped.append((suite, t["name"].split(" / ")[-1], reason(t)))
    print("test summary (suite: ok / failed / skipped):")
    for suite, c in per_suite.items():
        print(f"  {suite:10s} {c['ok']:3d} / {c['failed']:3d} / {c['skipped']:3d}")
    may_skip = {s for s in os.environ.get("COIL_CI_MAY_SKIP", "gpu").split(",") if s}
    refused = []
    for suite, name, why in skipped:
        print(f"  skipped: {suite}/{name}: {why}")
        if suite not in may_skip:
            refused.append(f"{suite}/{name}")
    if not skipped:
        print("  nothing skipped")
    if os.environ.get("CI") == "true" and refused:
        print(f"test-summary: CI=true and {len(refused)} test(s) skipped that this machine kind "
              f"can run ({', '.join(refused)}); only suites {sorted(may_skip)} may skip here "
              "(COIL_CI_MAY_SKIP)")
        sys.exit(1)


if __name__ == "__main__":
    main()
