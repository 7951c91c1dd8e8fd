#!/usr/bin/env python3
"""Point-to-point under torch.distributed: coil vs gloo, side by side in one run.

Two ranks ping-pong a float32 tensor (rank 0 sends, rank 1 sends it back)
with dist.send/dist.recv, on the coil default group and on a gloo group of
the same ranks, alternating per size so machine noise hits both alike. For
each size it prints the median round trip of each backend, the one-way
bandwidth (bytes / half a round trip), and the ratio coil/gloo of the round
trip (below 1: coil is faster).

    python3 benchmarks/torch/p2p_bench.py            # spawns 2 ranks
    python3 benchmarks/torch/p2p_bench.py --sizes 8,1M --iters 50

Needs coil_torch importable (PYTHONPATH=python, COIL_TORCH_EXT_DIR=<build>/src/torch).
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="8,4K,64K,1M,16M",
                   help="message sizes in bytes (K/M suffixes)")
    p.add_argument("--iters", type=int, default=30, help="timed round trips per size and backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed round trips first")
    p.add_argument("--rounds", type=int, default=3,
                   help="alternate the backends this many times per size")
    return p.parse_args()


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if s[-1:] in "KMG" else s) * mult


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def rank_main(rank, port, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2")
    os.environ.setdefault("COIL_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401 - registers "coil"

    torch.set_num_threads(1)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=120))
    groups = {"coil": None, "gloo": dist.new_group(backend="gloo")}
    peer = 1 - rank

    def round_trips(group, t, n):
        times = []
        for _ in range(n):
            start = time.perf_counter()
            if rank == 0:
                dist.send(t, peer, group=group)
                dist.recv(t, peer, group=group)
            else:
                dist.recv(t, peer, group=group)
                dist.send(t, peer, group=group)
            times.append(time.perf_counter() - start)
        return times

    table = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        t = torch.ones(max(1, size // 4))
        got = {"coil": [], "gloo": []}
        for _ in range(args.rounds):
            for name, group in groups.items():
                dist.barrier(group=groups["gloo"])
                round_trips(group, t, args.warmup)
                got[name] += round_trips(group, t, args.iters)
        table.append((t.numel() * 4, statistics.median(got["coil"]),
                      statistics.median(got["gloo"])))
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()
    if rank == 0:
        results.put(table)


def main():
    args = parse_args()
    import multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, port, args, results)) for r in range(2)]
    for p in procs:
        p.start()
    table = results.get(timeout=1800)
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        print("a rank failed", file=sys.stderr)
        return 1
    print(f"# p2p ping-pong, 2 ranks, median of {args.rounds * args.iters} round trips, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"{'size':>10} {'coil rtt us':>12} {'gloo rtt us':>12} {'coil GB/s':>10} "
          f"{'gloo GB/s':>10} {'coil/gloo':>10}")
    for nbytes, coil, gloo in table:
        print(f"{human(nbytes):>10} {coil * 1e6:12.1f} {gloo * 1e6:12.1f} "
              f"{nbytes / (coil / 2) / 1e9:10.3f} {nbytes / (gloo / 2) / 1e9:10.3f} "
              f"{coil / gloo:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
