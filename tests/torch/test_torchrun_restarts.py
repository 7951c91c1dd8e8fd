"""A job restarted by torchrun (--max-restarts) must join again with coil.

torchrun's agent keeps one TCPStore for the whole job, restarts included,
and the workers' keys carry no attempt number: every key a failed attempt
set is still there when the next attempt starts (torch 2.15; gloo then
fails at once, connecting to a dead attempt's addresses). coil's unique id
under such a key names the root of a dead process, and the counters of its
point-to-point connectors hold the old attempt's counts.

  python test_torchrun_restarts.py
      runs `torchrun --standalone --nproc-per-node 3 --max-restarts 2` on
      this script's worker, whose attempts go:
        0: rank 1 dies during init (after rank 0 has published its id);
        1: rank 0 starts late, so the others find attempt 0's id first; all
           join, then check an all_reduce, a ring of isend/irecv and a
           monitored_barrier; then rank 2 dies;
        2: as attempt 1, and every rank finishes.
      torchrun must exit 0 with every rank's "attempt 2 ok", within 150 s.
"""
import datetime
import os
import signal
import subprocess
import sys
import time

from harness import require_coil_torch, say, torch_lacks

WORLD = 3
ATTEMPTS = 3
# Set by rank 0 of attempt 0 just before it calls init_process_group.
INIT_MARK = "test_torchrun_restarts/attempt-0-rank-0-joins"


def check_group(torch, dist, rank, world):
    x = torch.full((1031,), float(rank + 1))
    dist.all_reduce(x)
    assert bool((x == world * (world + 1) / 2).all()), x[:4]
    out = torch.full((17,), float(rank))
    got = torch.empty(17)
    reqs = [dist.isend(out, (rank + 1) % world), dist.irecv(got, (rank - 1) % world)]
    for r in reqs:
        r.wait()
    assert bool((got == float((rank - 1) % world)).all()), got[:4]
    import coil_torch
    if torch_lacks("monitored_barrier for any backend"):
        coil_torch.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    else:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))


def worker():
    import torch
    import torch.distributed as dist
    import coil_torch  # noqa: F401

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if attempt == 0 and rank in (0, 1):
        # torchrun's store, which every attempt shares.
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              is_master=False, timeout=datetime.timedelta(seconds=30))
        if rank == 0:
            store.set(INIT_MARK, b"1")
        else:
            store.wait([INIT_MARK])
            time.sleep(1.0)  # rank 0 has published its id by now: die without joining
            os._exit(3)
    if attempt > 0 and rank == 0:
        time.sleep(1.5)  # the others read the store before this attempt's id is there
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    check_group(torch, dist, rank, world)
    if attempt == 1:
        dist.barrier()
        if rank == 2:
            os._exit(3)
        x = torch.ones(4)
        dist.all_reduce(x)  # fails on the others: rank 2 is gone
        raise AssertionError("an all_reduce succeeded without rank 2")
    print(f"rank {rank} attempt {attempt} ok", flush=True)
    dist.destroy_process_group()


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--worker":
        worker()
        return 0
    require_coil_torch()
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun, "--standalone", f"--nproc-per-node={WORLD}",
           f"--max-restarts={ATTEMPTS - 1}", os.path.abspath(__file__), "--worker"]
    start = time.monotonic()
    # A session of its own, so a hung run's workers go down with torchrun.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=150)
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, code = p.communicate()[0], None
    took = time.monotonic() - start
    last = ATTEMPTS - 1
    finished = [r for r in range(WORLD) if f"rank {r} attempt {last} ok" in out]
    if code == 0 and len(finished) == WORLD:
        say(f"torchrun with {ATTEMPTS} attempts: ok ({took:.1f} s)")
        say("test_torchrun_restarts: 1 passed, 0 failed")
        return 0
    say(out)
    say(f"torchrun exit {code} after {took:.1f} s; ranks that finished attempt {last}: "
        f"{finished}")
    say("test_torchrun_restarts: 0 passed, 1 failed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
