"""Failures surface as RuntimeErrors within the timeout, never as hangs.

  killed rank:  3 ranks; rank 2 is SIGKILLed after a first all_reduce; the
                survivors' next all_reduce must raise before the 20 s
                timeout given to init_process_group (coil notices the death).
  killed rank with forked DataLoader workers: as above, but rank 2 first
                starts a DataLoader with 2 forked workers, which inherit its
                sockets and shared memory and outlive it by about 5 s (until
                their watchdog notices); the survivors' all_reduce must
                still raise within 3 s, over shm and over tcp
                (COIL_TRANSPORT=tcp): a forked child lets go of coil's
                sockets (src/net/socket_registry.h), so the workers do not
                keep the dead rank's connections open.
  forked child: 2 ranks; rank 0 forks a child after init (as a DataLoader
                forks its workers), which calls all_reduce and send on the
                inherited group: both must raise at once, naming the fork
                (on gloo the child's call had not returned after 10 s);
                then the child destroys the group, which must neither hang
                nor touch the parent's; the parents' next all_reduce gives
                the right sum.
  killed point-to-point peer: 2 ranks exchange a message each way, then
                rank 1 is SIGKILLed; rank 0's next recv from it and send to
                it must raise before the 20 s timeout.
  timeout:      2 ranks, timeout 3 s; rank 1 skips an all_reduce; rank 0's
                must raise coil's timeout error after about 3 s, through
                Work.wait() and through the work's future alike.
  abort:        2 ranks, timeout 60 s; rank 1 skips an all_reduce; rank 0
                aborts the group while its all_reduce waits: the work must
                fail within a second, and rank 1 must get an error, not a hang.
  uneven all_gather, sizes disagreed: 3 ranks, timeout 20 s; all_gather
                into outputs of different sizes where the ranks disagree on
                the sizes, once so that they choose different ways to move
                it (padded all-gather, broadcasts) and once on one size
                only, each on a new group. Every rank must raise coil's
                mismatch error at once, and the default group must still
                work after.
  debug wrapper: 3 ranks under TORCH_DISTRIBUTED_DEBUG=DETAIL, where torch
                wraps the coil group in its ProcessGroupWrapper (which checks
                each collective's shape on a helper group first): DDP, an
                all_gather and a broadcast run through it, and an all_reduce
                whose size differs on rank 0 raises torch's "mismatch
                between collectives" on every rank, after which the group
                still works. (Over gloo, torch 2.15 crashes here with a
                segfault in DDP's constructor, 2026-11-29.)
"""
import datetime
import os
import signal
import sys
import time

from harness import finish, init_env, require_coil_torch, run_ranks, say, torch_lacks


def killed_rank(rank, world, port, transport, with_workers):
    """Rank 2 dies; the survivors' next all_reduce must fail before the
    timeout. with_workers: rank 2 first starts a DataLoader with forked
    workers, as trainers do after the process group exists; they hold
    copies of its descriptors but let go of coil's sockets, so the
    survivors must see the death long before the workers exit."""
    init_env(rank, world, port)
    if transport:
        os.environ["COIL_TRANSPORT"] = transport
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    import coil_torch  # noqa: F401

    timeout = 20.0
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=timeout))
    x = torch.ones(1 << 20)
    dist.all_reduce(x)
    assert x[0].item() == world, x[0].item()
    if rank == 2:
        if with_workers:
            loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=4, num_workers=2,
                                multiprocessing_context="fork", persistent_workers=True)
            # A batch from each worker (they take turns): both are in their
            # loop, watching rank 2 as their parent. (With one batch, a worker
            # still starting when rank 2 died took init as its parent and
            # never exited; it held the test's output open: seen on torch 2.7.1.)
            batches = iter(loader)
            next(batches)
            next(batches)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
    except RuntimeError as e:
        took = time.monotonic() - start
        say(f"rank {rank} ({transport or 'default transport'}"
            f"{', workers live on' if with_workers else ''}): all_reduce with a dead peer "
            f"raised after {took:.2f} s: {str(e).splitlines()[0][:200]}")
        assert "coil" in str(e), f"error does not come from coil: {e}"
        assert took < timeout, f"raised only after {took:.1f} s (timeout {timeout} s)"
        # The workers live about 5 s after rank 2: a connection they kept
        # open would take that long (4.7 s over tcp before the fix).
        assert not with_workers or took < 3.0, \
            f"raised only after {took:.1f} s: the workers kept the dead rank's connections open"
    else:
        raise AssertionError("all_reduce with a killed peer did not raise")
    dist.destroy_process_group()


def forked_child(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=20))
    x = torch.ones(1000)
    dist.all_reduce(x)
    if rank == 0:
        pid = os.fork()
        if pid == 0:
            code = 0
            for what, call in (("all_reduce", lambda: dist.all_reduce(torch.ones(8))),
                               ("send", lambda: dist.send(torch.ones(8), 1))):
                start = time.monotonic()
                try:
                    call()
                    print(f"forked child: {what} on the parent's group did not raise",
                          flush=True)
                    code = 2
                except RuntimeError as e:
                    took = time.monotonic() - start
                    if "fork" not in str(e) or took > 2.0:
                        print(f"forked child: {what} raised after {took:.1f} s: {e}", flush=True)
                        code = 3
            dist.destroy_process_group()  # must not join the parent's threads
            os._exit(code)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung (its call or its destroy)")
        assert os.waitstatus_to_exitcode(status) == 0, \
            f"forked child exited with {os.waitstatus_to_exitcode(status)} (see its lines)"
        say("rank 0: the forked child's calls on the parent's group raised at once")
    for _ in range(3):
        y = torch.full((1000,), float(rank + 1))
        dist.all_reduce(y)
        assert torch.equal(y, torch.full((1000,), 3.0)), y[:4]
    dist.destroy_process_group()


def killed_p2p_peer(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    timeout = 20.0
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=timeout))
    peer = 1 - rank
    # One message each way first: both directions are set up.
    got = torch.zeros(4)
    w = dist.isend(torch.full((4,), float(rank)), peer)
    dist.recv(got, peer)
    w.wait()
    assert got[0].item() == peer, got
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    for what, call in (("recv", lambda: dist.recv(torch.zeros(4), 1)),
                       ("send", lambda: dist.send(torch.ones(1 << 20), 1))):
        start = time.monotonic()
        try:
            call()
        except RuntimeError as e:
            took = time.monotonic() - start
            say(f"rank 0: {what} with a dead peer raised after {took:.2f} s: {e}")
            assert "coil" in str(e), f"error does not come from coil: {e}"
            assert took < timeout, f"raised only after {took:.1f} s (timeout {timeout} s)"
        else:
            raise AssertionError(f"{what} with a killed peer did not raise")
    dist.destroy_process_group()


def timed_out(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    timeout = 3.0
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=timeout))
    dist.barrier()
    if rank == 1:
        time.sleep(3 * timeout)  # never joins the all_reduce below
        dist.destroy_process_group()
        return
    start = time.monotonic()
    work = dist.all_reduce(torch.ones(1000), async_op=True)
    errors = []
    for how, wait in (("future", lambda: work.get_future().wait()), ("work", work.wait)):
        try:
            wait()
            errors.append(f"{how}: no error")
        except RuntimeError as e:
            took = time.monotonic() - start
            say(f"rank 0: {how} raised after {took:.2f} s: {e}")
            if not (timeout * 0.8 <= took < timeout + 5):
                errors.append(f"{how}: raised after {took:.2f} s, expected about {timeout} s")
            if "coil" not in str(e) or "tim" not in str(e).lower():
                errors.append(f"{how}: not coil's timeout error: {e}")
    assert work.is_completed(), "failed work is not completed"
    dist.destroy_process_group()
    assert not errors, "; ".join(errors)


def aborted(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    dist.barrier()
    if rank == 1:
        time.sleep(2.0)  # rank 0 aborts meanwhile: its connections close
        # The first all_reduce may still complete with what rank 0 had
        # posted before aborting; the next has no partner and must fail.
        start = time.monotonic()
        try:
            for _ in range(2):
                dist.all_reduce(torch.ones(1000))
            raise AssertionError("all_reduce after the peer aborted did not raise")
        except RuntimeError as e:
            took = time.monotonic() - start
            say(f"rank 1: all_reduce after rank 0 aborted raised after {took:.2f} s: {e}")
            assert took < 5, f"took {took:.1f} s"
        dist.destroy_process_group()
        return
    work = dist.all_reduce(torch.ones(1000), async_op=True)
    time.sleep(0.5)
    start = time.monotonic()
    dist.distributed_c10d._abort_process_group()
    try:
        work.wait()
        raise AssertionError("the aborted all_reduce did not raise")
    except RuntimeError as e:
        took = time.monotonic() - start
        say(f"rank 0: aborted all_reduce raised {took:.2f} s after the abort: {e}")
        assert took < 1.0, f"took {took:.2f} s"


def disagreed_uneven_all_gather(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=20))
    for what, sizes in (("the way", [5, 6, 7] if rank == 0 else [5, 0, 100]),
                        ("one size", [3, 1, 37] if rank == 2 else [0, 1, 37])):
        # A fresh group each time: a mismatch breaks its communicator.
        group = dist.new_group()
        start = time.monotonic()
        try:
            dist.all_gather([torch.zeros(n) for n in sizes], torch.ones(sizes[rank]), group=group)
            raise AssertionError(f"disagreeing on {what}: no error")
        except RuntimeError as e:
            took = time.monotonic() - start
            say(f"rank {rank}: disagreeing on {what} raised after {took:.2f} s: "
                f"{str(e).splitlines()[0][:160]}")
            assert took < 5.0, f"took {took:.2f} s"
            assert "mismatch" in str(e) or "failed" in str(e) or "closed" in str(e), str(e)
    t = torch.ones(3)
    dist.all_reduce(t)  # the default group is unharmed
    assert t[0].item() == world, t
    dist.destroy_process_group()


def debug_wrapper(rank, world, port):
    init_env(rank, world, port)
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # read when torch loads
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=20))
    wrapper = type(dist.group.WORLD._get_backend(torch.device("cpu"))).__name__
    assert wrapper == "_ProcessGroupWrapper", f"the group's backend is {wrapper}"
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.randn(3, 4)).sum().backward()
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank)))
    assert [o[0].item() for o in outs] == [float(r) for r in range(world)], outs
    x = torch.full((3,), float(rank))
    dist.broadcast(x, 1)
    assert x[0].item() == 1.0, x
    try:
        dist.all_reduce(torch.ones(5 if rank == 0 else 6))
        raise AssertionError("an all_reduce of different sizes passed the wrapper")
    except RuntimeError as e:
        assert "mismatch between collectives" in str(e), str(e)[:300]
    y = torch.ones(7)
    dist.all_reduce(y)
    assert y[0].item() == world, y
    dist.destroy_process_group()


def main():
    require_coil_torch()
    reports, passed = [], 0
    killed = {2: -signal.SIGKILL}
    for name, fn, world, expect, args in (
            ("killed rank", killed_rank, 3, killed, ("", False)),
            ("killed rank with forked DataLoader workers, shm", killed_rank, 3, killed,
             ("shm", True)),
            ("killed rank with forked DataLoader workers, tcp", killed_rank, 3, killed,
             ("tcp", True)),
            ("forked child", forked_child, 2, None, ()),
            ("killed point-to-point peer", killed_p2p_peer, 2, {1: -signal.SIGKILL}, ()),
            ("timed-out collective", timed_out, 2, None, ()),
            ("abort", aborted, 2, None, ()),
            ("uneven all_gather, sizes disagreed", disagreed_uneven_all_gather, 3, None, ()),
            ("debug wrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL)", debug_wrapper, 3, None, ())):
        lacking = torch_lacks("abort") if fn is aborted else None
        if lacking:
            say(f"{name}: left out: {lacking}")
            continue
        start = time.monotonic()
        # debug_wrapper sets a variable torch reads as it loads: its ranks
        # must import torch themselves.
        got = run_ranks(fn, world, *args, timeout=90, expect_exit=expect,
                        fresh_interpreter=fn is debug_wrapper)
        say(f"{name}: {'ok' if not got else 'FAILED'} ({time.monotonic() - start:.0f} s)")
        passed += 0 if got else 1
        reports += got
    finish("test_faults", reports, passed)


if __name__ == "__main__":
    sys.exit(main())
