#!/usr/bin/env python3
"""coil vs gloo under torch.distributed, side by side in one run.

Two measurements, each on both backends in the same processes (coil is the
default group, gloo a group of the same ranks), alternating so machine noise
hits both alike:
  1. DDP training step time of an MLP of about 10 M parameters (CPU, SGD),
     next to the same step without DDP, with DDP but no communication, and
     the time the step's bucket all-reduces take alone;
  2. dist.all_reduce bus bandwidth (float32, SUM) over a range of sizes,
     busbw = bytes / time * 2 (n - 1) / n, as nccl-tests and coil_perf report it.

    python3 benchmarks/torch/ddp_bench.py                 # spawns 2 ranks
    torchrun --nproc-per-node 2 benchmarks/torch/ddp_bench.py

Needs coil_torch importable (PYTHONPATH=python, COIL_TORCH_EXT_DIR=<build>/src/torch).
Prints a table and the ratio coil/gloo of the median DDP step time
(target: <= 0.7); --runs N repeats the DDP comparison and prints every ratio.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn (without torchrun)")
    p.add_argument("--steps", type=int, default=20, help="timed DDP steps per backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed DDP steps per backend")
    p.add_argument("--runs", type=int, default=1,
                   help="repeat the DDP comparison this often; prints each run's ratio")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=int, default=1536,
                   help="MLP width; 1536 gives about 10 M parameters")
    p.add_argument("--sizes", default="4K,64K,1M,4M,16M,64M",
                   help="all_reduce message sizes in bytes (K/M suffixes)")
    p.add_argument("--iters", type=int, default=10, help="timed all_reduces per size")
    p.add_argument("--bucket-view", action="store_true",
                   help="DDP(gradient_as_bucket_view=True): no gradient<->bucket copies")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--bind", action="store_true",
                   help="bind rank r to CPU r (mod the CPUs), as mpirun --bind-to core does")
    p.add_argument("--json", help="also write the results to this file")
    return p.parse_args()


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if s[-1:] in "KMG" else s) * mult


def make_model(torch, width):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, width), torch.nn.ReLU()]
    for _ in range(3):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers += [torch.nn.Linear(width, 1000)]
    return torch.nn.Sequential(*layers)


# Every tensor handed to the gloo group, kept until the process exits. In
# torch 2.6 (and older) a gloo group's destructor joins its worker threads
# with the GIL held, and a worker that drops a finished call's last
# reference to a tensor Python let go of must take the GIL to free it: the
# process hung at exit in 9 of 15 runs (py-spy: ~ProcessGroupGloo in
# thread::join, the worker in gil_scoped_acquire under ~AsyncWork). Kept
# here, Python frees them at exit, after the groups.
_KEPT_FOR_GLOO = []


def bench(rank, world, args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import coil_torch  # noqa: F401

    if args.bind:  # before any thread starts: they all inherit it
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(args.threads)
    dist.init_process_group("coil", timeout=datetime.timedelta(minutes=5))
    gloo = dist.new_group(backend="gloo")
    groups = {"coil": None, "gloo": gloo}

    # ---- DDP steps -----------------------------------------------------------
    # "local": the same step without DDP, the compute-only floor.
    # "nocomm": DDP whose comm hook returns the bucket untouched: everything
    # DDP does (bucketing copies, hooks, waits) except communicating, i.e.
    # the floor no backend can go below.
    models = {name: DDP(make_model(torch, args.width), process_group=g,
                        gradient_as_bucket_view=args.bucket_view)
              for name, g in groups.items()}
    models["local"] = make_model(torch, args.width)
    models["nocomm"] = DDP(make_model(torch, args.width), process_group=gloo,
                           gradient_as_bucket_view=args.bucket_view)

    bucket_elems = {}  # bucket index -> elements, as DDP laid them out

    def no_communication(state, bucket):
        bucket_elems[bucket.index()] = bucket.buffer().numel()
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    models["nocomm"].register_comm_hook(None, no_communication)
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in models.items()}
    nparams = sum(p.numel() for p in models["coil"].parameters())
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 512, generator=g)
    y = torch.randint(0, 1000, (args.batch,), generator=g)

    def step(name):
        opts[name].zero_grad()
        torch.nn.functional.cross_entropy(models[name](x), y).backward()
        opts[name].step()

    # The all-reduces of one step's buckets "alone": issued as DDP issues them
    # (asynchronously, in bucket order) but with nothing else running, timed
    # after every step. Communication that can neither overlap compute nor
    # slow it down would add exactly this to a step.
    buckets = None

    def time_one(fn):
        dist.barrier(group=gloo)
        t0 = time.perf_counter()
        fn()
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
        _KEPT_FOR_GLOO.append(t)
        return t.item()

    def all_reduce_buckets(grp):
        works = [dist.all_reduce(b, group=grp, async_op=True) for b in buckets]
        for w in works:
            w.wait()

    run_ratios = []
    for run in range(args.runs):
        step_times = {name: [] for name in models}
        alone_times = {name: [] for name in groups}
        for i in range(args.warmup + args.steps):
            for name in models:  # alternate, so all see the same machine state
                bucket_elems.clear()
                t = time_one(lambda: step(name))
                if i >= args.warmup:
                    step_times[name].append(t)
                if name == "nocomm" and buckets is None and i >= args.warmup:
                    # DDP lays the buckets out anew after its first step: take them later.
                    buckets = [torch.ones(bucket_elems[k]) for k in sorted(bucket_elems)]
                    _KEPT_FOR_GLOO.extend(buckets)
            if i >= args.warmup and buckets is not None:
                for name, grp in groups.items():
                    alone_times[name].append(time_one(lambda: all_reduce_buckets(grp)))
        run_ratios.append(statistics.median(step_times["coil"]) /
                          statistics.median(step_times["gloo"]))

    # ---- all_reduce bus bandwidth -------------------------------------------------
    busbw = {name: {} for name in groups}
    lat = {name: {} for name in groups}
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        buf = torch.ones(max(1, nbytes // 4))
        _KEPT_FOR_GLOO.append(buf)
        for name, grp in groups.items():
            for _ in range(2):
                dist.all_reduce(buf, group=grp)
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(buf, group=grp)
            t = torch.tensor([(time.perf_counter() - t0) / args.iters], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
            _KEPT_FOR_GLOO.append(t)
            sec = t.item()
            lat[name][nbytes] = sec
            busbw[name][nbytes] = buf.numel() * 4 / sec * 2 * (world - 1) / world / 1e9

    if rank == 0:
        med = {name: statistics.median(ts) for name, ts in step_times.items()}
        ratio = med["coil"] / med["gloo"]
        over = {name: med[name] - med["local"] for name in groups}
        alone = {name: statistics.median(ts) if ts else float("nan")
                 for name, ts in alone_times.items()}
        print(f"torch {torch.__version__}, {world} ranks, {args.threads} thread(s) each, "
              f"MLP with {nparams / 1e6:.1f} M parameters, batch {args.batch}, "
              f"gradient_as_bucket_view={args.bucket_view}, bound to a core: {args.bind}")
        print(f"DDP step (median of {args.steps}): coil {med['coil'] * 1e3:.1f} ms, "
              f"gloo {med['gloo'] * 1e3:.1f} ms, ratio coil/gloo {ratio:.2f} (target <= 0.70)")
        print(f"  compute only (no DDP) {med['local'] * 1e3:.1f} ms; time DDP adds: "
              f"coil {over['coil'] * 1e3:.1f} ms, gloo {over['gloo'] * 1e3:.1f} ms")
        print(f"  DDP without communication (no-op comm hook) {med['nocomm'] * 1e3:.1f} ms: "
              f"the floor, {med['nocomm'] / med['gloo']:.2f} of gloo; communication adds "
              f"coil {(med['coil'] - med['nocomm']) * 1e3:.1f} ms, "
              f"gloo {(med['gloo'] - med['nocomm']) * 1e3:.1f} ms")
        if buckets is not None:
            print(f"  the same {len(buckets)} bucket all-reduces alone "
                  f"({', '.join(f'{b.numel() * 4 / 2**20:.1f}' for b in buckets)} MiB): "
                  f"coil {alone['coil'] * 1e3:.1f} ms, gloo {alone['gloo'] * 1e3:.1f} ms")
        if args.runs > 1:
            print(f"  ratio coil/gloo in each of the {args.runs} runs (the lines above are the last): "
                  f"{', '.join(f'{r:.2f}' for r in run_ratios)}; "
                  f"median {statistics.median(run_ratios):.2f}")
        print(f"{'bytes':>10} {'coil us':>10} {'coil busbw':>11} {'gloo us':>10} "
              f"{'gloo busbw':>11} {'coil/gloo time':>15}")
        for nbytes in busbw["coil"]:
            print(f"{nbytes:>10} {lat['coil'][nbytes] * 1e6:>10.1f} "
                  f"{busbw['coil'][nbytes]:>8.2f} GB/s {lat['gloo'][nbytes] * 1e6:>10.1f} "
                  f"{busbw['gloo'][nbytes]:>8.2f} GB/s "
                  f"{lat['coil'][nbytes] / lat['gloo'][nbytes]:>15.2f}")
        sys.stdout.flush()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"torch": torch.__version__, "world": world, "params": nparams,
                           "ddp_step_s": med, "ddp_ratio": ratio, "ddp_added_s": over,
                           "ddp_floor_ratio": med["nocomm"] / med["gloo"],
                           "ddp_run_ratios": run_ratios, "buckets_alone_s": alone,
                           "ddp_step_all_s": step_times, "allreduce_s": lat,
                           "allreduce_busbw_GBps": busbw}, f, indent=1)
    dist.destroy_process_group()


def spawned(rank, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    bench(rank, world, args)


def main():
    args = parse_args()
    os.environ.setdefault("COIL_SOCKET_IFNAME", "lo")  # one host: stay on loopback
    if "RANK" in os.environ:  # under torchrun
        bench(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(spawned, args=(args.nproc, port, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()
