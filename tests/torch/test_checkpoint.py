"""Distributed checkpoints (torch.distributed.checkpoint) over coil.

DCP plans a save or load with collectives on the process group (gathers
of the ranks' plans, a broadcast of the global plan, barriers) and writes
each rank's shards itself. Trainers checkpoint this way, and resume on a
different number of ranks.

  resharded resume: 3 ranks train an FSDP2 model with Adam for 3 steps and
      save model and optimizer with dcp.save; rank 0 also keeps the full
      parameters and Adam moments (gathered with full_tensor) as the
      reference. Then 2 ranks build the same model sharded over 2, load
      the checkpoint with dcp.load and set_state_dict, and every full
      parameter and moment must equal the reference bit for bit. Both
      then take one more step, which must match the same step taken by
      one process from the reference state.
  async save beside training: 3 ranks make a second coil group for the
      checkpoint and call dcp.async_save three times, each followed at once
      by 40 all_reduces on the default group (checked) while the save runs
      on its thread (each save waits for the one before, as trainers do);
      then each checkpoint loads back to the state it was given, and a save
      on the default group (no group given) loads too.
"""
import datetime
import os
import shutil
import sys
import tempfile

from harness import finish, init_env, require_coil_torch, run_ranks, say, torch_lacks

SAVE_WORLD, LOAD_WORLD = 3, 2
STEPS = 3


def mlp(torch):
    torch.manual_seed(4321)
    return torch.nn.Sequential(torch.nn.Linear(13, 29), torch.nn.ReLU(), torch.nn.Linear(29, 5))


def shard(torch, fully_shard, model, mesh):
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def batch(torch, step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 13, generator=g), torch.randn(8, 5, generator=g)


def train_step(torch, model, opt, step):
    x, y = batch(torch, step)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def full_state(torch, model, opt):
    """name -> full tensor, for every parameter and Adam moment."""
    def whole(t):
        return t.full_tensor() if hasattr(t, "full_tensor") else t
    out = {}
    for name, p in model.named_parameters():
        out[name] = whole(p.detach()).clone()
        for moment in ("exp_avg", "exp_avg_sq"):
            out[f"{name}.{moment}"] = whole(opt.state[p][moment]).clone()
    return out


def sharded_trainer(rank, world, port):
    """Joins the coil default group; returns torch, an FSDP2 model sharded
    over every rank and its Adam optimizer."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import coil_torch  # noqa: F401

    init_env(rank, world, port)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    model = mlp(torch)
    shard(torch, fully_shard, model, init_device_mesh("cpu", (world,)))
    return torch, model, torch.optim.Adam(model.parameters(), lr=0.01)


def save_sharded(rank, world, port, ckpt, reference):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    torch, model, opt = sharded_trainer(rank, world, port)
    for step in range(STEPS):
        train_step(torch, model, opt, step)
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=ckpt)
    state = full_state(torch, model, opt)
    if rank == 0:
        torch.save(state, reference)
    dist.destroy_process_group()


def load_resharded(rank, world, port, ckpt, reference):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    torch, model, opt = sharded_trainer(rank, world, port)
    train_step(torch, model, opt, 99)  # creates Adam's state, all of it overwritten below
    model_sd, optim_sd = get_state_dict(model, opt)
    state_dict = {"model": model_sd, "optim": optim_sd}
    dcp.load(state_dict, checkpoint_id=ckpt)
    set_state_dict(model, opt, model_state_dict=state_dict["model"],
                   optim_state_dict=state_dict["optim"])
    expected = torch.load(reference)
    got = full_state(torch, model, opt)
    assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
    for name, want in expected.items():
        assert torch.equal(got[name], want), f"{name} differs after the resharded load"

    # One more step from the loaded state, against one process that starts
    # from the reference state (a replicated model, same batch).
    train_step(torch, model, opt, STEPS)
    alone = mlp(torch)
    alone_opt = torch.optim.Adam(alone.parameters(), lr=0.01)
    train_step(torch, alone, alone_opt, 99)
    with torch.no_grad():
        for name, p in alone.named_parameters():
            p.copy_(expected[name])
            alone_opt.state[p]["exp_avg"].copy_(expected[f"{name}.exp_avg"])
            alone_opt.state[p]["exp_avg_sq"].copy_(expected[f"{name}.exp_avg_sq"])
            alone_opt.state[p]["step"].fill_(STEPS)
    train_step(torch, alone, alone_opt, STEPS)
    after = full_state(torch, model, opt)
    for name, p in alone.named_parameters():
        diff = (after[name] - p.detach()).abs().max().item()
        scale = p.detach().abs().max().item()
        assert diff <= 1e-5 * scale, f"{name}: the step after loading is off by {diff}"
    dist.destroy_process_group()


def async_beside_training(rank, world, port, root):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import coil_torch  # noqa: F401

    init_env(rank, world, port)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    checkpoint_group = dist.new_group(backend="coil")
    g = torch.Generator().manual_seed(5)
    weights = torch.randn(300, 70, generator=g)  # replicated: the same on every rank
    saved, futures = [], []
    for n in range(3):
        state = {"w": weights + n, "step": torch.tensor(n)}
        saved.append({k: v.clone() for k, v in state.items()})
        if futures:
            # One save at a time on a group, as trainers do: each save runs
            # on a thread of its own, and two at once would interleave
            # their collectives differently on different ranks.
            futures[-1].result()
        futures.append(dcp.async_save({"s": state}, checkpoint_id=os.path.join(root, str(n)),
                                      process_group=checkpoint_group))
        for j in range(40):  # training goes on while the save runs
            x = torch.full((4099,), float(rank + j))
            dist.all_reduce(x)
            want = float(world * (world - 1) // 2 + world * j)
            assert bool((x == want).all()), (n, j, x[:3], want)
    for f in futures:
        f.result()
    for n in range(3):
        out = {"s": {"w": torch.zeros(300, 70), "step": torch.tensor(-1)}}
        dcp.load(out, checkpoint_id=os.path.join(root, str(n)), process_group=checkpoint_group)
        assert torch.equal(out["s"]["w"], saved[n]["w"]), f"checkpoint {n}: w differs"
        assert out["s"]["step"].item() == n, f"checkpoint {n}: step {out['s']['step']}"
    dcp.async_save({"s": {"w": weights * 2}}, checkpoint_id=os.path.join(root, "d")).result()
    out = {"s": {"w": torch.zeros(300, 70)}}
    dcp.load(out, checkpoint_id=os.path.join(root, "d"))
    assert torch.equal(out["s"]["w"], weights * 2), "the default group's checkpoint differs"
    dist.destroy_process_group()


def main():
    require_coil_torch()
    root = tempfile.mkdtemp(prefix="coil-dcp-")
    reports, passed = [], 0
    try:
        ckpt, reference = os.path.join(root, "sharded"), os.path.join(root, "reference.pt")
        lacking = torch_lacks("fsdp2 on cpu")
        if lacking:
            say(f"resharded resume (an FSDP2 model): left out: {lacking}")
        else:
            got = run_ranks(save_sharded, SAVE_WORLD, ckpt, reference, timeout=150)
            if not got:
                got = run_ranks(load_resharded, LOAD_WORLD, ckpt, reference, timeout=150)
            say(f"resharded resume ({SAVE_WORLD} ranks save, {LOAD_WORLD} load): "
                f"{'ok' if not got else 'FAILED'}")
            passed += 0 if got else 1
            reports += got
        got = run_ranks(async_beside_training, 3, os.path.join(root, "async"), timeout=150)
        say(f"async save beside training: {'ok' if not got else 'FAILED'}")
        passed += 0 if got else 1
        reports += got
    finally:
        shutil.rmtree(root, ignore_errors=True)
    finish("test_checkpoint", reports, passed)


if __name__ == "__main__":
    sys.exit(main())
