"""Tensor parallel inside FSDP2 on a 2-D mesh over coil, against one process.

4 ranks form a 2 x 2 DeviceMesh ("dp", "tp"): init_device_mesh makes a
coil subgroup per row and per column. Within a tp pair, the MLP's first
linear layer is split by columns and the second by rows
(parallelize_module: DTensor all-gathers, reduce-scatters and all-reduces
on the tp groups); across the dp pairs, fully_shard shards the result
again (all_gather_into_tensor and reduce_scatter_tensor on the dp groups),
and each dp pair trains on its own half of the batch. DTensor moves
between layouts along the way (redistribute: all_to_all_single and
all_gather on the mesh's groups). Checks, after 8 SGD steps:
  - the full parameters are the same bits on every rank;
  - they match one process training on the whole batch within 1e-5
    relative;
  - training changed them (the comparison is not vacuous);
  - a DTensor sharded over both mesh dimensions comes back whole, and
    redistributes from (Shard(0), Shard(1)) to (Shard(1), Shard(0)) and
    to (Replicate(), Replicate()) with its values intact.
More ranks than the 2 cores here: a correctness test, not a speed one.
"""
import datetime
import sys

from harness import (end_training_check, flat, init_env, rank_differences,
                     relative_difference, require_torch_feature, run_worlds, say)

STEPS = 8
BATCH = 4  # per dp rank


def mlp(torch):
    torch.manual_seed(4321)  # same start on every rank and in every run
    return torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def batches(torch, dp):
    g = torch.Generator().manual_seed(99)
    for _ in range(STEPS):
        yield torch.randn(dp * BATCH, 24, generator=g), torch.randn(dp * BATCH, 10, generator=g)


def train_alone(torch, dp):
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches(torch, dp):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return flat(torch, model.parameters())


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch before 2.6
        from torch.distributed._composable.fsdp import fully_shard

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")  # to compare the results, not through coil
    dp, tp = 2, world // 2
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    problems = []

    # ---- DTensor layouts over both dimensions ------------------------------------
    whole = torch.arange(12 * 10, dtype=torch.float32).reshape(12, 10) - 50
    d = distribute_tensor(whole, mesh, [Shard(0), Shard(1)])
    for name, t in (("sharded both ways", d),
                    ("(Shard(1), Shard(0))", d.redistribute(mesh, [Shard(1), Shard(0)])),
                    ("replicated", d.redistribute(mesh, [Replicate(), Replicate()]))):
        if not torch.equal(t.full_tensor(), whole):
            problems.append(f"DTensor {name}: values changed")

    # ---- tensor parallel within FSDP2 ---------------------------------------------
    model = mlp(torch)
    start = flat(torch, model.parameters())
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mine = mesh.get_local_rank("dp")
    for x, y in batches(torch, dp):
        opt.zero_grad()
        xs, ys = x[mine * BATCH:(mine + 1) * BATCH], y[mine * BATCH:(mine + 1) * BATCH]
        torch.nn.functional.mse_loss(model(xs), ys).backward()
        opt.step()
    trained = flat(torch, [p.full_tensor() for p in model.parameters()])

    problems += rank_differences(torch, dist, trained, gloo, rank, world)
    alone = train_alone(torch, dp)

    vs_alone = relative_difference(trained, alone)
    moved = relative_difference(trained, start)
    say(f"rank {rank}/{world}: 2-D (dp {dp} x tp {tp}) vs one process {vs_alone:.2e} "
        f"(relative); training moved the weights by {moved:.2%}")
    if vs_alone > 1e-5:
        problems.append(f"2-D training and one-process training differ by {vs_alone:.3e} (> 1e-5)")
    end_training_check(dist, problems, moved)


def main():
    require_torch_feature("fsdp2 on cpu")
    run_worlds("test_2d_parallel", worker, (4,), timeout=240)


if __name__ == "__main__":
    sys.exit(main())
