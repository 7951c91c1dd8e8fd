"""Shared by the torch suite's tests: skip-with-77, rank processes, checks.

A test script calls require_coil_torch() first (exit 77 with the reason when
torch or the built module is missing), then run_ranks(fn, world) to run
fn(rank, world, store_port, *args) in `world` new processes. A rank reports a
failed check by raising; the parent prints every rank's error and the script
exits 1.

The rank processes are forked from a server process that has imported torch
and nothing of coil (multiprocessing's "forkserver", torch preloaded): no
state leaks from the parent, as with "spawn", but no rank pays for its own
`import torch`. That import takes about 3 s of CPU with PyPI's CUDA wheel
(2.9 GB of shared libraries mapped); on the 2-core CI machine a 3-rank world
that only initializes, all-reduces and destroys took 4.5 s with "spawn" and
0.4 s from the forkserver, and test_ops 18-20 s against 8 (2026-12-07).
A rank gets the parent's environment as it is when
run_ranks is called. A test whose rank sets, before importing torch, a
variable that torch reads when it loads (TORCH_DISTRIBUTED_DEBUG) passes
fresh_interpreter=True and gets "spawn".
"""
import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import socket
import sys
import time
import traceback

SKIP = 77


def require_coil_torch():
    """Exits 77 (skipped) with the reason unless torch and coil_torch import."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means skip
        print(f"SKIP: torch does not import with {sys.executable}: {e} "
              "(run tools/lib/torch-venv.sh and reconfigure)")
        sys.exit(SKIP)
    if not dist.is_available():
        print("SKIP: this torch build has no torch.distributed")
        sys.exit(SKIP)
    try:
        import coil_torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        sys.exit(SKIP)


def say(text):
    """Prints one line in a single write, so lines of concurrent ranks do not
    interleave mid-line."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_env(rank, world, port):
    """The env:// variables torchrun would set, on loopback."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    os.environ.setdefault("COIL_SOCKET_IFNAME", "lo")


def _rank_context(fresh_interpreter):
    """Where rank processes come from: "spawn" (a new interpreter each) or
    the forkserver with torch already imported."""
    if fresh_interpreter:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # The script itself ("__main__", where the rank functions live) and torch;
    # set before the server's first start, which happens on the first
    # Process.start().
    ctx.set_forkserver_preload(["__main__", "torch", "torch.distributed"])
    return ctx


def _rank_main(fn, rank, world, port, args, errors, environ):
    # The forkserver's children inherit the server's environment, from when
    # it started: take the parent's as of this run_ranks.
    os.environ.clear()
    os.environ.update(environ)
    faulthandler.enable()  # a rank that crashes prints where (its exit code alone says -11)
    try:
        fn(rank, world, port, *args)
    except BaseException:  # noqa: BLE001 - report everything to the parent
        errors.put((rank, traceback.format_exc()))
        errors.close()
        errors.join_thread()  # the report must reach the pipe before _exit
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


def run_ranks(fn, world, *args, timeout=120.0, expect_exit=None, fresh_interpreter=False):
    """Runs fn(rank, world, port, *args) in `world` processes; returns the
    list of error reports (rank, traceback). A rank still running after
    `timeout` seconds is killed and reported. expect_exit maps rank -> exit
    code for ranks that are meant to die. fresh_interpreter: each rank a new
    interpreter that imports torch itself (see the module's docstring)."""
    ctx = _rank_context(fresh_interpreter)
    errors = ctx.Queue()
    port = free_port()
    environ = dict(os.environ)
    procs = [ctx.Process(target=_rank_main, args=(fn, r, world, port, args, errors, environ))
             for r in range(world)]
    for p in procs:
        p.start()
    # Reap each rank as soon as it exits, as torchrun and mp.spawn do: a dead
    # rank left as a zombie still looks alive to a pid check.
    deadline = time.monotonic() + timeout
    running = {p.sentinel: p for p in procs}
    while running and time.monotonic() < deadline:
        for sentinel in multiprocessing.connection.wait(list(running),
                                                        deadline - time.monotonic()):
            running.pop(sentinel).join()
    reports = []
    for r, p in enumerate(procs):
        if p.is_alive():
            p.kill()
            p.join()
            reports.append((r, f"rank {r} still running after {timeout:.0f} s: killed (hang?)"))
    while True:
        try:
            reports.append(errors.get(timeout=0.2))
        except Exception:  # noqa: BLE001 - queue.Empty
            break
    expected = expect_exit or {}
    for r, p in enumerate(procs):
        want = expected.get(r, 0)
        if p.exitcode is not None and p.exitcode != want and not any(x[0] == r for x in reports):
            reports.append((r, f"rank {r} exited with {p.exitcode}, expected {want}"))
    return reports


def finish(name, reports, passed):
    """Prints the outcome and exits 0 (all passed) or 1."""
    for rank, text in sorted(reports, key=lambda x: x[0]):
        print(f"--- rank {rank} ---\n{text}")
    failed = 1 if reports else 0
    print(f"{name}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def run_worlds(name, worker, world_sizes, timeout=150):
    """Runs worker at each world size in turn, then finish()es."""
    require_coil_torch()
    reports = []
    passed = 0
    for world in world_sizes:
        got = run_ranks(worker, world, timeout=timeout)
        say(f"world {world}: {'ok' if not got else 'FAILED'}")
        passed += 0 if got else 1
        reports += got
    finish(name, reports, passed)


def rank_differences(torch, dist, result, group, rank, world):
    """Every rank's `result` (a float32 tensor) gathered over `group` and
    compared bit for bit with this rank's: one problem line per rank whose
    bits differ."""
    everyone = [torch.empty_like(result) for _ in range(world)]
    dist.all_gather(everyone, result, group=group)
    problems = []
    for r in range(world):
        if not torch.equal(everyone[r].view(torch.int32), result.view(torch.int32)):
            diff = (everyone[r] - result).abs().max().item()
            problems.append(f"rank {r}'s parameters differ from rank {rank}'s (max {diff:g})")
    return problems


def flat(torch, params):
    """The parameters laid end to end, detached: one vector to compare."""
    return torch.cat([p.detach().reshape(-1) for p in params])


def relative_difference(a, b):
    """|a - b| / |b| of two parameter vectors."""
    return ((a - b).norm() / b.norm()).item()


def end_training_check(dist, problems, moved):
    """The end of a training test's rank: a run that barely moved the
    weights (relative change `moved`) proves nothing; the process group is
    destroyed; any problem fails the rank."""
    if moved < 1e-3:
        problems.append(f"training barely changed the weights ({moved:.2e}): vacuous test")
    dist.destroy_process_group()
    if problems:
        raise AssertionError("; ".join(problems))
