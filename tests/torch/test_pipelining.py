"""torch.distributed.pipelining over coil: pipeline-parallel training.

Each rank is one stage (a Linear layer and a tanh) of a model as deep as the
world. The schedules pass activations forward and gradients back between
neighbouring stages with batch_isend_irecv, in the order each schedule
interleaves its micro-batches. Checked, for GPipe and 1F1B, 2 and 3 ranks,
4 micro-batches of 2 samples:
  - each stage's weight and bias gradients equal the whole model's, run in
    one process on the whole batch, within 1e-5 (the schedules of torch 2.7
    and later scale them by 1/4, the micro-batch count: their scale_grads;
    older ones sum the micro-batches' gradients);
  - the last stage's per-micro-batch losses add up to the whole batch's.

COIL_TORCH_TEST_DEVICE=cuda runs the stages on CUDA (rank % device count;
ranks may share a GPU), whose activations and gradients then go through
coil's CUDA send/recv; it exits 77 with the reason where torch sees no GPU.
"""
import datetime
import inspect
import os
import sys

from harness import SKIP, init_env, require_torch_feature, run_worlds, say

ON_CUDA = os.environ.get("COIL_TORCH_TEST_DEVICE") == "cuda"

MICRO_BATCHES = 4
WIDTH = 16


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    dev = torch.device("cpu")
    if ON_CUDA:
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    x = torch.randn(2 * MICRO_BATCHES, WIDTH, generator=torch.Generator().manual_seed(1))
    y = torch.randn(2 * MICRO_BATCHES, WIDTH, generator=torch.Generator().manual_seed(2))

    def loss_fn(out, target):
        return ((out - target) ** 2).sum()

    problems = []
    for name, schedule_class in (("GPipe", ScheduleGPipe), ("1F1B", Schedule1F1B)):
        scaled = "scale_grads" in inspect.signature(schedule_class).parameters
        per_step = MICRO_BATCHES if scaled else 1
        torch.manual_seed(0)  # every rank builds the whole model, keeps its layer
        layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(world)]
        whole = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.Tanh())])
        mine = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())
        mine[0].load_state_dict(layers[rank].state_dict())
        # Torch 2.4 wants a micro-batch's shape (input_args); later ones
        # learn it from the first step, through the backend.
        shape = {}
        input_args = inspect.signature(PipelineStage).parameters["input_args"]
        if input_args.default is inspect.Parameter.empty:
            shape["input_args"] = torch.empty(2, WIDTH, device=dev)
        stage = PipelineStage(mine.to(dev), rank, world, dev, **shape)
        schedule = schedule_class(stage, n_microbatches=MICRO_BATCHES, loss_fn=loss_fn)
        losses = []
        if rank == 0:
            schedule.step(x.to(dev))
        elif rank == world - 1:
            schedule.step(target=y.to(dev), losses=losses)
        else:
            schedule.step()

        whole_loss = loss_fn(whole(x), y)
        whole_loss.backward()
        for what, got, want in (("weight", mine[0].weight.grad, layers[rank].weight.grad),
                                ("bias", mine[0].bias.grad, layers[rank].bias.grad)):
            off = (got.cpu() - want / per_step).abs().max().item()
            if off > 1e-5:
                problems.append(f"{name}: stage {rank} {what} gradient is {off:.2e} off")
        if rank == world - 1:
            total = sum(loss.item() for loss in losses)
            wrong_total = abs(total - whole_loss.item()) > 1e-4 * whole_loss.item()
            if len(losses) != MICRO_BATCHES or wrong_total:
                problems.append(f"{name}: losses {[round(v.item(), 4) for v in losses]} add up to "
                                f"{total}, the whole batch's is {whole_loss.item()}")
        say(f"rank {rank}/{world}: {name} on {dev} done")
    dist.destroy_process_group()
    if problems:
        raise AssertionError("\n".join(problems))


def main():
    require_torch_feature("pipelining")
    import torch
    if ON_CUDA and not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device (COIL_TORCH_TEST_DEVICE=cuda)")
        return SKIP
    run_worlds("test_pipelining", worker, (2, 3), timeout=180)


if __name__ == "__main__":
    sys.exit(main())
