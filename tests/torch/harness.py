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
import functools
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


def _c10d_says(dist, text):
    """Whether torch.distributed's own code holds `text`, the message of a
    refusal some releases make before any backend is asked."""
    return text in _c10d_source(dist)


@functools.lru_cache(maxsize=1)
def _c10d_source(dist):
    import inspect
    return inspect.getsource(dist.distributed_c10d)


def _pipeline_stages_meet_matching(torch, dist):
    # torch 2.9's schedules open with a batch between neighbouring stages
    # that sends torch.tensor(stage_index), an int64, into torch.zeros(1), a
    # float32: gloo aborts the process there, and coil refuses the message.
    import inspect
    from torch.distributed.pipelining import stage
    opener = getattr(stage._PipelineStageBase, "_get_init_p2p_neighbors_ops", None)
    if opener is None:
        return True
    source = inspect.getsource(opener)
    return not ("torch.zeros(1" in source and "torch.tensor(self.stage_index" in source)


# What some torch 2.x releases do not offer, whatever the backend: name ->
# (probe(torch, dist) -> True when this torch offers it, what it lacks).
# Probed, not read from the version: torch 2.4.1, 2.6.0, 2.7.1, 2.9.1 and
# 2.15.0 were run, and the releases between them were not.
_TORCH_FEATURES = {
    "fsdp2 on cpu": (lambda torch, dist: hasattr(torch.cpu.Stream, "record_event"),
                     "FSDP2 (fully_shard) on CPU: it records events on torch.cpu.Stream, "
                     "which has none"),
    "abort": (lambda torch, dist: hasattr(torch._C._distributed_c10d.Backend, "abort"),
              "_abort_process_group for a backend other than NCCL (a no-op with a warning)"),
    "split cpu groups": (
        lambda torch, dist: hasattr(dist, "split_group") and not _c10d_says(
            dist, "No device associated with the default pg"),
        "dist.split_group of a group bound to no device"),
    "device_id cpu": (lambda torch, dist: hasattr(dist, "split_group") and not any(
                          _c10d_says(dist, refusal) for refusal in (
                              "must be a cuda device", "must be an accelerator with an index")),
                      "split_group, nor init_process_group(device_id=cpu)"),
    "pipelining": (_pipeline_stages_meet_matching,
                   "working pipeline schedules: their first batch between stages sends an "
                   "int64 where the neighbour receives a float32 (gloo aborts there, coil "
                   "refuses the message)"),
    "monitored_barrier for any backend": (
        lambda torch, dist: not _c10d_says(dist, "only implemented for GLOO"),
        "dist.monitored_barrier on a group not of gloo (coil_torch.monitored_barrier serves it)"),
}


def torch_lacks(feature):
    """Why this torch itself cannot do `feature` (a key of _TORCH_FEATURES),
    or None when it can. The suite runs against every torch the adapter
    builds with; a check of something torch does not offer there is left
    out with this reason, which names torch and never coil."""
    import torch
    import torch.distributed as dist
    probe, what = _TORCH_FEATURES[feature]
    if probe(torch, dist):
        return None
    return f"torch {torch.__version__} has no {what}"


def require_torch_feature(feature):
    """Exits 77 (skipped) with torch_lacks' reason when this torch lacks
    `feature`, for a test that is about nothing else."""
    require_coil_torch()
    lacking = torch_lacks(feature)
    if lacking:
        print(f"SKIP: {lacking}")
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


def _native_stacks(pid):
    """Every thread's native stack of a hung rank (gdb, where installed), for
    its report: where coil or torch waits."""
    import shutil
    import subprocess
    if shutil.which("gdb") is None:
        return " (no gdb here to show its threads' stacks)"
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return " (gdb took over 60 s to show its stacks)"
    frames = [line for line in out.splitlines() if line.startswith(("Thread ", "#"))]
    return "\nits threads' stacks (gdb):\n" + "\n".join(frames)


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
            stacks = _native_stacks(p.pid)
            p.kill()
            p.join()
            reports.append((r, f"rank {r} still running after {timeout:.0f} s: killed (hang?)"
                               f"{stacks}"))
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


# Tensors of the last gathers, kept referenced until the rank exits. Torch
# 2.4's ProcessGroupGloo deadlocks when it is destroyed (with the GIL held)
# while its worker thread, holding the group's lock, frees a finished work
# whose tensors it held last (freeing them takes the GIL): seen once in 15
# test_ddp runs at destroy_process_group (gdb: ~ProcessGroupGloo against
# ~AsyncAllgatherWork in runLoop). Tensors held here are never freed there.
_kept_from_gloo = []


def rank_differences(torch, dist, result, group, rank, world):
    """Every rank's `result` (a float32 tensor) gathered over `group` and
    compared bit for bit with this rank's: one problem line per rank whose
    bits differ."""
    everyone = [torch.empty_like(result) for _ in range(world)]
    dist.all_gather(everyone, result, group=group)
    _kept_from_gloo.append((everyone, result))
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
