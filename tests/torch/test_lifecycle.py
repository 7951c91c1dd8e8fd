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
  splits:     3 ranks, a default group with a device_id (torch then splits
              where the backend can): new_group with a rank left out, and
              with use_local_synchronization; split_group into [2, 0] and
              [1] (ranks in the list's order, a collective queued before the
              split, collectives and isend/irecv in the child), a split of
              the child, and one that leaves ranks out (NON_GROUP_MEMBER).
  init methods: 3 ranks without torchrun's variables; init_method tcp://
              and file://, and a FileStore as store=: an all_reduce, a
              new_group, a send/recv and a barrier after each.
  late destroy: 2 ranks launched by hand (rank 0 hosts the store, as under
              mp.spawn); rank 0 sends to rank 1, destroys its group
              (waiting the 3 s grace for rank 1's connector, in vain) and
              exits; rank 1 receives, waits until the store's port is
              closed, then destroys its group. Its destroy must print
              nothing: no torch warning about the store (the p2p connector
              asked the gone store to stop, which torch logs with a stack
              trace) and no coil warning.
  staggered destroy: 3 ranks launched by hand; each sends to the next
              and receives from the one before (so each has a p2p
              connector waiting on the store), then rank r destroys its
              group r * 0.4 s after rank 0, as ranks of a real job reach
              the end at slightly different times. Rank 0 hosts the store;
              no rank may print anything (torch logs a stack trace when a
              connector's wait loses the store because rank 0 has gone).
              Twice more with rank 0 in no part of the point-to-point: only
              ranks 1 and 2 exchange, once in the default group and once in
              a new_group([1, 2]) (as a pipeline group without rank 0).
"""
import datetime
import glob
import inspect
import os
import socket
import subprocess
import sys
import time

from harness import finish, free_port, init_env, require_coil_torch, run_ranks, say, torch_lacks

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
        if "group_src" in inspect.signature(dist.broadcast).parameters:
            dist.broadcast(t, group_src=1, group=a)  # group rank 1 is global rank 2
        else:  # torch before 2.6
            dist.broadcast(t, src=dist.get_global_rank(a, 1), group=a)
        assert t.item() == 2.0, t
    dist.destroy_process_group()


def init_methods(rank, world, port):
    """init_process_group as launches without torchrun's environment do it:
    init_method tcp:// and file:// (a shared file system under Slurm), and a
    FileStore passed as store=."""
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        os.environ.pop(var, None)
    os.environ.setdefault("COIL_SOCKET_IFNAME", "lo")
    timeout = datetime.timedelta(seconds=30)
    base = f"/tmp/coil-test-init-methods-{port}"
    ways = (("tcp://", dict(init_method=f"tcp://127.0.0.1:{port}")),
            ("file://", dict(init_method=f"file://{base}-a")),
            ("FileStore", dict(store=dist.FileStore(f"{base}-b", world))))
    for name, how in ways:
        dist.init_process_group("coil", rank=rank, world_size=world, timeout=timeout, **how)
        x = torch.full((1001,), float(rank + 1))
        dist.all_reduce(x)
        assert x[0].item() == world * (world + 1) / 2 and x[-1].item() == x[0].item(), (name, x)
        pair = dist.new_group([0, 2])
        if rank in (0, 2):
            y = torch.full((7,), float(rank))
            dist.all_reduce(y, group=pair, op=dist.ReduceOp.MAX)
            assert y.sum().item() == 14, (name, y)
        t = torch.full((5,), float(rank))
        if rank == 0:
            dist.send(t, 1)
        elif rank == 1:
            dist.recv(t, 0)
            assert t.sum().item() == 0, (name, t)
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        for suffix in ("-a", "-b"):
            try:
                os.remove(base + suffix)
            except FileNotFoundError:
                pass


def splits(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    # A device_id makes torch split where the backend can: split_group, and
    # new_group asks the ranks outside the new group to take part.
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=30),
                            device_id=torch.device("cpu:0"))
    assert dist.group.WORLD._get_backend(torch.device("cpu")).supports_splitting

    def world_sum_is_right():
        z = torch.tensor([float(rank)])
        dist.all_reduce(z)  # the default group in between
        assert z.item() == 3.0, z

    # new_group: rank 1 is outside it; then one only its members call.
    a = dist.new_group([0, 2])
    if rank != 1:
        x = torch.tensor([float(10 ** rank)])
        dist.all_reduce(x, group=a)
        assert x.item() == 101.0, x
    world_sum_is_right()
    if rank != 0:
        b = dist.new_group([1, 2], use_local_synchronization=True)
        x = torch.tensor([float(10 ** rank)])
        dist.all_reduce(x, group=b)
        assert x.item() == 110.0, x
    world_sum_is_right()

    # split_group: the child's ranks in the list's order ([2, 0]: global rank
    # 2 is rank 0); a collective queued before the split runs before it.
    pending = torch.full((257,), float(rank + 1))
    work = dist.all_reduce(pending, async_op=True)
    child = dist.split_group(split_ranks=[[2, 0], [1]])
    work.wait()
    assert pending[0].item() == 6.0 and pending[-1].item() == 6.0, pending
    order = {2: [2, 0], 0: [2, 0], 1: [1]}[rank]
    assert dist.get_backend(child) == "coil", dist.get_backend(child)
    assert dist.get_world_size(child) == len(order), dist.get_world_size(child)
    assert dist.get_rank(child) == order.index(rank), (dist.get_rank(child), order)
    x = torch.tensor([float(10 ** rank)])
    dist.all_reduce(x, group=child)
    assert x.item() == sum(10.0 ** r for r in order), x
    gathered = [torch.zeros(2) for _ in order]
    dist.all_gather(gathered, torch.tensor([float(rank), 7.0]), group=child)
    assert [g[0].item() for g in gathered] == [float(r) for r in order], gathered
    if len(order) == 2:
        t = torch.tensor([float(rank)])
        dist.broadcast(t, group_src=0, group=child)  # child rank 0 is global rank 2
        assert t.item() == 2.0, t
        # Point-to-point in the child, both sides sending first.
        out, into = torch.full((1001,), float(rank)), torch.zeros(1001)
        peer = order[1 - order.index(rank)]
        reqs = [dist.isend(out, peer, group=child), dist.irecv(into, peer, group=child)]
        for r in reqs:
            r.wait()
        assert into[0].item() == float(peer) and into[-1].item() == float(peer), into
    world_sum_is_right()

    # A split of the child ([2, 0] -> its rank 1, global 0, alone), and one
    # that leaves ranks out: they get NON_GROUP_MEMBER.
    if rank != 1:
        grandchild = dist.split_group(parent_pg=child, split_ranks=[[1]])
        if rank == 0:
            x = torch.tensor([5.0])
            dist.all_reduce(x, group=grandchild)
            assert x.item() == 5.0 and dist.get_world_size(grandchild) == 1, x
        else:
            assert grandchild == dist.GroupMember.NON_GROUP_MEMBER, grandchild
    alone = dist.split_group(split_ranks=[[0]])
    assert (alone == dist.GroupMember.NON_GROUP_MEMBER) == (rank != 0), alone
    world_sum_is_right()
    dist.destroy_process_group()


def late_destroy_rank(rank, port):
    """One rank of the late-destroy check, in a process of its own (this
    script with --late-destroy RANK PORT): plain env:// init, as a user's
    script launched by hand."""
    init_env(rank, 2, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=30))
    if rank == 0:
        dist.send(torch.full((1000,), 7.0), 1)
        dist.destroy_process_group()
        return
    got = torch.zeros(1000)
    dist.recv(got, 0)
    assert bool((got == 7.0).all()), got[:4]
    # Rank 0 has exited once its store's port refuses connections.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(0.05)
        except OSError:
            break
    else:
        raise AssertionError("rank 0's store still answers after 30 s")
    time.sleep(0.5)  # the connector's wait sees the store close meanwhile
    print("DESTROY-BEGIN", flush=True)
    dist.destroy_process_group()
    print("DESTROY-END", flush=True)


STAGGERED_WORLD = 3


# How the ranks of a staggered-destroy check use point-to-point.
STAGGERED_MODES = {
    "--staggered-destroy": "ring",            # all, in a ring
    "--staggered-destroy-bystander": "pair",  # ranks 1 and 2 only; rank 0 never
    "--staggered-destroy-subgroup": "group",  # ranks 1 and 2 in a group without rank 0
}


def staggered_destroy_rank(rank, port, mode):
    """One rank of a staggered-destroy check (this script with one of
    STAGGERED_MODES, RANK PORT). Rank 0 hosts the store."""
    init_env(rank, STAGGERED_WORLD, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    world = STAGGERED_WORLD
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=30))
    group = dist.new_group([1, 2]) if mode == "group" else None
    if mode == "ring":
        to, source = (rank + 1) % world, (rank - 1) % world
    else:
        to = source = {0: None, 1: 2, 2: 1}[rank]
    if to is not None:
        got = torch.zeros(100)
        works = [dist.isend(torch.full((100,), float(rank)), to, group=group),
                 dist.irecv(got, source, group=group)]
        for w in works:
            w.wait()
        assert bool((got == float(source)).all()), got[:4]
    dist.barrier()
    time.sleep(0.4 * rank)
    dist.destroy_process_group()


def launch_by_hand(mode, world):
    """Runs this script with `mode` as `world` ranks launched by hand;
    returns [(rank, exit code or None if killed, output)]."""
    port = free_port()
    cmd = [sys.executable, os.path.abspath(__file__), mode]
    procs = [subprocess.Popen(cmd + [str(r), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    results = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=90)
            results.append((rank, p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            results.append((rank, None, p.communicate()[0]))
    return results


def staggered_destroy(mode):
    """Runs the ranks; returns the reports of what went wrong."""
    reports = []
    for rank, code, out in launch_by_hand(mode, STAGGERED_WORLD):
        if code != 0:
            reports.append((rank, f"exit {code}:\n{out}"))
        elif out.strip():
            reports.append((rank, f"printed:\n{out}"))
    return reports


def late_destroy():
    """Runs the two ranks; returns the reports of what went wrong."""
    reports = []
    for rank, code, out in launch_by_hand("--late-destroy", 2):
        if code is None:
            reports.append((rank, f"did not finish in 90 s:\n{out}"))
            continue
        if code != 0:
            reports.append((rank, f"exit {code}:\n{out}"))
        elif rank == 1:
            if "DESTROY-END" not in out:
                reports.append((rank, f"no DESTROY-END:\n{out}"))
            else:
                during = out.split("DESTROY-BEGIN", 1)[1].split("DESTROY-END", 1)[0]
                if during.strip():
                    reports.append((rank, f"destroy_process_group printed:\n{during}"))
    return reports


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--late-destroy":
        late_destroy_rank(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] in STAGGERED_MODES:
        staggered_destroy_rank(int(sys.argv[2]), int(sys.argv[3]), STAGGERED_MODES[sys.argv[1]])
        return 0
    require_coil_torch()
    reports, passed = [], 0
    for name, check in (("late destroy after the store's host exited", late_destroy),
                        ("staggered destroy, the store's host first",
                         lambda: staggered_destroy("--staggered-destroy")),
                        ("staggered destroy, the store's host without point-to-point",
                         lambda: staggered_destroy("--staggered-destroy-bystander")),
                        ("staggered destroy, point-to-point in a group without the store's host",
                         lambda: staggered_destroy("--staggered-destroy-subgroup"))):
        got = check()
        say(f"{name}: {'ok' if not got else 'FAILED'}")
        passed += 0 if got else 1
        reports += got
    for name, fn, world in (("re-init without leaks", reinit, 2), ("sub-groups", subgroups, 3),
                            ("split_group and new_group with a device_id", splits, 3),
                            ("tcp://, file:// and a FileStore", init_methods, 3)):
        lacking = torch_lacks("device_id cpu") if fn is splits else None
        if lacking:
            say(f"{name}: left out: {lacking}")
            continue
        got = run_ranks(fn, world, timeout=120)
        say(f"{name}: {'ok' if not got else 'FAILED'}")
        passed += 0 if got else 1
        reports += got
    finish("test_lifecycle", reports, passed)


if __name__ == "__main__":
    sys.exit(main())
