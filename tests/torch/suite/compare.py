#!/usr/bin/env python3
"""Compares run_distributed_test.py results of a reference backend and others.

  compare.py gloo.json coil.json [--markdown comparison.md] [--known FILE]
             [--fail-on-regressions]

Prints (and with --markdown also writes) a markdown report: pass, skip, fail
and error counts per backend, then for each other backend the tests that pass
with the reference (the first file) but fail or error with it, with the first
error line, then those it skips, with the reason, then those that pass only
with it. A run with "as_gloo" set (run_distributed_test.py --as-gloo) is one
where the suite was told the backend is gloo; it usually holds only the tests
that the plain run skipped.

--known FILE lists tests whose difference is understood and is no bug of the
backend: one per line, "test_name  reason", "#" starts a comment. They are
still listed, marked "known", with the reason. With --fail-on-regressions
the exit status is 1 when a test that passes with the reference fails or
errors with another backend and is not in the known list.
"""
import argparse
import json
import sys

STATUSES = ("pass", "skip", "fail", "error")


def load_known(path):
    known = {}
    if not path:
        return known
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(" ")
                known[name] = reason.strip()
    return known


def cell(text, limit=160):
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("|", "\\|")


def report(runs, known):
    ref = runs[0]
    out = []
    out.append("| backend | pass | skip | fail | error | total | time (s) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        c = r["counts"]
        name = r["backend"] + (" (selected tests)" if r.get("subset") else "")
        out.append(f"| {name} | " + " | ".join(str(c.get(s, 0)) for s in STATUSES)
                   + f" | {sum(c.values())} | {r.get('seconds', '')} |")
    out.append("")
    out.append(f"World size {ref.get('world_size')}, torch {ref.get('torch')}, "
               f"commit {ref.get('commit')}, {ref.get('host')}, started {ref.get('started')}.")
    regressions = 0
    for r in runs[1:]:
        rb, b = ref["backend"], r["backend"]
        ref_pass = [n for n, t in ref["tests"].items() if t["status"] == "pass"]
        bad = [n for n in ref_pass if n in r["tests"] and r["tests"][n]["status"] in ("fail", "error")]
        skipped = [n for n in ref_pass if n in r["tests"] and r["tests"][n]["status"] == "skip"]
        extra = [n for n, t in r["tests"].items()
                 if t["status"] == "pass" and ref["tests"].get(n, {}).get("status") != "pass"]
        missing = [n for n in ref_pass if n not in r["tests"]]
        out.append("")
        out.append(f"### Pass with {rb}, fail or error with {b} ({len(bad)})")
        out.append("")
        if bad:
            out.append(f"| test | {b} | first error line | known |")
            out.append("|---|---|---|---|")
            for n in bad:
                t = r["tests"][n]
                status = t["status"] + (" (timed out)" if t.get("timed_out") else "")
                if t.get("flaky"):
                    status += f" (flaky: first {t['first_try']['status']})"
                k = known.get(n)
                if k is None:
                    regressions += 1
                out.append(f"| {n} | {status} | {cell(t.get('error', ''))} | "
                           f"{cell(k) if k is not None else ''} |")
        else:
            out.append("(none)")
        out.append("")
        out.append(f"### Pass with {rb}, skipped with {b} ({len(skipped)})")
        out.append("")
        if skipped:
            out.append("| test | skip reason |")
            out.append("|---|---|")
            for n in skipped:
                out.append(f"| {n} | {cell(r['tests'][n].get('reason', ''))} |")
        else:
            out.append("(none)")
        out.append("")
        out.append(f"### Pass with {b}, not with {rb} ({len(extra)})")
        out.append("")
        for n in extra:
            out.append(f"- {n} ({rb}: {ref['tests'].get(n, {}).get('status', 'not run')})")
        if not extra:
            out.append("(none)")
        flaky = [n for n, t in r["tests"].items() if t.get("flaky")]
        if flaky:
            out.append("")
            out.append(f"Flaky with {b} (a second try changed the result; the second counts): "
                       + ", ".join(f"{n} (first {r['tests'][n]['first_try']['status']}, then "
                                   f"{r['tests'][n]['status']})" for n in flaky))
        if missing and not r.get("subset"):
            out.append("")
            out.append(f"Not run with {b}: " + ", ".join(missing))
    return "\n".join(out) + "\n", regressions


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="result JSON files; the first is the reference")
    ap.add_argument("--markdown", help="also write the report here")
    ap.add_argument("--known", help="tests whose difference is understood")
    ap.add_argument("--fail-on-regressions", action="store_true")
    args = ap.parse_args(argv)
    if len(args.results) < 2:
        ap.error("give at least two result files")
    runs = []
    for p in args.results:
        with open(p) as f:
            runs.append(json.load(f))
    text, regressions = report(runs, load_known(args.known))
    sys.stdout.write(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.fail_on_regressions and regressions:
        print(f"\n{regressions} test(s) pass with {runs[0]['backend']} and fail or error "
              "with another backend (not in the known list)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
