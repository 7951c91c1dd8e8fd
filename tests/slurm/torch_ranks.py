"""One rank of torch.distributed under srun (tests/slurm/run_slurm_test.sh).

The job sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from
Slurm's variables, as cluster documentation shows for torch. The default
group is coil, a second group of the same ranks is gloo; every collective
runs on both, from the same inputs, and coil's result must equal gloo's bit
for bit and the value computed here from what every rank contributed. Then
a few DDP steps on each backend: the parameters must agree. Prints one line;
the exit status says whether everything matched.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import coil_torch  # noqa: F401  registers the "coil" backend


def main():
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    wrong = []

    def contribution(r, n, dtype):
        # Small integers: every sum is exact in every dtype (bfloat16 up to
        # 256), so the order in which a backend adds cannot matter.
        return ((torch.arange(n, dtype=torch.float64) % 8) * (r + 1) + r).to(dtype)

    def same(name, coil_out, gloo_out, want):
        if not (torch.equal(coil_out, gloo_out) and torch.equal(coil_out, want)):
            wrong.append(f"{name}: coil {coil_out.flatten()[:4].tolist()}, "
                         f"gloo {gloo_out.flatten()[:4].tolist()}, want {want.flatten()[:4].tolist()}")

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for n in (0, 1, 7, 1000003):
            outs = []
            for group in (None, gloo):
                t = contribution(rank, n, dtype)
                dist.all_reduce(t, group=group)
                outs.append(t)
            want = sum(contribution(r, n, torch.float64) for r in range(world)).to(dtype)
            same(f"all_reduce {dtype} n={n}", outs[0], outs[1], want)

    n = 13
    gathered = []
    for group in (None, gloo):
        out = torch.empty(world * n, dtype=torch.float32)
        dist.all_gather_into_tensor(out, contribution(rank, n, torch.float32), group=group)
        gathered.append(out)
    same("all_gather_into_tensor", gathered[0], gathered[1],
         torch.cat([contribution(r, n, torch.float32) for r in range(world)]))

    scattered = []
    for group in (None, gloo):
        out = torch.empty(n, dtype=torch.float32)
        dist.reduce_scatter_tensor(out, contribution(rank, world * n, torch.float32), group=group)
        scattered.append(out)
    total = sum(contribution(r, world * n, torch.float64) for r in range(world)).to(torch.float32)
    same("reduce_scatter_tensor", scattered[0], scattered[1], total[rank * n:(rank + 1) * n])

    sent = []
    for group in (None, gloo):
        t = contribution(rank, 5, torch.int32)
        dist.broadcast(t, src=world - 1, group=group)
        sent.append(t)
    same("broadcast from the last rank", sent[0], sent[1], contribution(world - 1, 5, torch.int32))

    exchanged = []
    for group in (None, gloo):
        out = torch.empty(world * 3, dtype=torch.float32)
        dist.all_to_all_single(out, contribution(rank, world * 3, torch.float32), group=group)
        exchanged.append(out)
    same("all_to_all_single", exchanged[0], exchanged[1],
         torch.cat([contribution(r, world * 3, torch.float32)[rank * 3:(rank + 1) * 3]
                    for r in range(world)]))

    # A few DDP steps on each backend: the same parameters.
    from torch.nn.parallel import DistributedDataParallel as DDP
    params = []
    for group in (None, gloo):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        ddp = DDP(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        for _ in range(4):
            opt.zero_grad()
            ddp(torch.randn(16, 32, generator=gen)).pow(2).mean().backward()
            opt.step()
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    if not torch.allclose(params[0], params[1], rtol=1e-6, atol=1e-7):
        wrong.append(f"DDP: parameters differ by {(params[0] - params[1]).abs().max().item()}")

    dist.barrier()
    dist.destroy_process_group()
    where = f"rank {rank} of {world} (SLURM_PROCID {os.environ.get('SLURM_PROCID')}, " \
            f"node {os.environ.get('SLURMD_NODENAME')})"
    if wrong:
        print(f"{where}: {len(wrong)} wrong: " + "; ".join(wrong))
        return 1
    print(f"{where}: coil equals gloo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
