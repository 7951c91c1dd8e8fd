#!/usr/bin/env python3
"""Runs PyTorch's own distributed test suite against one c10d backend.

The suite is torch.testing._internal.distributed.distributed_test (what
torch's test/distributed/test_distributed_spawn.py runs): one test at a time,
each in --world-size (default 2) fresh "spawn" processes, CPU only, over
loopback.

  run_distributed_test.py --backend coil --json coil.json
  run_distributed_test.py --backend gloo --json gloo.json -k all_reduce -k 'test_barrier*'
  run_distributed_test.py --backend gloo,coil --out-dir DIR   # both, then compare.py

Options: --world-size N (default 2; the suite skips 30 of its tests below 3
or 4 ranks, and some branches differ with an odd count), -k PATTERN (repeatable; a pattern with * ? [ is a glob on the test
name, else a substring), --timeout S (per test, default 240), --list (print
the selected names and stop), --log FILE (every rank's output; default next
to the JSON file), --rerun N (a failed test runs once more, up to N of them,
default 20; the second result counts and "flaky" marks a change; hangs are
not rerun), --plain and --as-gloo (see below).

The JSON file maps each test name to {"status": pass|skip|fail|error, and
"reason" (skip), "error" (the first line of the first failing rank's
exception), "traceback" (its tail), "timed_out", "seconds"}, beside the
counts, torch version and settings. "fail" is an AssertionError, "error" is
any other exception, a timeout or a crash.

How it stays robust: the tests run in a worker process that reports each
test's start and end on a file; the suite's own per-test timeout
(DISTRIBUTED_TESTS_DEFAULT_TIMEOUT) ends a test whose ranks hang, and if the
worker itself makes no progress for that long plus a margin, this driver kills
the worker's whole process group, records the test as an error and goes on
with the next test in a new worker (the margin is 90 s, or
$COIL_DIST_SUITE_MARGIN).

A backend other than gloo is not in the suite's capability sets
(DistTestCases.backend_feature), so most DDP and subgroup tests would skip
for it by name alone. Unless --plain is given, the backend is added to every
set gloo is in (and to "plugin", which counts it as available), so that it is
tested on everything gloo is. Tests that check `BACKEND == "gloo"` by name
still skip for it, with the suite's reason.

--as-gloo goes one step further for those: the suite is told the backend is
gloo (BACKEND=gloo, so its gloo-only tests and gloo branches run) and every
process group it creates for gloo is created with the given backend instead
(the ranks wrap torch.distributed's _new_process_group_helper). With
`--backend gloo,coil` this happens by itself, after both runs, for the tests
that pass with gloo and that coil skipped: results in coil-as-gloo.json.
A failure there can be an artefact (the test may check gloo's own names),
so read it with the test's source.

Exit status: 0 when the run completed (whatever the test results), 77 when
torch, expecttest (torch's test helpers need it) or, for coil, coil_torch
does not import, 1 on a problem of the run
itself, and with several backends 1 as well when compare.py finds tests that
pass with the first backend and fail with another (see compare.py --known).
"""
import argparse
import datetime
import fnmatch
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
ROLE_ENV = "COIL_DIST_SUITE_ROLE"
SKIP = 77
DEFAULT_WORLD_SIZE = 2
# Seconds the driver waits past the suite's own timeout for a test before it
# kills the worker.
WATCHDOG_MARGIN = int(os.environ.get("COIL_DIST_SUITE_MARGIN", "90"))
STATUSES = ("pass", "skip", "fail", "error")


# ---------------------------------------------------------------------------
# Worker side: defines the test class (also in the ranks, which re-import this
# file as their main module under "spawn"), lists and runs tests.

def _claim_gloo_features(backend):
    from torch.testing._internal.common_distributed import DistTestCases
    for name, backends in DistTestCases.backend_feature.items():
        if "gloo" in backends or name == "plugin":
            backends.add(backend)


def _run_as(real):
    """Every process group the suite asks gloo for is made with `real`."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    helper = c10d._new_process_group_helper

    def substitute(group_size, group_rank, global_ranks_in_group, backend, *rest, **kw):
        if isinstance(backend, str) and "gloo" in backend:
            backend = (dist.Backend(real) if backend == "gloo"
                       else backend.replace("gloo", real))
        return helper(group_size, group_rank, global_ranks_in_group, backend, *rest, **kw)

    c10d._new_process_group_helper = substitute


if os.environ.get(ROLE_ENV) == "worker":
    _backend = os.environ["BACKEND"]
    _real = os.environ.get("COIL_DIST_SUITE_RUN_AS")  # set: the suite thinks it is gloo
    if "coil" in (_backend, _real):
        import coil_torch  # noqa: F401  registers the backend in every process
    if _real:
        _run_as(_real)
    elif _backend != "gloo" and os.environ.get("COIL_DIST_SUITE_PLAIN") != "1":
        _claim_gloo_features(_backend)
    import torch
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest,
        TestDistBackend,
    )

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        """What test_distributed_spawn.py defines: each test in spawned ranks."""

        def setUp(self):
            super().setUp()
            self._spawn_processes()
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def _exception_lines(text):
    """The first line of each exception in a traceback text ("Type: msg")."""
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("Traceback (most recent call last):"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                j += 1
            if j < len(lines):
                found.append(lines[j].strip())
            i = j
        i += 1
    return found


def _describe_error(err_text):
    """(first error line, per-rank lines, timed_out) for a test's error text.

    A rank's exception reaches the parent as a RuntimeError that holds each
    failed rank's traceback: "Process N exited with error code 10 and
    exception:\\n<traceback>"."""
    ranks = re.split(r"(?m)^Process (\d+) exited with error code \d+ and exception:\s*$",
                     err_text)
    per_rank = []
    for k in range(1, len(ranks) - 1, 2):
        lines = _exception_lines(ranks[k + 1])
        if lines:
            per_rank.append(f"rank {ranks[k]}: {lines[-1]}")
    if per_rank:
        first = per_rank[0].split(": ", 1)[1]
    else:
        lines = _exception_lines(err_text)
        first = lines[-1] if lines else (err_text.strip().splitlines() or ["?"])[-1]
    # The suite's own per-test timeout (its ranks were stopped), not a
    # timeout error that a test provokes on purpose.
    timed_out = "terminated or timed out after" in err_text
    return first[:400], per_rank, timed_out


class _Recorder(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcome = None

    def addSuccess(self, test):
        self.outcome = {"status": "pass"}

    def addExpectedFailure(self, test, err):
        self.outcome = {"status": "pass", "note": "expected failure"}

    def addUnexpectedSuccess(self, test):
        self.outcome = {"status": "fail", "error": "unexpected success"}

    def addSkip(self, test, reason):
        self.outcome = {"status": "skip", "reason": str(reason)}

    def _bad(self, test, err, status):
        text = self._exc_info_to_string(err, test)
        first, per_rank, timed_out = _describe_error(text)
        if status == "error" and first.startswith("AssertionError"):
            status = "fail"
        self.outcome = {"status": status, "error": first,
                        "traceback": "\n".join(text.splitlines()[-60:])}
        if len(per_rank) > 1:
            self.outcome["ranks"] = per_rank
        if timed_out:
            self.outcome["timed_out"] = True

    def addFailure(self, test, err):
        self._bad(test, err, "fail")

    def addError(self, test, err):
        self._bad(test, err, "error")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._bad(test, err, "fail" if issubclass(err[0], AssertionError) else "error")


def _worker_names():
    cls = globals()["TestDistBackendWithSpawn"]
    return list(unittest.TestLoader().getTestCaseNames(cls))


def _worker_run(names, events_path):
    from torch.testing._internal.common_distributed import get_timeout
    cls = globals()["TestDistBackendWithSpawn"]
    with open(events_path, "a") as events:
        def emit(obj):
            events.write(json.dumps(obj) + "\n")
            events.flush()

        for name in names:
            sys.stderr.write(f"\n===== {name} =====\n")
            sys.stderr.flush()
            emit({"event": "start", "test": name, "time": time.time(),
                  "timeout": get_timeout(name)})
            t0 = time.monotonic()
            result = _Recorder()
            try:
                cls(name).run(result)
                outcome = result.outcome or {"status": "error",
                                             "error": "no result from unittest"}
            except BaseException as e:  # noqa: BLE001 - recorded, then go on
                outcome = {"status": "error", "error": f"{type(e).__name__}: {e}"[:400]}
            outcome["seconds"] = round(time.monotonic() - t0, 2)
            emit({"event": "end", "test": name, "result": outcome})


# ---------------------------------------------------------------------------
# Driver side.

def _probe(backend):
    """None if the backend can run here, else the reason to skip."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001
        return f"torch does not import with {sys.executable}: {e}"
    if not dist.is_available():
        return "this torch build has no torch.distributed"
    try:
        import expecttest  # noqa: F401  torch's test helpers need it
    except ImportError:
        return (f"torch's test helpers need the module expecttest: "
                f"{sys.executable} -m pip install expecttest")
    if backend == "gloo":
        return None if dist.is_gloo_available() else "this torch build has no gloo"
    if backend == "coil":
        try:
            import coil_torch  # noqa: F401
        except ImportError as e:
            return f"coil_torch does not import: {e}"
        return None
    try:
        dist.Backend(backend)
    except ValueError as e:
        return f"backend {backend} is not registered: {e}"
    return None


def _worker_env(args, backend, as_gloo=False):
    env = dict(os.environ)
    env[ROLE_ENV] = "worker"
    env["BACKEND"] = "gloo" if as_gloo else backend
    env.pop("COIL_DIST_SUITE_RUN_AS", None)
    if as_gloo:
        env["COIL_DIST_SUITE_RUN_AS"] = backend
    env["WORLD_SIZE"] = str(args.world_size)
    env["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("COIL_SOCKET_IFNAME", "lo")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("TP_SOCKET_IFNAME", "lo")
    env["COIL_DIST_SUITE_PLAIN"] = "1" if args.plain else "0"
    pypath = os.path.join(REPO, "python")
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if os.path.isdir(os.path.join(pypath, "coil_torch")) and pypath not in parts:
        env["PYTHONPATH"] = os.pathsep.join(parts + [pypath])  # a given one comes first
    for var in ("RANK", "LOCAL_RANK", "MASTER_PORT", "INIT_METHOD", "TEMP_DIR"):
        env.pop(var, None)
    return env


def _selected(names, patterns):
    if not patterns:
        return names
    out = []
    for n in names:
        for p in patterns:
            if (fnmatch.fnmatchcase(n, p) if any(c in p for c in "*?[") else p in n):
                out.append(n)
                break
    return out


def _kill_group(proc):
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # Ranks may outlive the worker in its group: one more round.
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_backend(args, backend, json_path, log_path, as_gloo=False, only=None):
    """Runs the selected tests for one backend; returns the result dict.
    as_gloo: the suite is told the backend is gloo, and every process group
    it makes for gloo is made with `backend` instead. only: exact names."""
    env = _worker_env(args, backend, as_gloo)
    label = backend + ("-as-gloo" if as_gloo else "")
    work = json_path + ".d"
    os.makedirs(work, exist_ok=True)
    me = os.path.abspath(__file__)
    started = time.time()
    with open(log_path, "w") as log:
        listing = subprocess.run([sys.executable, me, "--worker-list"], env=env,
                                 stdout=subprocess.PIPE, stderr=log, text=True,
                                 timeout=600, check=False)
    if listing.returncode != 0:
        raise RuntimeError(f"listing the tests failed (rc {listing.returncode}); see {log_path}")
    names = _selected(json.loads(listing.stdout.strip().splitlines()[-1]), args.k)
    if only is not None:
        names = [n for n in names if n in only]
    if args.list:
        for n in names:
            print(n)
        return None
    _say(f"[{label}] {len(names)} tests, per-test timeout {args.timeout} s; log: {log_path}")

    attempt = 0

    def execute(todo, results, total):
        """Runs `todo` in as many workers as it takes; fills `results`."""
        nonlocal attempt
        pending = list(todo)
        fruitless = 0
        while pending:
            attempt += 1
            events_path = os.path.join(work, f"events-{attempt}.jsonl")
            tests_path = os.path.join(work, f"tests-{attempt}.json")
            with open(tests_path, "w") as f:
                json.dump(pending, f)
            open(events_path, "w").close()
            with open(log_path, "a") as log:
                proc = subprocess.Popen([sys.executable, me, "--worker-run", tests_path, events_path],
                                        env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            current, current_t0, offset, progressed = None, None, 0, False
            while True:
                rc = proc.poll()
                with open(events_path) as f:
                    f.seek(offset)
                    chunk = f.read()
                complete = chunk[:chunk.rfind("\n") + 1] if "\n" in chunk else ""
                offset += len(complete)
                for line in complete.splitlines():
                    ev = json.loads(line)
                    if ev["event"] == "start":
                        current, current_t0 = ev["test"], time.monotonic()
                        watchdog = ev.get("timeout", args.timeout) + WATCHDOG_MARGIN
                    else:
                        results[ev["test"]] = ev["result"]
                        pending.remove(ev["test"])
                        progressed = True
                        r = ev["result"]
                        detail = r.get("reason") or r.get("error") or ""
                        _say(f"[{label}] {len(results)}/{total} {ev['test']}: {r['status']}"
                             f" ({r['seconds']} s){' - ' + detail[:150] if detail else ''}")
                        current = None
                if rc is not None:
                    _kill_group(proc)  # ranks left behind, if any
                    if current is not None:
                        results[current] = {"status": "error", "seconds":
                                            round(time.monotonic() - current_t0, 2),
                                            "error": f"the worker process died (exit status {rc}) "
                                                     "during this test"}
                        pending.remove(current)
                        progressed = True
                        _say(f"[{label}] {len(results)}/{total} {current}: error (worker died, status {rc})")
                    break
                if current is not None and time.monotonic() - current_t0 > watchdog:
                    _kill_group(proc)
                    results[current] = {"status": "error", "timed_out": True,
                                        "seconds": round(time.monotonic() - current_t0, 2),
                                        "error": f"hung: no result after {watchdog} s, killed "
                                                 "by the driver"}
                    pending.remove(current)
                    progressed = True
                    _say(f"[{label}] {len(results)}/{total} {current}: error (hung, killed after {watchdog} s)")
                    break
                time.sleep(0.5)
            if pending:
                fruitless = 0 if progressed else fruitless + 1
                if fruitless >= 2:
                    raise RuntimeError(f"the worker exits without running a test; see {log_path}")

    results = {}
    execute(names, results, len(names))
    # A test that fails or errors runs once more (a rank killed from outside,
    # a port taken): the second result counts, and "flaky" notes a change.
    again = [n for n in names if results[n]["status"] in ("fail", "error")
             and not results[n].get("timed_out")][:args.rerun]
    if again:
        _say(f"[{label}] running {len(again)} failed test(s) once more")
        second = {}
        execute(again, second, len(again))
        for n in again:
            first = results[n]
            if n in second:
                results[n] = second[n]
                if second[n]["status"] != first["status"]:
                    results[n]["flaky"] = True
                    results[n]["first_try"] = {k: first[k] for k in ("status", "error")
                                               if k in first}
    counts = {s: 0 for s in STATUSES}
    for r in results.values():
        counts[r["status"]] += 1
    import torch
    return {
        "backend": label,
        "as_gloo": as_gloo,
        "subset": bool(args.k) or only is not None,
        "world_size": args.world_size,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "commit": _commit(),
        "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "seconds": round(time.time() - started, 1),
        "per_test_timeout": args.timeout,
        "reruns": len(again),
        "filters": args.k or [],
        "claims_gloo_features": backend != "gloo" and not args.plain and not as_gloo,
        "counts": counts,
        "tests": {n: results[n] for n in names if n in results},
    }


def _commit():
    if os.environ.get("COIL_DIST_SUITE_COMMIT"):  # a copy of the tree without .git
        return os.environ["COIL_DIST_SUITE_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             timeout=20, check=False)
        return out.stdout.strip() or None
    except OSError:
        return None


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker-list":
        print(json.dumps(_worker_names()))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker-run":
        with open(sys.argv[2]) as f:
            names = json.load(f)
        _worker_run(names, sys.argv[3])
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True,
                    help="coil, gloo, or a comma-separated list (the first is the reference)")
    ap.add_argument("--json", help="result file (one backend)")
    ap.add_argument("--out-dir", help="folder for BACKEND.json, BACKEND.log and comparison.md")
    ap.add_argument("--world-size", type=int, default=DEFAULT_WORLD_SIZE, metavar="N",
                    help="ranks per test (default %(default)s)")
    ap.add_argument("-k", action="append", metavar="PATTERN",
                    help="run only tests whose name matches (repeatable)")
    ap.add_argument("--timeout", type=int, default=240, help="per-test timeout, s")
    ap.add_argument("--log", help="worker and rank output (one backend)")
    ap.add_argument("--rerun", type=int, default=20, metavar="N",
                    help="run up to N failed tests once more (default 20; 0: never)")
    ap.add_argument("--list", action="store_true", help="print the selected test names")
    ap.add_argument("--plain", action="store_true",
                    help="do not add the backend to gloo's capability sets")
    ap.add_argument("--as-gloo", action="store_true",
                    help="one backend: tell the suite it is gloo (its gating by name, its "
                         "gloo-only tests) and make each gloo process group with the backend")
    ap.add_argument("--no-as-gloo", action="store_true",
                    help="several backends: skip the as-gloo rerun of gloo-pass tests they skip")
    ap.add_argument("--known", default=os.path.join(HERE, "known-differences.txt"),
                    help="for compare.py, with several backends")
    args = ap.parse_args()
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    if len(backends) > 1 and not args.out_dir and not args.list:
        ap.error("several backends need --out-dir")
    if len(backends) == 1 and not (args.json or args.out_dir or args.list):
        ap.error("give --json or --out-dir")

    pypath = os.path.join(REPO, "python")
    if os.path.isdir(os.path.join(pypath, "coil_torch")) and pypath not in sys.path:
        sys.path.append(pypath)  # as the worker gets it (_worker_env)
    for b in backends:
        why = _probe(b)
        if why:
            print(f"SKIP: {why}")
            return SKIP

    t0 = time.monotonic()
    paths = []
    results = {}

    def run_one(b, as_gloo=False, only=None):
        label = b + ("-as-gloo" if as_gloo else "")
        if args.out_dir:
            os.makedirs(args.out_dir, exist_ok=True)
            json_path = os.path.join(args.out_dir, f"{label}.json")
            log_path = os.path.join(args.out_dir, f"{label}.log")
        else:
            json_path = args.json
            log_path = args.log or os.path.splitext(args.json)[0] + ".log"
        json_path = os.path.abspath(json_path)
        data = run_backend(args, b, json_path, log_path, as_gloo=as_gloo, only=only)
        if data is None:  # --list
            return None
        with open(json_path, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        paths.append(json_path)
        results[label] = data
        c = data["counts"]
        _say(f"[{label}] done in {data['seconds']} s: "
             + ", ".join(f"{c[st]} {st}" for st in STATUSES) + f"; results in {json_path}")
        return data

    try:
        for b in backends:
            if run_one(b, as_gloo=args.as_gloo and len(backends) == 1) is None:
                return 0
        # With gloo as the reference: the tests that pass with gloo and that
        # another backend skips only because of the suite's gating by name,
        # once more with the suite told that backend is gloo.
        if len(backends) > 1 and backends[0] == "gloo" and not args.no_as_gloo:
            ref = results["gloo"]["tests"]
            for b in backends[1:]:
                again = [n for n, t in results[b]["tests"].items()
                         if t["status"] == "skip" and ref.get(n, {}).get("status") == "pass"]
                if again:
                    run_one(b, as_gloo=True, only=again)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"run_distributed_test: {e}", file=sys.stderr)
        return 1
    _say(f"total {round(time.monotonic() - t0, 1)} s")
    if len(paths) > 1:
        sys.path.insert(0, HERE)
        import compare
        argv = paths + ["--markdown", os.path.join(args.out_dir, "comparison.md"),
                        "--fail-on-regressions"]
        if args.known and os.path.exists(args.known):
            argv += ["--known", args.known]
        return compare.main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
