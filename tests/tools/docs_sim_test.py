#!/usr/bin/env python3
"""The step tables in the docs are what coil-sim prints today.

Every fenced block in a doc that follows a marker line

    <!-- coil-sim ARGS -->

must equal the output of `coil-sim ARGS`. And every program that
`coil-sim --list` names must have such a block in docs/algorithms.md, so a
new algorithm cannot land without its table (nor an algorithm's second
program, such as the one-shot's over FIFOs beside its window program).

usage: docs_sim_test.py COIL_SIM DOC [DOC...] [--update]
  --update rewrites the blocks with coil-sim's output instead of checking.
"""
import re
import shlex
import subprocess
import sys

MARKER = re.compile(r"^<!-- coil-sim (.*) -->$")
PROGRAM = re.compile(r"\(([A-Za-z0-9_]+)\)")  # the header's "Ring all-reduce (ringAllReduce): ..."


def run_sim(sim, args):
    out = subprocess.run([sim] + shlex.split(args), capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"coil-sim {args}: exit {out.returncode}\n{out.stderr}")
    return out.stdout.rstrip("\n").split("\n")


def blocks(lines):
    """(marker line index, args, first and end index of the block's body)."""
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit(f"line {i + 1}: a coil-sim marker must be followed by a ``` block")
        end = i + 2
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            sys.exit(f"line {i + 2}: unterminated ``` block")
        yield i, m.group(1), i + 2, end


def shown_program(args, defaults, output):
    """(collective, algorithm, program) a block shows; the program from its header line."""
    words = shlex.split(args)
    collective = words[0] if words and not words[0].startswith("-") else "allreduce"
    algo = words[words.index("--algo") + 1] if "--algo" in words else defaults.get(collective)
    program = PROGRAM.search(output[0]) if output else None
    return collective, algo, program.group(1) if program else None


def main():
    argv = [a for a in sys.argv[1:] if a != "--update"]
    update = "--update" in sys.argv
    sim, docs = argv[0], argv[1:]
    listed = []
    defaults = {}
    for line in subprocess.run([sim, "--list"], capture_output=True, text=True, check=True).stdout.splitlines()[1:]:
        words = line.split()
        if not words:
            break
        listed.append((words[0], words[1], words[2]))
        defaults.setdefault(words[0], words[1])
    failures = []
    shown = set()
    for doc in docs:
        with open(doc) as f:
            lines = f.read().split("\n")
        changed = False
        for marker, args, first, end in reversed(list(blocks(lines))):
            want = run_sim(sim, args)
            have = lines[first:end]
            shown.add(shown_program(args, defaults, want))
            if have == want:
                continue
            if update:
                lines[first:end] = want
                changed = True
                continue
            diff = next((k for k in range(max(len(have), len(want)))
                         if k >= len(have) or k >= len(want) or have[k] != want[k]), 0)
            failures.append(f"{doc}:{marker + 1}: `coil-sim {args}` now prints something else;"
                            f" first difference in line {diff + 1} of the block:\n"
                            f"  doc:      {have[diff] if diff < len(have) else '(nothing)'}\n"
                            f"  coil-sim: {want[diff] if diff < len(want) else '(nothing)'}")
        if changed:
            with open(doc, "w") as f:
                f.write("\n".join(lines))
            print(f"updated {doc}")
    for collective, algo, program in listed:
        if (collective, algo, program) not in shown:
            failures.append(f"no coil-sim table for {collective} {algo} ({program}) in"
                            f" {', '.join(docs)} (add a '<!-- coil-sim {collective} --algo {algo}"
                            f" ... -->' block that shows it)")
    if failures:
        print("\n".join(failures))
        print(f"\nRun: {sys.argv[0]} {sim} {' '.join(docs)} --update  (then read the diff)")
        return 1
    print(f"{len(shown)} programs' tables match coil-sim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
