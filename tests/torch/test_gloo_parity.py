"""What gloo does that real training code relies on, run on coil and on gloo, for 2 and 3 ranks.

Each case runs the same code on a coil group and on a gloo group of the same
ranks and checks both against an independent reference (numbers computed
here, from what every rank contributed). Only coil's failures fail the test:
gloo's own are printed (gloo of torch 2.6 has no reduce_scatter and no AVG,
and its bitwise reduce_scatter_tensor gives wrong values). Covered (issue #13):
  - a future's .then() callback that issues a collective and waits for it
    (PowerSGD's pattern), and DDP training with the PowerSGD comm hook, whose
    parameters must match gloo's;
  - DDP and ZeroRedundancyOptimizer (Adam) under Join with uneven inputs,
    against one process that steps as torch's join hooks do;
  - all_gather_coalesced, with tensors of several dtypes and shapes;
  - all_reduce of sparse COO tensors (sum), of different nnz per rank, one
    rank with none, and with a dense part (hybrid);
  - a barrier that only rank 0 enters times out with an error torch's own
    checks recognise (" Timed out ", DistBackendError), after the timeout;
  - monitored_barrier (coil_torch.monitored_barrier and the process group's
    own method): passes when all arrive, and names the ranks that did not;
  - split_group: a child's ranks in its list's order, its collectives;
  - BAND, BOR and BXOR on integers and bool (all_reduce, reduce_scatter_tensor);
  - reduce_scatter with blocks of different sizes (one of them empty, or one
    much larger than the others);
  - ProcessGroup.allreduce, broadcast and allgather with several tensors per
    process (dense and sparse), and lists whose tensors do not match.

COIL_TORCH_TEST_WORLDS picks the world sizes (default 2,3).
"""
import datetime
import os
import re
import sys
import time
import traceback

from harness import init_env, run_worlds, say, torch_lacks

WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "2,3").split(",")
                    if int(w) >= 2)
TIMEOUT_RE = re.compile(" (Timed out|closed|timeout) ")  # torch's barrier-timeout test


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    failures = []
    gloo_failures = []  # gloo's own, printed but not counted
    checks = [0]

    def failed(backend):
        return gloo_failures if backend == "gloo" else failures

    def check(name, ok, detail=""):
        checks[0] += 1
        if not ok:
            failed("gloo" if "[gloo]" in name else "coil").append(f"{name}: {detail}")

    def expect_equal(name, got, want):
        check(name, got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want),
              f"got {got.flatten()[:6].tolist()} ({got.dtype}, {tuple(got.shape)}), "
              f"want {want.flatten()[:6].tolist()} ({want.dtype}, {tuple(want.shape)})")

    def expect_raises(name, fn, *needles):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            text = str(e)
            missing = [n for n in needles if n not in text]
            check(name, not missing, f"message lacks {missing}: {text!r}")
            return
        check(name, False, "did not raise")

    def case(name, fn):
        for backend, group in (("gloo", gloo), ("coil", None)):
            try:
                fn(f"{name} [{backend}]", group)
            except Exception:  # noqa: BLE001 - collect, keep the ranks in step
                failed(backend).append(f"{name} [{backend}]: raised\n{traceback.format_exc()}")
            # In step again, on the other backend's group: torch 2.6's gloo
            # fails its next barrier with the error of a gloo call that just
            # failed (it has no AVG), on some ranks and not others.
            dist.barrier(group=None if backend == "gloo" else gloo)

    # ---- a .then() callback that runs a collective and waits for it --------------
    def then_collective(name, group):
        a = torch.full((5,), float(rank + 1))
        b = torch.full((3,), float(10 * (rank + 1)))

        def second(fut):
            # As PowerSGD's hook does: a collective inside the callback, waited on.
            dist.all_reduce(b, group=group, async_op=True).get_future().wait()
            return fut.value()[0] + b.sum()

        chained = dist.all_reduce(a, group=group, async_op=True).get_future().then(second)
        got = chained.wait()
        total = sum(range(1, world + 1))
        expect_equal(name + " first", a, torch.full((5,), float(total)))
        expect_equal(name + " second", b, torch.full((3,), float(10 * total)))
        expect_equal(name + " value", got, torch.full((5,), float(total + 30 * total)))
    case(".then() callback waits for a collective", then_collective)

    # ---- DDP with the PowerSGD comm hook ------------------------------------------
    def powersgd_params(group):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
        from torch.nn.parallel import DistributedDataParallel as DDP

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 8))
        ddp = DDP(model, process_group=group)
        state = powerSGD.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                       start_powerSGD_iter=2, random_seed=7)
        ddp.register_comm_hook(state, powerSGD.powerSGD_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(100 + rank)
        for _ in range(5):
            x = torch.randn(8, 16, generator=gen)
            opt.zero_grad()
            ddp(x).pow(2).mean().backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()]

    try:
        with_gloo = powersgd_params(gloo)
        dist.barrier(group=gloo)
        with_coil = powersgd_params(dist.group.WORLD)
        same = all(torch.allclose(g, c, rtol=1e-5, atol=1e-6)
                   for g, c in zip(with_gloo, with_coil))
        check("DDP + PowerSGD hook: coil's parameters equal gloo's", same,
              f"max difference {max((g - c).abs().max().item() for g, c in zip(with_gloo, with_coil))}")
    except Exception:  # noqa: BLE001
        failures.append(f"DDP + PowerSGD hook: raised\n{traceback.format_exc()}")
    dist.barrier(group=gloo)

    # ---- DDP and ZeroRedundancyOptimizer under Join, uneven inputs ---------------
    # Rank r trains 3 + 2r steps. Join shadows a finished rank's all_reduces
    # (zeros), and its ZeRO hook still steps the shard that rank owns, with
    # the gradient it last had, and broadcasts it. The reference is one
    # process doing that: Adam per parameter, on the sum of the active ranks'
    # gradients over the world size (DDP's divide_by_initial_world_size).
    def join_model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(7, 13), torch.nn.ReLU(), torch.nn.Linear(13, 3))

    def join_batch(r, step):
        return torch.randn(4, 7, generator=torch.Generator().manual_seed(1000 * r + step))

    def join_steps(r):
        return 3 + 2 * r

    def joined_reference(owners):
        model = join_model()
        params = list(model.parameters())
        adams = [torch.optim.Adam([p], lr=0.01) for p in params]
        last = [None] * len(params)
        for step in range(join_steps(world - 1)):
            grads = [torch.zeros_like(p) for p in params]
            for r in range(world):
                if step < join_steps(r):
                    model.zero_grad()
                    model(join_batch(r, step)).pow(2).mean().backward()
                    grads = [g + p.grad for g, p in zip(grads, params)]
            for i, p in enumerate(params):
                if step < join_steps(owners[i]):
                    last[i] = grads[i] / world
                p.grad = last[i]
                adams[i].step()
        return params

    def joined_zero_params(name, group):
        from torch.distributed.algorithms.join import Join
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(join_model(), process_group=group)
        zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                       lr=0.01, process_group=group)
        with Join([ddp, zero]):
            for step in range(join_steps(rank)):
                zero.zero_grad()
                ddp(join_batch(rank, step)).pow(2).mean().backward()
                zero.step()
        zero.consolidate_state_dict(to=0)
        got = [p.detach().clone() for p in ddp.parameters()]
        owners = [zero._param_to_rank[p] for p in ddp.parameters()]
        check(name + " every rank owns a shard", sorted(set(owners)) == list(range(world)),
              f"owners {owners}")
        want = joined_reference(owners)
        worst = max((a - b).abs().max().item() for a, b in zip(got, want))
        check(name + " matches the one-process reference", worst < 1e-5, f"max difference {worst}")
        if rank == 0:
            state = zero.state_dict()["state"]
            check(name + " consolidated state", len(state) == len(got),
                  f"{len(state)} states for {len(got)} parameters")
    case("DDP + ZeroRedundancyOptimizer under Join", joined_zero_params)

    # ---- all_gather_coalesced -----------------------------------------------------
    # (torch refuses a list of mixed dtypes before the backend sees it.)
    def contribution(r, dtype):
        return [torch.arange(5).to(dtype) + 10 * r,
                torch.full((2, 3), r - 7).to(dtype),
                torch.zeros(0, dtype=dtype),
                torch.tensor([r % 2]).to(dtype)]

    def gather_coalesced(dtype):
        def run(name, group):
            inputs = contribution(rank, dtype)
            outputs = [[torch.empty_like(t) for t in inputs] for _ in range(world)]
            dist.all_gather_coalesced(outputs, inputs, group=group)
            for r in range(world):
                for i, want in enumerate(contribution(r, dtype)):
                    expect_equal(f"{name} rank {r} tensor {i}", outputs[r][i], want)
        return run
    case("all_gather_coalesced float32", gather_coalesced(torch.float32))
    case("all_gather_coalesced int64", gather_coalesced(torch.int64))

    # ---- bitwise reductions (BAND, BOR, BXOR) on integers and bool ----------------
    def bits_of(r, dtype):
        g = torch.Generator().manual_seed(31 * r + 5)
        if dtype == torch.bool:
            return torch.randint(0, 2, (37,), generator=g).to(torch.bool)
        return torch.randint(-2**31, 2**31, (37,), generator=g).to(dtype)

    def bitwise(op, dtype):
        fn = {dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
              dist.ReduceOp.BXOR: torch.bitwise_xor}[op]

        def run(name, group):
            want = bits_of(0, dtype)
            for r in range(1, world):
                want = fn(want, bits_of(r, dtype))
            got = bits_of(rank, dtype)
            dist.all_reduce(got, op=op, group=group)
            expect_equal(f"{name} all_reduce", got, want)
            # reduce_scatter_tensor: rank r gets block r of the same reduction.
            blocks = torch.cat([bits_of(rank, dtype)] * world)
            out = torch.empty(37, dtype=dtype)
            dist.reduce_scatter_tensor(out, blocks, op=op, group=group)
            expect_equal(f"{name} reduce_scatter_tensor", out, want)
        return run
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        for dtype in (torch.int32, torch.int64, torch.uint8, torch.bool):
            case(f"{op} {dtype}", bitwise(op, dtype))

    # ---- reduce_scatter with blocks of different sizes ----------------------------
    # Block r goes to rank r. Near-equal sizes take coil's padded
    # reduce-scatter, one large block (3+ ranks) its all-reduce; an empty block too.
    def block_of(src, dst, numel, dtype):
        g = torch.Generator().manual_seed(1000 * src + dst)
        return torch.randint(-50, 50, (numel,), generator=g).to(dtype)

    def uneven(sizes, op, dtype):
        fn = {dist.ReduceOp.SUM: torch.add, dist.ReduceOp.MAX: torch.maximum,
              dist.ReduceOp.BXOR: torch.bitwise_xor}[op]

        def run(name, group):
            want = block_of(0, rank, sizes[rank], dtype)
            for src in range(1, world):
                want = fn(want, block_of(src, rank, sizes[rank], dtype))
            out = torch.full((sizes[rank],), 7, dtype=dtype)
            ins = [block_of(rank, dst, sizes[dst], dtype) for dst in range(world)]
            dist.reduce_scatter(out, ins, op=op, group=group)
            expect_equal(name, out, want)
        return run
    for sizes in ([5 + r for r in range(world)], [1000] + [1] * (world - 1),
                  [0] + [3] * (world - 1)):
        for op, dtype in ((dist.ReduceOp.SUM, torch.float32), (dist.ReduceOp.MAX, torch.int64),
                          (dist.ReduceOp.BXOR, torch.int32)):
            case(f"reduce_scatter sizes {sizes} {op} {dtype}", uneven(sizes, op, dtype))

    # ---- sparse all_reduce (sum) --------------------------------------------------
    def sparse_input(r, hybrid):
        # Rank r holds rows/points r, r+1, ..., with values from r; the last
        # rank holds nothing (nnz 0); indices overlap between ranks.
        nnz = 0 if r == world - 1 else r + 2
        idx = torch.tensor([[(r + k) % 6 for k in range(nnz)],
                            [(2 * k) % 4 for k in range(nnz)]], dtype=torch.int64)
        if hybrid:
            vals = torch.stack([torch.arange(3, dtype=torch.float32) + r + k for k in range(nnz)]) \
                if nnz else torch.zeros(0, 3)
            return torch.sparse_coo_tensor(idx, vals, (6, 4, 3))
        vals = torch.tensor([float(r + 1 + k) for k in range(nnz)])
        return torch.sparse_coo_tensor(idx, vals, (6, 4))

    def sparse_sum(hybrid):
        def run(name, group):
            t = sparse_input(rank, hybrid)
            dist.all_reduce(t, group=group)
            want = sum(sparse_input(r, hybrid).to_dense() for r in range(world))
            check(name + " is sparse", t.is_sparse, f"layout {t.layout}")
            expect_equal(name, t.to_dense(), want)
        return run
    case("sparse all_reduce", sparse_sum(False))
    case("sparse all_reduce, hybrid (dense part)", sparse_sum(True))

    # ---- one process, several tensors (the legacy per-device lists) ---------------
    # ProcessGroup.allreduce/broadcast/allgather with a list of k tensors of one
    # dtype and shape, as gloo runs them: the reduction over all ranks and all k
    # entries lands in every entry; broadcast copies the root's entry
    # rootTensor into every entry of every rank; allgather fills each output
    # list with every rank's k inputs, rank after rank.
    def entry(r, i, dtype):
        g = torch.Generator().manual_seed(97 * r + i)
        return torch.randint(1, 9, (2, 3), generator=g).to(dtype)

    def list_allreduce(k, op, dtype):
        fn = {dist.ReduceOp.SUM: torch.add, dist.ReduceOp.AVG: torch.add,
              dist.ReduceOp.PRODUCT: torch.mul, dist.ReduceOp.MIN: torch.minimum,
              dist.ReduceOp.MAX: torch.maximum, dist.ReduceOp.BXOR: torch.bitwise_xor}[op]

        def run(name, group):
            pg = group if group is not None else dist.group.WORLD
            want = entry(0, 0, dtype)
            for r in range(world):
                for i in range(k):
                    if (r, i) != (0, 0):
                        want = fn(want, entry(r, i, dtype))
            if op == dist.ReduceOp.AVG:
                want = want / world
            tensors = [entry(rank, i, dtype) for i in range(k)]
            opts = dist.AllreduceOptions()
            opts.reduceOp = op
            pg.allreduce(tensors, opts).wait()
            # gloo divides only entry 0 for AVG and leaves the others summed;
            # coil gives every entry the average.
            for i, t in enumerate(tensors if op != dist.ReduceOp.AVG or group is None
                                  else tensors[:1]):
                expect_equal(f"{name} entry {i}", t, want)
        return run
    for k in (1, 2, 3):
        for op, dtype in ((dist.ReduceOp.SUM, torch.float32), (dist.ReduceOp.MAX, torch.int64),
                          (dist.ReduceOp.PRODUCT, torch.int64), (dist.ReduceOp.MIN, torch.int32),
                          (dist.ReduceOp.BXOR, torch.int32), (dist.ReduceOp.AVG, torch.float64)):
            case(f"ProcessGroup.allreduce of {k} tensors {op} {dtype}", list_allreduce(k, op, dtype))

    def list_broadcast(k, root_tensor, dtype):
        def run(name, group):
            pg = group if group is not None else dist.group.WORLD
            tensors = [entry(rank, i, dtype) for i in range(k)]
            opts = dist.BroadcastOptions()
            opts.rootRank = world - 1
            opts.rootTensor = root_tensor
            pg.broadcast(tensors, opts).wait()
            for i, t in enumerate(tensors):
                expect_equal(f"{name} entry {i}", t, entry(world - 1, root_tensor, dtype))
        return run
    case("ProcessGroup.broadcast of 3 tensors, rootTensor 0", list_broadcast(3, 0, torch.float32))
    case("ProcessGroup.broadcast of 3 tensors, rootTensor 2", list_broadcast(3, 2, torch.int64))
    case("ProcessGroup.broadcast of 2 tensors, bfloat16", list_broadcast(2, 1, torch.bfloat16))

    def list_allgather(k, dtype):
        def run(name, group):
            pg = group if group is not None else dist.group.WORLD
            inputs = [entry(rank, i, dtype) for i in range(k)]
            outputs = [[torch.zeros(2, 3, dtype=dtype) for _ in range(k * world)]
                       for _ in range(k)]
            pg.allgather(outputs, inputs).wait()
            for j, out in enumerate(outputs):
                for n, t in enumerate(out):
                    expect_equal(f"{name} output {j}[{n}]", t, entry(n // k, n % k, dtype))
        return run
    case("ProcessGroup.allgather of 2 tensors", list_allgather(2, torch.float32))
    case("ProcessGroup.allgather of 3 tensors, uint8", list_allgather(3, torch.uint8))

    def list_sparse(name, group):
        pg = group if group is not None else dist.group.WORLD
        tensors = [sparse_input(rank, False), sparse_input((rank + 1) % world, False)]
        pg.allreduce(tensors).wait()
        want = 2 * sum(sparse_input(r, False).to_dense() for r in range(world))
        for i, t in enumerate(tensors):
            check(f"{name} entry {i} is sparse", t.is_sparse, f"layout {t.layout}")
            expect_equal(f"{name} entry {i}", t.to_dense(), want)
    case("ProcessGroup.allreduce of 2 sparse tensors", list_sparse)

    def list_mismatch(name, group):
        pg = group if group is not None else dist.group.WORLD
        expect_raises(name + ", sizes differ",
                      lambda: pg.allreduce([torch.ones(3), torch.ones(4)]).wait(), "")
        expect_raises(name + ", dtypes differ",
                      lambda: pg.allreduce([torch.ones(3), torch.ones(3, dtype=torch.int32)]).wait(),
                      "")
        opts = dist.BroadcastOptions()
        opts.rootTensor = 2
        expect_raises(name + ", rootTensor out of range",
                      lambda: pg.broadcast([torch.ones(3), torch.ones(3)], opts).wait(), "")
    case("ProcessGroup lists that do not match", list_mismatch)

    # ---- split_group ----------------------------------------------------------------
    def split(name, group):
        # The odd ranks, last first, and the even ones: a child's ranks follow its list.
        odd = [r for r in range(world) if r % 2][::-1]
        even = [r for r in range(world) if r % 2 == 0]
        child = dist.split_group(parent_pg=group, split_ranks=[odd, even])
        mine = odd if rank in odd else even
        check(name + " rank", dist.get_rank(child) == mine.index(rank),
              f"rank {dist.get_rank(child)} in {mine}")
        check(name + " size", dist.get_world_size(child) == len(mine), dist.get_world_size(child))
        got = [torch.zeros(2) for _ in mine]
        dist.all_gather(got, torch.tensor([float(rank), 1.0]), group=child)
        check(name + " all_gather in the list's order",
              [g[0].item() for g in got] == [float(r) for r in mine], [g.tolist() for g in got])
        x = torch.tensor([float(10 ** rank)])
        dist.all_reduce(x, group=child)
        expect_equal(name + " all_reduce", x, torch.tensor([float(sum(10 ** r for r in mine))]))
    lacking = torch_lacks("split cpu groups")
    if lacking:
        if rank == 0:
            say(f"split_group left out: {lacking}")
    else:
        case("split_group", split)

    # ---- a barrier only rank 0 enters times out, recognisably --------------------
    def lonely_barrier(backend):
        group = dist.new_group(backend=backend, timeout=datetime.timedelta(seconds=2))
        if rank == 0:
            start = time.monotonic()
            try:
                dist.barrier(group=group)
                check(f"lonely barrier [{backend}]", False, "did not raise")
            except Exception as e:  # noqa: BLE001
                took = time.monotonic() - start
                # gloo raises a plain RuntimeError; coil its subclass DistBackendError.
                check(f"lonely barrier [{backend}] type", isinstance(e, RuntimeError),
                      f"raised {type(e).__name__}: {e}")
                check(f"lonely barrier [{backend}] text", TIMEOUT_RE.search(str(e)) is not None,
                      f"{str(e)!r} does not match {TIMEOUT_RE.pattern!r}")
                check(f"lonely barrier [{backend}] waited the timeout", took >= 1.9,
                      f"raised after {took:.2f} s")
        dist.barrier(group=gloo)
    for backend in ("gloo", "coil"):
        try:
            lonely_barrier(backend)
        except Exception:  # noqa: BLE001
            failed(backend).append(f"lonely barrier [{backend}]: raised\n{traceback.format_exc()}")

    # ---- monitored_barrier ----------------------------------------------------------
    short = datetime.timedelta(seconds=1)
    try:
        coil_torch.monitored_barrier()
        coil_torch.monitored_barrier(timeout=short, wait_all_ranks=True)
        dist.group.WORLD.monitored_barrier(short, wait_all_ranks=False)
        try:  # torch 2.15 lets any CPU backend serve it; older ones only gloo
            dist.monitored_barrier(timeout=short)
        except ValueError as e:
            say(f"rank {rank}: dist.monitored_barrier refuses coil in this torch: {e}")
        checks[0] += 1
        # Ranks 1.. stay away (each scenario on a fresh group: the ranks that
        # skipped a barrier are one behind).
        group = dist.new_group(backend="coil")
        if rank == 0:
            expect_raises("monitored_barrier names the absent rank",
                          lambda: coil_torch.monitored_barrier(group, short),
                          "Rank 1 failed to pass monitoredBarrier in 1000 ms")
        dist.barrier(group=gloo)
        group = dist.new_group(backend="coil")
        absent = ", ".join(str(r) for r in range(1, world))
        if rank == 0:
            expect_raises("monitored_barrier, wait_all_ranks, names every absent rank",
                          lambda: coil_torch.monitored_barrier(group, short, wait_all_ranks=True),
                          f"{'Ranks' if world > 2 else 'Rank'} {absent} failed to pass "
                          "monitoredBarrier in 1000 ms")
        dist.barrier(group=gloo)
        # Rank 0 stays away: the others are told rank 0 did not answer.
        group = dist.new_group(backend="coil")
        if rank != 0:
            expect_raises("monitored_barrier without rank 0",
                          lambda: coil_torch.monitored_barrier(group, short),
                          f"Rank {rank} successfully reached monitoredBarrier, but received "
                          "errors while waiting for send/recv from rank 0")
        dist.barrier(group=gloo)
        # Rank 0's own time runs out before it has seen the others.
        group = dist.new_group(backend="coil")
        if rank == 0:
            expect_raises("monitored_barrier, timeout 0",
                          lambda: group.monitored_barrier(datetime.timedelta(seconds=0)),
                          "Rank 0 timed out in monitoredBarrier")
        dist.barrier(group=gloo)
        coil_torch.monitored_barrier(gloo, short)  # a gloo group: torch's own
    except Exception:  # noqa: BLE001
        failures.append(f"monitored_barrier: raised\n{traceback.format_exc()}")
    dist.barrier(group=gloo)

    dist.destroy_process_group()
    say(f"rank {rank}/{world}: {checks[0]} checks, {len(failures)} failures")
    if gloo_failures:
        say(f"rank {rank}/{world}: gloo itself failed {len(gloo_failures)} checks (not counted), "
            f"the first: {gloo_failures[0].splitlines()[0][:200]}")
    if failures:
        raise AssertionError(f"{len(failures)} failed checks:\n" + "\n".join(failures))


def main():
    run_worlds("test_gloo_parity", worker, WORLD_SIZES, timeout=180)


if __name__ == "__main__":
    sys.exit(main())
