"""Collectives inside autograd and inside torch.compile graphs, on coil, for 2 and 3 ranks.

Two ways training code runs collectives without calling dist.* itself:
  - torch.distributed.nn.functional (all_reduce, all_gather, all_to_all,
    all_to_all_single, broadcast, reduce_scatter, gather, scatter): the
    collective is an autograd function, and backward runs another collective
    (a contrastive loss gathers embeddings this way and needs their
    gradients). Values and gradients are checked against numbers computed
    here from what each rank contributed.
  - torch.compile: functional collectives (all_reduce, all_gather_tensor,
    reduce_scatter_tensor) traced into an Inductor graph, which issues them on
    the process group and waits where the graph needs the result; and a
    compiled DistributedDataParallel model (dynamo splits the graph at bucket
    boundaries, DDPOptimizer), trained against one process that sees every
    rank's batch.
"""
import datetime
import os
import sys

from harness import flat, init_env, relative_difference, run_worlds

WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "2,3").split(",")
                    if int(w) >= 2)


def autograd_collectives(torch, dist, rank, world):
    """torch.distributed.nn.functional: forward values and backward gradients."""
    import torch.distributed.nn.functional as F

    def expect(name, got, want):
        assert torch.equal(got, want), f"{name}: got {got.tolist()}, want {want.tolist()}"

    def full(n, value, dtype=torch.float32):
        return torch.full((n,), float(value), dtype=dtype)

    weights = [q + 2 for q in range(world)]  # rank q scales what it receives by q + 2
    # all_reduce: y = sum_q (q + 1) x_q; loss_q = (q + 2) sum(y), so
    # d loss / d x_r = (r + 1) * sum_q (q + 2).
    x = torch.arange(5, dtype=torch.float64, requires_grad=True)
    y = F.all_reduce(x * (rank + 1))
    expect("all_reduce value", y.detach(), torch.arange(5, dtype=torch.float64) * sum(
        q + 1 for q in range(world)))
    (y * weights[rank]).sum().backward()
    expect("all_reduce grad", x.grad, full(5, (rank + 1) * sum(weights), torch.float64))

    # all_gather: every rank weighs block q by (q + 1)(rank + 2).
    x = full(3, rank * 10 + 1).requires_grad_(True)
    blocks = F.all_gather(x)
    for q, b in enumerate(blocks):
        expect(f"all_gather block {q}", b.detach(), full(3, q * 10 + 1))
    sum((b * (q + 1) * weights[rank]).sum() for q, b in enumerate(blocks)).backward()
    expect("all_gather grad", x.grad, full(3, (rank + 1) * sum(weights)))

    # all_to_all: block q goes to rank q, who weighs it by (q + 2).
    xs = [full(2, rank * 10 + q).requires_grad_(True) for q in range(world)]
    got = F.all_to_all([torch.empty(2) for _ in range(world)], xs)
    for q in range(world):
        expect(f"all_to_all from {q}", got[q].detach(), full(2, q * 10 + rank))
    sum((g * weights[rank]).sum() for g in got).backward()
    for q in range(world):
        expect(f"all_to_all grad of block {q}", xs[q].grad, full(2, weights[q]))

    # all_to_all_single, uneven: rank r sends q + 1 elements to rank q.
    send_splits = [q + 1 for q in range(world)]
    recv_splits = [rank + 1] * world
    x = (torch.arange(sum(send_splits), dtype=torch.float32) + 100 * rank).requires_grad_(True)
    out = F.all_to_all_single(torch.empty(sum(recv_splits)), x, recv_splits, send_splits)
    want = torch.cat([100 * q + torch.arange(sum(send_splits[:rank]), sum(send_splits[:rank + 1]),
                                             dtype=torch.float32) for q in range(world)])
    expect("all_to_all_single value", out.detach(), want)
    (out * weights[rank]).sum().backward()
    expect("all_to_all_single grad", x.grad,
           torch.cat([full(send_splits[q], weights[q]) for q in range(world)]))

    # broadcast from the last rank: its gradient is the sum of every rank's.
    src = world - 1
    x = full(4, rank + 7).requires_grad_(True)
    b = F.broadcast(x, src=src)
    expect("broadcast value", b.detach(), full(4, src + 7))
    (b * weights[rank]).sum().backward()
    if rank == src:
        expect("broadcast grad at the root", x.grad, full(4, sum(weights)))

    # reduce_scatter: block q of every rank is summed onto rank q.
    xs = [full(3, rank + 3 * q).requires_grad_(True) for q in range(world)]
    out = F.reduce_scatter(torch.empty(3), xs)
    expect("reduce_scatter value", out.detach(), full(3, sum(q + 3 * rank for q in range(world))))
    (out * weights[rank]).sum().backward()
    for q in range(world):
        expect(f"reduce_scatter grad of block {q}", xs[q].grad, full(3, weights[q]))

    # gather to rank 0 (weighs block q by q + 2) and scatter from rank 0.
    x = full(2, rank).requires_grad_(True)
    gathered = F.gather(x, dst=0)
    loss = sum((g * (weights[q] if rank == 0 else 0.0)).sum() for q, g in enumerate(gathered))
    if rank == 0:
        for q, g in enumerate(gathered):
            expect(f"gather block {q}", g.detach(), full(2, q))
    loss.backward()
    expect("gather grad", x.grad, full(2, weights[rank]))
    xs = [full(2, q * 5).requires_grad_(True) for q in range(world)]
    part = F.scatter(xs, src=0)
    expect("scatter value", part.detach(), full(2, rank * 5))
    (part * weights[rank]).sum().backward()
    if rank == 0:
        for q in range(world):
            expect(f"scatter grad of block {q}", xs[q].grad, full(2, weights[q]))


def inductor_counting(torch, graphs):
    """A torch.compile backend that is Inductor and keeps each graph it was
    given: a test that compiled nothing (dynamo fell back to eager) fails."""
    from torch._dynamo.backends.registry import lookup_backend

    inductor = lookup_backend("inductor")

    def backend(gm, example_inputs):
        graphs.append(gm)
        return inductor(gm, example_inputs)
    return backend


def compiled_functional_collectives(torch, dist, rank, world):
    """Functional collectives in a torch.compile'd function equal the eager result
    and the numbers computed here."""
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def f(x):
        total = funcol.all_reduce(x * 2, "sum", group)           # 2 sum_q x_q
        rows = funcol.all_gather_tensor(total + rank, 0, group)  # row q: 2 sum x + q
        mine = funcol.reduce_scatter_tensor(rows, "sum", 0, group)
        return mine * 3

    n = 2 * world
    x = torch.arange(n, dtype=torch.float32) + rank
    graphs = []
    got = torch.compile(f, backend=inductor_counting(torch, graphs))(x)
    traced = [str(node.target) for g in graphs for node in g.graph.nodes]
    for name in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "wait_tensor"):
        assert any(name in t for t in traced), f"compiled graph has no {name}: {traced}"
    # Every rank gathers the same rows (row q = 2 sum_x + q, n long), so the
    # reduce-scatter sums `world` equal copies and rank r keeps row r.
    sum_x = sum(torch.arange(n, dtype=torch.float32) + q for q in range(world))
    rows = torch.cat([2 * sum_x + q for q in range(world)])
    want = 3 * world * rows[rank * n:(rank + 1) * n]
    assert torch.equal(got, want), f"compiled functional collectives: got {got.tolist()}, " \
                                   f"want {want.tolist()}"
    eager = f(x)
    assert torch.equal(got, eager), f"compiled {got.tolist()} != eager {eager.tolist()}"


def compiled_ddp(torch, dist, rank, world):
    """A torch.compile'd DDP model trains as one process on all ranks' batches."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    # A module of our own: dynamo does not trace a torch.nn.Sequential that
    # is the top frame (torch's own files are skipped), and the "compiled"
    # model would then run eagerly.
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 256)
            self.b = torch.nn.Linear(256, 512)
            self.c = torch.nn.Linear(512, 512)
            self.d = torch.nn.Linear(512, 4)

        def forward(self, x):
            return self.d(torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x)))))))

    def mlp():
        torch.manual_seed(5)
        return MLP()

    model, alone = mlp(), mlp()
    start = flat(torch, alone.parameters())
    # 1 MiB buckets (dynamo's smallest: its first bucket is 1 MiB) over 1.6 MiB
    # of parameters: DDPOptimizer splits the graph in two.
    graphs = []
    compiled = torch.compile(DDP(model, bucket_cap_mb=1), backend=inductor_counting(torch, graphs))
    opt = torch.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9)
    opt_alone = torch.optim.SGD(alone.parameters(), lr=0.1, momentum=0.9)
    rows = 4
    for step in range(4):
        g = torch.Generator().manual_seed(100 + step)
        data, target = torch.randn(world * rows, 8, generator=g), torch.randn(world * rows, 4,
                                                                             generator=g)
        mine = slice(rank * rows, (rank + 1) * rows)
        opt.zero_grad()
        torch.nn.functional.mse_loss(compiled(data[mine]), target[mine]).backward()
        opt.step()
        opt_alone.zero_grad()
        # DDP averages the ranks' gradients of their own mean loss.
        sum(torch.nn.functional.mse_loss(alone(data[q * rows:(q + 1) * rows]),
                                         target[q * rows:(q + 1) * rows])
            for q in range(world)).div(world).backward()
        opt_alone.step()
    assert len(graphs) == 2, \
        f"compiled DDP: {len(graphs)} graphs compiled, expected 2 (one per bucket)"
    want = flat(torch, alone.parameters())
    moved = relative_difference(want, start)
    assert moved > 1e-3, f"training barely moved the weights ({moved:.2e}): vacuous"
    rel = relative_difference(flat(torch, model.parameters()), want)
    assert rel < 1e-5, f"compiled DDP differs from one process by {rel:.2e} relative"


def worker(rank, world, port):
    init_env(rank, world, port)
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # dist.nn's deprecation notes
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=120))
    autograd_collectives(torch, dist, rank, world)
    compiled_functional_collectives(torch, dist, rank, world)
    compiled_ddp(torch, dist, rank, world)
    dist.destroy_process_group()


def main():
    run_worlds("test_autograd_compile", worker, WORLD_SIZES, timeout=240)


if __name__ == "__main__":
    sys.exit(main())
