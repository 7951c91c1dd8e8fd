#!/usr/bin/env python3
"""DDP step time under several coil settings at once, next to gloo.

Each setting is a set of COIL_* environment variables in force while its
coil group is created (coil reads them at communicator init), plus an
optional "nice" for the group's worker thread (a number, or "idle"). Every setting gets its own
DDP model; steps of all models alternate, so machine noise hits all alike.
The ratio to gloo and "communication adds" (step minus a DDP step with a
no-op comm hook) are printed per setting.

    python3 benchmarks/torch/ddp_ab.py --steps 30 \\
        --setting default= --setting big=COIL_SHM_WINDOW_BYTES=4194304,COIL_TUNE=window/slice:piece=4194304 \\
        --setting nice19=nice=19

Needs coil_torch importable (PYTHONPATH=python, COIL_TORCH_EXT_DIR=<build>/src/torch).
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_bench import make_model  # noqa: E402  (the same model as ddp_bench)


def parse_setting(text):
    """"name=K=V,K=V" -> (name, {K: V}); "nice" sets the worker's nice value."""
    name, _, rest = text.partition("=")
    env = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"--setting {text}: expected KEY=VALUE, got {item!r}")
        env[key] = value
    return name, env


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--setting", action="append", type=parse_setting, default=[],
                   help="NAME=KEY=VALUE,...: one coil group (default: one named 'default')")
    p.add_argument("--steps", type=int, default=30, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=int, default=1536)
    return p.parse_args()


def coil_group(dist, env):
    """A coil group created with `env` in force; "nice" (a number, or "idle"
    for SCHED_IDLE) applies to its worker thread."""
    env = dict(env)
    nice = env.pop("nice", None)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    before = set(os.listdir("/proc/self/task"))
    try:
        group = dist.new_group(backend="coil")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if nice is not None:
        for tid in set(os.listdir("/proc/self/task")) - before:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "coil-torch":
                    continue
            if nice == "idle":
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
            else:
                os.setpriority(os.PRIO_PROCESS, int(tid), int(nice))
    return group


def bench(rank, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    settings = dict(args.setting) or {"default": {}}
    groups = {name: coil_group(dist, env) for name, env in settings.items()}
    groups["gloo"] = None  # the default group
    models = {name: DDP(make_model(torch, args.width), process_group=g)
              for name, g in groups.items()}
    models["nocomm"] = DDP(make_model(torch, args.width))

    def no_communication(state, bucket):
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    models["nocomm"].register_comm_hook(None, no_communication)
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in models.items()}
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 512, generator=g)
    y = torch.randint(0, 1000, (args.batch,), generator=g)
    times = {name: [] for name in models}
    for i in range(args.warmup + args.steps):
        for name, model in models.items():
            dist.barrier()
            t0 = time.perf_counter()
            opts[name].zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opts[name].step()
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
            if i >= args.warmup:
                times[name].append(t.item())
    if rank == 0:
        med = {name: statistics.median(ts) for name, ts in times.items()}
        print(f"median step of {args.steps}: gloo {med['gloo'] * 1e3:.1f} ms, no-op comm hook "
              f"{med['nocomm'] * 1e3:.1f} ms ({med['nocomm'] / med['gloo']:.2f} of gloo)")
        for name in settings:
            print(f"  {name:>12}: {med[name] * 1e3:6.1f} ms, {med[name] / med['gloo']:.3f} of gloo, "
                  f"communication adds {(med[name] - med['nocomm']) * 1e3:.1f} ms")
        sys.stdout.flush()
    dist.destroy_process_group()


def main():
    args = parse_args()
    os.environ.setdefault("COIL_SOCKET_IFNAME", "lo")
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(bench, args=(2, port, args), nprocs=2)


if __name__ == "__main__":
    main()
