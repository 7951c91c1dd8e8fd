"""Creating and destroying coil process groups: no leaks, sub-groups work.

  re-init:    2 ranks, 4 rounds of init_process_group("coil") on one shared
              TCPStore, an all_reduce and a sub-group, then
              destroy_process_group(). From round 1 on the process's thread
              count must not grow, and no /dev/shm/coil-* segment may be left.
              The shared store also checks that each round's rendezvous key
              is fresh (a stale unique id would hang or fail the join).
  sub-groups: 3 ranks; new_group([0, 2]) and new_group([1, 2]) with coil,
              used in turns and interleaved with the default group; values
              checked against the members' inputs.
"""
import datetime
import glob
import os
import sys
import time

from harness import finish, init_env, require_coil_torch, run_ranks, say

ROUNDS = 4


def threads():
    return len(os.listdir("/proc/self/task"))


def coil_segments():
    return set(glob.glob("/dev/shm/coil-*"))


def reinit(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    before = coil_segments()
    counts = []
    for round_ in range(ROUNDS):
        dist.init_process_group("coil", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=30))
        x = torch.full((100_000,), float(rank + round_))
        dist.all_reduce(x)
        want = sum(r + round_ for r in range(world))
        assert x[0].item() == want and x[-1].item() == want, (round_, x[0].item(), want)
        sub = dist.new_group([0, 1])
        y = torch.ones(10)
        dist.all_reduce(y, group=sub)
        assert y.sum().item() == 20, y
        dist.barrier()
        dist.destroy_process_group()
        counts.append(threads())
    # Segments another test on this machine made meanwhile come and go; a
    # leak of ours stays.
    left = coil_segments() - before
    if left:
        time.sleep(1.0)
        left &= coil_segments()
    say(f"rank {rank}: threads after each round {counts}; coil shm segments left: "
        f"{sorted(left) or 'none'}")
    assert counts[-1] <= counts[0], f"threads grew from {counts[0]} to {counts[-1]}: {counts}"
    assert not left, f"/dev/shm segments left behind: {sorted(left)}"


def subgroups(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=30))
    a = dist.new_group([0, 2])
    b = dist.new_group([1, 2])
    for step in range(3):
        x = torch.full((1000,), float(10 ** rank + step))
        if rank in (0, 2):
            dist.all_reduce(x, group=a)
            assert x[0].item() == 1 + 100 + 2 * step, (step, x[0].item())
        x = torch.full((1000,), float(10 ** rank + step))
        if rank in (1, 2):
            dist.all_reduce(x, group=b, op=dist.ReduceOp.MAX)
            assert x[0].item() == 100 + step, (step, x[0].item())
        z = torch.tensor([float(rank)])
        dist.all_reduce(z)  # the default group in between
        assert z.item() == 3.0, z
    if rank in (0, 2):
        assert dist.get_backend(a) == "coil", dist.get_backend(a)
        assert dist.get_world_size(a) == 2
        t = torch.tensor([float(rank)])
        dist.broadcast(t, group_src=1, group=a)  # group rank 1 is global rank 2
        assert t.item() == 2.0, t
    dist.destroy_process_group()


def main():
    require_coil_torch()
    reports, passed = [], 0
    for name, fn, world in (("re-init without leaks", reinit, 2), ("sub-groups", subgroups, 3)):
        got = run_ranks(fn, world, timeout=120)
        say(f"{name}: {'ok' if not got else 'FAILED'}")
        passed += 0 if got else 1
        reports += got
    finish("test_lifecycle", reports, passed)


if __name__ == "__main__":
    sys.exit(main())
