#!/usr/bin/env python3
"""Runs the README's commands as a new user would (suite `readme`).

Every ```sh block of README.md runs as one bash script, line by line as
written (an `export` holds for the rest of the README, as in the one shell a
reader would use), from the root of a fresh
clone of the repository (its build/ made by the README's first command,
tools/quickstart, as for a new user; the build under test only keeps the log),
with the torch venv activated as the README's "Try it" says. The C example
is compiled and run under mpirun with 4 ranks, as its comment says; an
unlabelled block is output the README shows.

A few lines are not run here; each rule below says why, and the run lists
them. Any other line runs, so a command added to the README is tested
without touching this file. It takes 15 minutes or more on 2 cores, so it
is not in the default run (`tools/run-tests` passes `--no-suite readme`):

    meson test -C build --suite readme --print-errorlogs
    tests/tools/readme_commands_test.py REPO BUILD [--list]
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

# (prefix of the command line, why it is not run here)
NOT_RUN = [
    ("tools/run-tests",
     "it runs every suite, this one excluded; CI runs it on every submission"),
    ("meson test -C build --suite torch-suite",
     "PyTorch's own distributed tests take about 30 minutes; docs/torch-suite.md has a run"),
    ("meson test -C build --suite torch",
     "tools/run-tests runs the torch suite, in CI too"),
    ("pip install torch",
     "the pip_install test (suite torch) runs this block in a fresh venv with torch"),
    ("pip install .",
     "the pip_install test (suite torch) runs this block in a fresh venv with torch"),
    ('python -c "import coil_torch"',
     "the pip_install test (suite torch) runs this block in a fresh venv with torch"),
]

BLOCK_TIMEOUT_S = 1800


def blocks(readme):
    """(language, first line number, lines) of every fenced block."""
    out, lang, start, body = [], None, 0, []
    for number, line in enumerate(readme.splitlines(), 1):
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and lang is None:
            lang, start, body = fence.group(1), number, []
        elif fence:
            out.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def commands(body):
    """The command lines of a block (continuations joined, comments and blanks out)."""
    out, pending = [], ""
    for line in body:
        line = pending + line
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def why_not_run(command):
    for prefix, why in NOT_RUN:
        if command.startswith(prefix):
            return why
    return None


def environment(venv):
    env = dict(os.environ)
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = venv
    # As root in a container Open MPI wants --allow-run-as-root; the
    # README's note beside the mpirun line says so. These are its variables.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.setdefault("COIL_SOCKET_IFNAME", "lo")
    return env


def run_shell_block(lines, workdir, env, log):
    """Runs one block; on success `env` takes what it exported (a reader
    runs the README in one shell, so an export holds for the blocks after)."""
    env_file = os.path.join(workdir, ".readme-env")
    script = ["set -euo pipefail"]
    for command in lines:
        script.append(f"echo {shlex.quote('readme$ ' + command)}")
        script.append(command)
    script.append(f"env -0 > {shlex.quote(env_file)}")
    started = time.monotonic()
    result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=workdir, env=env,
                            stdout=log, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S)
    if result.returncode == 0:
        with open(env_file, "rb") as f:
            exported = dict(entry.split("=", 1) for entry in f.read().decode().split("\0")
                            if "=" in entry)
        exported.pop("SHLVL", None)
        exported.pop("_", None)
        env.clear()
        env.update(exported)
    return result.returncode, time.monotonic() - started


def run_c_block(body, workdir, build, env, log):
    source = os.path.join(workdir, "readme_example.c")
    with open(source, "w") as f:
        f.write("\n".join(body) + "\n")
    program = os.path.join(workdir, "readme_example")
    compile_cmd = ["cc", "-Wall", "-o", program, source, "-I", os.path.join(workdir, "include"),
                   "-L", build, "-lcoil", "-Wl,-rpath," + build]  # the clone's build/
    started = time.monotonic()
    rc = subprocess.run(compile_cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        return rc, time.monotonic() - started
    # "one process per rank: mpirun -np 4 ./a.out", as the comment says: on
    # one host coil needs no MASTER_ADDR or MASTER_PORT under mpirun
    # (README, Launching). --oversubscribe: 4 ranks on 2 cores.
    run_env = {k: v for k, v in env.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    result = subprocess.run(
        ["mpirun", "-np", "4", "--oversubscribe", "-x", "COIL_SOCKET_IFNAME", program],
        env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, text=True)
    log.write(result.stdout.encode())
    expected = sum(range(4))
    good = [l for l in result.stdout.splitlines() if re.search(rf": {expected} \(expected {expected}\)", l)]
    if result.returncode == 0 and len(good) != 4:
        log.write(f"readme: expected 4 lines ending '{expected} (expected {expected})'\n".encode())
        return 1, time.monotonic() - started
    return result.returncode, time.monotonic() - started


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    repo, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    listing = "--list" in sys.argv[3:]
    with open(os.path.join(repo, "README.md")) as f:
        all_blocks = blocks(f.read())
    venv = os.environ.get("COIL_TORCH_VENV",
                          os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                       "coil", "torch-venv"))
    failures, ran, not_run = [], 0, []
    with tempfile.TemporaryDirectory(prefix="coil-readme-") as scratch:
        workdir = os.path.join(scratch, "coil")
        if not listing:
            # Its own build/, made by the README's first command
            # (tools/quickstart), as for a new user. Not the build under
            # test: `meson setup build` in the clone would point that one's
            # regeneration at the clone, which is gone afterwards.
            subprocess.run(["git", "clone", "-q", repo, workdir], check=True)
        env = environment(venv)
        log_path = os.path.join(build, "meson-logs", "readme-commands.log")
        with open(log_path if not listing else os.devnull, "wb") as log:
            for lang, line, body in all_blocks:
                if lang == "sh":
                    lines = commands(body)
                    runnable = []
                    for command in lines:
                        why = why_not_run(command)
                        if why:
                            not_run.append((line, command, why))
                        else:
                            runnable.append(command)
                    if listing:
                        for command in runnable:
                            print(f"README:{line}: run: {command}")
                        continue
                    if not runnable:
                        continue
                    log.write(f"\n==== README:{line}\n".encode())
                    log.flush()
                    try:
                        rc, seconds = run_shell_block(runnable, workdir, env, log)
                    except subprocess.TimeoutExpired:
                        rc, seconds = 124, BLOCK_TIMEOUT_S
                    ran += len(runnable)
                    status = "ok" if rc == 0 else f"FAILED (exit {rc})"
                    print(f"README:{line}: {len(runnable)} command(s), {seconds:.0f} s: {status}")
                    for command in runnable:
                        print(f"    {command}")
                    if rc != 0:
                        failures.append(f"README:{line}")
                elif lang == "python":
                    not_run.append((line, " / ".join(commands(body)),
                                    "two lines of a training script, not a program; "
                                    "tools/ddp_example.py runs them (the torchrun block)"))
                elif lang == "":
                    continue  # output the README shows, not a command
                elif lang == "c":
                    if listing:
                        print(f"README:{line}: run: the C example, under mpirun -np 4")
                        continue
                    log.write(f"\n==== README:{line} (C example)\n".encode())
                    log.flush()
                    rc, seconds = run_c_block(body, workdir, os.path.join(workdir, "build"), env, log)
                    ran += 1
                    print(f"README:{line}: the C example under mpirun -np 4, {seconds:.0f} s: "
                          f"{'ok' if rc == 0 else f'FAILED (exit {rc})'}")
                    if rc != 0:
                        failures.append(f"README:{line}")
    for line, command, why in not_run:
        print(f"README:{line}: not run here: {command}  ({why})")
    if listing:
        return 0
    print(f"readme: {ran} command(s) run, {len(not_run)} not run here, "
          f"{len(failures)} block(s) failed; the output is in {log_path}")
    if failures:
        with open(log_path) as f:
            tail = f.read()[-6000:]
        print("---- the log's end:\n" + tail)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
