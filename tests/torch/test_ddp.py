"""DistributedDataParallel over coil, against the same training over gloo.

2 and 3 ranks train a small MLP for 20 SGD steps on synthetic data (each rank
its own batch), once with DDP on the coil default group and once, from the
same initial weights, with DDP on a gloo group of the same ranks. Checks:
  - after coil training, parameters are bitwise identical on every rank;
  - they match the gloo run within 1e-6 relative (the two sum gradients in
    different orders, so the last bits may differ);
  - training changed the parameters (the comparison is not vacuous).
"""
import datetime
import sys

from harness import end_training_check, init_env, rank_differences, run_worlds, say

STEPS = 20


def train(torch, model, group, rank, DDP):
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.05)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(4242 + rank)
    for _ in range(STEPS):
        x = torch.randn(16, 32, generator=g)
        y = torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")

    def mlp():
        torch.manual_seed(1234)  # same start on every rank and in both runs
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                   torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                   torch.nn.Linear(64, 10))

    start = torch.cat([p.detach().reshape(-1) for p in mlp().parameters()])
    with_coil = train(torch, mlp(), None, rank, DDP)
    with_gloo = train(torch, mlp(), gloo, rank, DDP)

    # Every rank's coil result, moved over gloo, must be the same bits.
    problems = rank_differences(torch, dist, with_coil, gloo, rank, world)
    rel = ((with_coil - with_gloo).norm() / with_gloo.norm()).item()
    worst = ((with_coil - with_gloo).abs() / with_gloo.abs().clamp_min(1e-3)).max().item()
    moved = ((with_coil - start).norm() / start.norm()).item()
    say(f"rank {rank}/{world}: coil vs gloo relative difference {rel:.2e} "
        f"(worst element {worst:.2e}); training moved the weights by {moved:.2%}")
    if rel > 1e-6:
        problems.append(f"coil and gloo training differ by {rel:.3e} relative (> 1e-6)")
    end_training_check(dist, problems, moved)


def main():
    run_worlds("test_ddp", worker, (2, 3), timeout=180)


if __name__ == "__main__":
    sys.exit(main())
