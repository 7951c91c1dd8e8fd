"""CUDA tensors through the coil backend, with ProcessGroupNCCL's stream rules.

Ranks are processes sharing the machine's GPUs (rank % device count: several
ranks on one GPU, which NCCL refuses and coil allows). Checked:
  - every collective on CUDA tensors, dtypes x ops, against a reference
    computed on the CPU from every rank's inputs (each rank regenerates them);
  - the stream pattern: a call returns while the current stream is still busy
    (a long kernel before it), reads what that stream wrote before the call,
    and work.wait() orders the current stream after it; the future is
    CUDA-aware (its value is ready for the stream that waits on it);
  - collectives in a coalesced batch (torch's coalescing manager, and
    startCoalescing/endCoalescing around single calls);
  - CPU and CUDA operations interleaved on one group keep program order;
  - DDP on a CUDA model gives the gradients of an all-reduce average;
  - FSDP2 (fully_shard) on a CUDA model trains as one process on the whole
    batch does;
  - bitwise ops on integers, reduce_scatter with blocks of different sizes,
    all_reduce of a sparse COO tensor (reduced on the host, as gloo), and
    ProcessGroup.allreduce/broadcast/allgather with several tensors per rank;
  - point-to-point on CUDA tensors (staged in pinned host memory): send/recv
    of dtypes x sizes, non-contiguous, from any source, in the streams'
    order, batch_isend_irecv, CPU and CUDA on one link, a receive of the
    wrong size, and a pipeline whose stages pass activations and gradients.

Exits 77 (skipped) with the reason where torch sees no CUDA device, unless
COIL_TORCH_TEST_DEVICE=cpu runs the same body on CPU tensors. CUDA
tensors need no setting (COIL_TORCH_CUDA=0 would refuse them): this test
runs the default.
COIL_TORCH_TEST_WORLDS=1,2 picks the world sizes (default 1,2,4).
"""
import datetime
import os
import sys
import time

from harness import SKIP, init_env, require_coil_torch, run_worlds, say, torch_lacks

# COIL_TORCH_TEST_DEVICE=cpu runs the same body on CPU tensors (CI, every
# run: the checks themselves are checked, and the CPU path takes the same
# calls); the stream-only assertions then hold trivially or are skipped.
ON_CPU = os.environ.get("COIL_TORCH_TEST_DEVICE") == "cpu"
WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "1,2,4").split(","))
COUNTS = (0, 1, 7, 1009, 65537)


def values(torch, rank, seed, n, dtype):
    """Small integers (exact in every dtype here, sums included) for (rank, seed)."""
    g = torch.Generator().manual_seed(7919 * seed + 104729 * rank + 3)
    lo, hi = (0, 3) if dtype in (torch.uint8,) else (-4, 5)
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dtype)


def worker(rank, world, port):
    init_env(rank, world, port)
    os.environ.pop("COIL_TORCH_CUDA", None)  # the default: accepted
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401 - registers "coil"

    if ON_CPU:
        dev = torch.device("cpu")
    else:
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)

    def synchronize():
        if not ON_CPU:
            torch.cuda.synchronize()

    def busy_stream(cycles):
        """A kernel of about `cycles` GPU clocks on the current stream."""
        if not ON_CPU:
            torch.cuda._sleep(cycles)
    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    R = dist.ReduceOp
    failures = []
    checks = [0]

    def expect_equal(name, got, want):
        checks[0] += 1
        got = got.cpu()
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            failures.append(f"{name}: got {got.flatten()[:6].tolist()} want "
                            f"{want.flatten()[:6].tolist()} ({got.dtype}/{want.dtype})")

    # Inputs move with .to(dev, copy=True): on the CPU (ON_CPU) a plain .to
    # would hand back the reference's own tensor for the call to overwrite.
    def everyone(seed, n, dtype):
        return [values(torch, r, seed, n, dtype) for r in range(world)]

    reduce_ref = {
        R.SUM: lambda xs: sum(x.double() for x in xs),
        R.PRODUCT: lambda xs: torch.stack([x.double() for x in xs]).prod(0),
        R.MAX: lambda xs: torch.stack([x.double() for x in xs]).max(0).values,
        R.MIN: lambda xs: torch.stack([x.double() for x in xs]).min(0).values,
    }

    # ---- all_reduce: dtypes x ops x counts, in place ---------------------------
    seed = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                  torch.int64, torch.uint8, torch.int8):
        for op in (R.SUM, R.PRODUCT, R.MAX, R.MIN):
            for n in COUNTS:
                seed += 1
                xs = everyone(seed, n, dtype)
                if op == R.PRODUCT:  # keep products small: values in {-1, 1, 2}
                    xs = [torch.where(x.abs() > 1, torch.ones_like(x), x) for x in xs]
                    xs = [torch.where(x == 0, torch.full_like(x, 2), x) for x in xs]
                t = xs[rank].to(dev, copy=True)
                dist.all_reduce(t, op=op)
                expect_equal(f"all_reduce {dtype} {op} n={n}", t, reduce_ref[op](xs).to(dtype))
    for dtype in (torch.float32, torch.bfloat16):
        seed += 1
        xs = [x * world for x in everyone(seed, 1009, dtype)]  # divisible: exact averages
        t = xs[rank].to(dev, copy=True)
        dist.all_reduce(t, op=R.AVG)
        expect_equal(f"all_reduce AVG {dtype}", t, (sum(x.double() for x in xs) / world).to(dtype))

    # ---- the other collectives -------------------------------------------------
    for n in (0, 1, 1031):
        seed += 1
        xs = everyone(seed, n, torch.float32)
        for root in range(world):
            t = xs[rank].to(dev, copy=True)
            dist.broadcast(t, src=root)
            expect_equal(f"broadcast root {root} n={n}", t, xs[root])
            t = xs[rank].to(dev, copy=True)
            dist.reduce(t, dst=root, op=R.SUM)
            if rank == root:
                expect_equal(f"reduce root {root} n={n}", t, reduce_ref[R.SUM](xs).float())
        out = torch.empty(world * n, device=dev)
        dist.all_gather_into_tensor(out, xs[rank].to(dev, copy=True))
        expect_equal(f"all_gather_into_tensor n={n}", out, torch.cat(xs))
        outs = [torch.full((n,), -1.0, device=dev) for _ in range(world)]
        dist.all_gather(outs, xs[rank].to(dev, copy=True))
        for r in range(world):
            expect_equal(f"all_gather [{r}] n={n}", outs[r], xs[r])
        big = everyone(seed + 1000, world * n, torch.float32)
        out = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(out, big[rank].to(dev, copy=True), op=R.SUM)
        expect_equal(f"reduce_scatter_tensor n={n}", out,
                     reduce_ref[R.SUM](big).float()[rank * n:(rank + 1) * n])
        out = torch.empty(world * n, device=dev)
        dist.all_to_all_single(out, big[rank].to(dev, copy=True))
        want = torch.cat([big[r][rank * n:(rank + 1) * n] for r in range(world)])
        expect_equal(f"all_to_all_single n={n}", out, want)
        gathered = [torch.empty(n, device=dev) for _ in range(world)] if rank == 0 else None
        dist.gather(xs[rank].to(dev, copy=True), gathered, dst=0)
        if rank == 0:
            for r in range(world):
                expect_equal(f"gather [{r}] n={n}", gathered[r], xs[r])
        got = torch.empty(n, device=dev)
        dist.scatter(got, [x.to(dev, copy=True) for x in xs] if rank == 0 else None, src=0)
        expect_equal(f"scatter n={n}", got, xs[rank])
    # Bitwise ops on integers (the GPU's kernels, when the data is on one).
    for dtype in (torch.int32, torch.int64, torch.uint8):
        for op, fn in ((R.BAND, torch.bitwise_and), (R.BOR, torch.bitwise_or),
                       (R.BXOR, torch.bitwise_xor)):
            seed += 1
            xs = [values(torch, r, seed, 1031, torch.int64) * (1 + 37 * r) for r in range(world)]
            want = xs[0]
            for x in xs[1:]:
                want = fn(want, x)
            t = xs[rank].to(dtype).to(dev, copy=True)
            dist.all_reduce(t, op=op)
            expect_equal(f"all_reduce {dtype} {op}", t, want.to(dtype))
    # reduce_scatter with blocks of different sizes (as gloo allows).
    seed += 1
    for sizes in ([3 + r for r in range(world)], [2000] + [1] * (world - 1)):
        blocks = [everyone(seed + 10 * d, sizes[d], torch.float32) for d in range(world)]
        out = torch.full((sizes[rank],), -1.0, device=dev)
        dist.reduce_scatter(out, [blocks[d][rank].to(dev, copy=True) for d in range(world)])
        expect_equal(f"reduce_scatter sizes {sizes}", out, reduce_ref[R.SUM](blocks[rank]).float())
    # A sparse tensor (COO, SUM): gloo reduces a CUDA one on the host; so does coil.
    seed += 1
    dense = [values(torch, r, seed, 6 * 4, torch.float32).view(6, 4) for r in range(world)]
    for r in range(world):
        dense[r][r % 6] = 0  # different zeros per rank, so different nnz
    t = dense[rank].to_sparse().to(dev)
    dist.all_reduce(t)
    checks[0] += 1
    if t.device != dev or not t.is_sparse:
        failures.append(f"sparse all_reduce: the result is {t.layout} on {t.device}")
    expect_equal("sparse all_reduce", t.to_dense(), sum(dense))

    # Several tensors per process (ProcessGroup's legacy lists), all on one
    # device: combined on the side stream, then one all-reduce; broadcast and
    # allgather fill every entry.
    seed += 1
    pg = dist.group.WORLD
    xs = [[values(torch, r, seed + i, 513, torch.float32) for i in range(3)] for r in range(world)]
    ts = [x.to(dev, copy=True) for x in xs[rank]]
    pg.allreduce(ts).wait()
    for i, t in enumerate(ts):
        expect_equal(f"ProcessGroup.allreduce of 3 tensors, entry {i}", t,
                     sum(sum(per_rank) for per_rank in xs))
    ts = [x.to(dev, copy=True) for x in xs[rank]]
    opts = dist.BroadcastOptions()
    opts.rootRank, opts.rootTensor = world - 1, 1
    pg.broadcast(ts, opts).wait()
    for i, t in enumerate(ts):
        expect_equal(f"ProcessGroup.broadcast of 3 tensors, entry {i}", t, xs[world - 1][1])
    outs = [[torch.empty(513, device=dev) for _ in range(2 * world)] for _ in range(2)]
    pg.allgather(outs, [x.to(dev, copy=True) for x in xs[rank][:2]]).wait()
    for j, out in enumerate(outs):
        for n, t in enumerate(out):
            expect_equal(f"ProcessGroup.allgather of 2 tensors, output {j}[{n}]", t,
                         xs[n // 2][n % 2])

    # A non-contiguous CUDA tensor: staged through a contiguous copy and back.
    seed += 1
    m = values(torch, rank, seed, 64 * 6, torch.float32).view(64, 6)
    t = m.to(dev, copy=True).t()
    dist.all_reduce(t)
    want = sum(values(torch, r, seed, 64 * 6, torch.float32).view(64, 6) for r in range(world)).t()
    expect_equal("all_reduce of a transposed tensor", t, want.contiguous())

    # ---- the stream pattern ----------------------------------------------------
    # A long kernel on the current stream, then a write of the input on it,
    # then the call: the call returns before the kernel ends, and the result
    # uses the written input.
    n = 1 << 20
    x = torch.zeros(n, device=dev)
    synchronize()
    busy_stream(200_000_000)  # ~0.1 s of GPU time on the current stream
    x.fill_(rank + 1)
    t0 = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    returned_after = time.monotonic() - t0
    busy = not work.is_completed()
    checks[0] += 1
    if not busy and not ON_CPU:  # (a CPU call has run when it returns)
        failures.append("async all_reduce was complete while the stream before it was still busy")
    work.wait()  # the current stream waits; the host does not
    y = x * 2  # on the current stream, after the collective
    synchronize()
    expect_equal("all_reduce after a busy stream", x, torch.full((n,), world * (world + 1) / 2))
    expect_equal("work after wait() on the current stream", y,
                 torch.full((n,), float(world * (world + 1))))
    checks[0] += 1
    if not work.is_completed():
        failures.append("work not completed after the stream ran it")
    say(f"rank {rank}: all_reduce returned after {returned_after * 1e3:.1f} ms with the "
        f"stream busy")
    # The future: CUDA-aware, its value ready for the stream that waits on it.
    x = torch.full((4099,), float(rank), device=dev)
    fut = dist.all_reduce(x, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    expect_equal("future value", fut.wait()[0], torch.full((4099,), float(sum(range(world)))))
    expect_equal("future .then", doubled.wait(), torch.full((4099,), 2.0 * sum(range(world))))

    # ---- collectives in a coalesced batch -------------------------------------
    # torch's coalescing manager (the fast path: one *_coalesced call), and
    # startCoalescing/endCoalescing around single calls, where a tensor
    # written on the stream after the first call is read by a later one.
    seed += 1
    xs, ys = everyone(seed, 1031, torch.float32), everyone(seed + 1, 7, torch.float32)
    a, b = xs[rank].to(dev, copy=True), ys[rank].to(dev, copy=True)
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    expect_equal("coalescing manager all_reduce a", a, reduce_ref[R.SUM](xs).float())
    expect_equal("coalescing manager all_reduce b", b, reduce_ref[R.SUM](ys).float())
    big = everyone(seed + 2, world * 33, torch.float32)
    gathered, scattered = torch.zeros(world * 33, device=dev), torch.zeros(33, device=dev)
    with dist._coalescing_manager(device=dev):
        dist.reduce_scatter_tensor(scattered, big[rank].to(dev, copy=True))
    with dist._coalescing_manager(device=dev):
        dist.all_gather_into_tensor(gathered, scattered)
    expect_equal("coalescing manager reduce_scatter then all_gather", gathered,
                 reduce_ref[R.SUM](big).float())
    pg = dist.group.WORLD
    a, b = torch.full((4097,), float(rank), device=dev), torch.zeros(5, device=dev)
    pg._start_coalescing(dev)
    dist.all_reduce(a, async_op=True)  # (a blocking call in an open batch raises)
    busy_stream(50_000_000)  # b is written on the stream well after that call
    b.fill_(rank + 1)
    dist.all_reduce(b, async_op=True)
    pg._end_coalescing(dev).wait()
    twice = b * 2  # on the current stream, after the batch
    expect_equal("batch all_reduce a", a, torch.full((4097,), float(sum(range(world)))))
    expect_equal("batch all_reduce of a tensor written after the first call", b,
                 torch.full((5,), world * (world + 1) / 2))
    expect_equal("after the batch on the current stream", twice,
                 torch.full((5,), float(world * (world + 1))))

    # ---- CPU and CUDA operations on one group keep program order ---------------
    for i in range(5):
        a = torch.full((513,), float(i + rank), device=dev)
        b = torch.full((257,), float(i * rank))
        dist.all_reduce(a)
        dist.all_reduce(b)
        expect_equal(f"mixed round {i} cuda", a,
                     torch.full((513,), float(sum(i + r for r in range(world)))))
        expect_equal(f"mixed round {i} cpu", b,
                     torch.full((257,), float(sum(i * r for r in range(world)))))
    dist.barrier()

    # ---- DDP on a CUDA model ---------------------------------------------------
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8)).to(dev)
    reference = [p.detach().clone() for p in model.parameters()]
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    device_ids=None if ON_CPU else [dev.index],
                                                    bucket_cap_mb=0.001)
    g = torch.Generator().manual_seed(1234 + rank)
    inputs = [torch.randn(16, 32, generator=g) for _ in range(world)]
    ddp(inputs[0].to(dev, copy=True)).sum().backward()
    grads = [p.grad.detach().cpu() for p in ddp.parameters()]
    # Reference: each rank's gradients from the same weights, averaged here.
    local = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    with torch.no_grad():
        for p, w in zip(local.parameters(), reference):
            p.copy_(w.cpu())
    per_rank = []
    for r in range(world):
        local.zero_grad()
        gr = torch.Generator().manual_seed(1234 + r)
        local(torch.randn(16, 32, generator=gr)).sum().backward()
        per_rank.append([p.grad.detach().clone() for p in local.parameters()])
    for i, got in enumerate(grads):
        want = sum(pr[i] for pr in per_rank) / world
        checks[0] += 1
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            failures.append(f"DDP grad {i}: max diff {(got - want).abs().max().item()}")

    # ---- FSDP2 (fully_shard) on a CUDA model -----------------------------------
    lacking = torch_lacks("fsdp2 on cpu") if ON_CPU else None
    if lacking and rank == 0:
        say(f"FSDP2 left out: {lacking}")
    if not lacking:
        # all_gather_into_tensor and reduce_scatter_tensor from FSDP's own
        # streams, waited on with work.wait(); 4 SGD steps, each rank on its
        # share of the batch, against the whole batch trained in one process on
        # the CPU (what data parallelism must reproduce).
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:  # torch before 2.6
            from torch.distributed._composable.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh

        def mlp():
            torch.manual_seed(1234)
            return torch.nn.Sequential(torch.nn.Linear(37, 61), torch.nn.ReLU(),
                                       torch.nn.Linear(61, 7))

        def steps():
            g = torch.Generator().manual_seed(777)
            for _ in range(4):
                yield torch.randn(world * 6, 37, generator=g), torch.randn(world * 6, 7, generator=g)

        sharded = mlp().to(dev)
        mesh = init_device_mesh(dev.type, (world,))
        for layer in sharded:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(sharded, mesh=mesh)
        alone = mlp()
        opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (sharded, alone)]
        for x, y in steps():
            for o in opts:
                o.zero_grad()
            mine = slice(rank * 6, (rank + 1) * 6)
            out = sharded(x[mine].to(dev, copy=True))
            torch.nn.functional.mse_loss(out, y[mine].to(dev, copy=True)).backward()
            torch.nn.functional.mse_loss(alone(x), y).backward()
            for o in opts:
                o.step()
        got = torch.cat([p.full_tensor().detach().cpu().reshape(-1) for p in sharded.parameters()])
        want = torch.cat([p.detach().reshape(-1) for p in alone.parameters()])
        start = torch.cat([p.detach().reshape(-1) for p in mlp().parameters()])
        checks[0] += 1
        off = ((got - want).norm() / want.norm()).item()
        if off > 1e-4 or torch.equal(want, start):
            failures.append(f"FSDP2 on CUDA: {off:.2e} relative from one-process training "
                            f"(> 1e-4), or training did not move the weights")

    # ---- point-to-point on CUDA tensors (through pinned host memory) ----------
    if world > 1:
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            for n in (0, 1, 1009, 1 << 20):
                seed += 1
                mine = values(torch, rank, seed, n, dtype)
                got = torch.full((n,), 7, dtype=dtype, device=dev)
                # Blocking send first on every rank: sends are eager, so this
                # ring cannot deadlock.
                dist.send(mine.to(dev, copy=True), dst=nxt, tag=n % 97)
                dist.recv(got, src=prv, tag=n % 97)
                expect_equal(f"send/recv {dtype} n={n}", got, values(torch, prv, seed, n, dtype))
        # Non-contiguous on both ends, and recv from any source.
        seed += 1
        m = values(torch, rank, seed, 48 * 5, torch.float32).view(48, 5)
        work = dist.isend(m.to(dev, copy=True).t(), dst=nxt)
        got = torch.zeros(48, 5, device=dev).t()
        src = dist.recv(got, tag=0)  # any source: only prv sends to this rank
        work.wait()
        checks[0] += 1
        if src != prv:
            failures.append(f"recv from any source said rank {src}, the sender was {prv}")
        expect_equal("send/recv of transposed tensors", got,
                     values(torch, prv, seed, 48 * 5, torch.float32).view(48, 5).t().contiguous())
        # Stream order: the send reads the tensor as the current stream leaves
        # it (a long kernel, then a fill); the receiver's stream sees the data
        # after wait() without a host synchronization in between.
        n = 1 << 18
        x = torch.zeros(n, device=dev)
        synchronize()
        busy_stream(100_000_000)
        x.fill_(rank + 1)
        send_work = dist.isend(x, dst=nxt, tag=5)
        got = torch.zeros(n, device=dev)
        recv_work = dist.irecv(got, src=prv, tag=5)
        recv_work.wait()
        doubled = got * 2
        send_work.wait()
        synchronize()
        expect_equal("isend after a busy stream", got, torch.full((n,), float(prv + 1)))
        expect_equal("irecv then the current stream", doubled, torch.full((n,), 2.0 * (prv + 1)))
        # batch_isend_irecv: both neighbours, both ways (two operations on one
        # peer when world is 2), CPU and CUDA messages on one link in order.
        seed += 1
        a = values(torch, rank, seed, 3001, torch.float32)
        b = values(torch, rank, seed + 1, 17, torch.int32)
        from_prv = torch.zeros(3001, device=dev)
        from_nxt = torch.zeros(17, dtype=torch.int32, device=dev)
        cpu_from_prv = torch.zeros(5, dtype=torch.int64)
        ops = [dist.P2POp(dist.isend, a.to(dev, copy=True), nxt),
               dist.P2POp(dist.isend, b.to(dev, copy=True), prv),
               dist.P2POp(dist.irecv, from_prv, prv), dist.P2POp(dist.irecv, from_nxt, nxt)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        dist.send(torch.arange(5) + rank, dst=nxt, tag=9)
        dist.recv(cpu_from_prv, src=prv, tag=9)
        expect_equal("batch_isend_irecv from prv", from_prv,
                     values(torch, prv, seed, 3001, torch.float32))
        expect_equal("batch_isend_irecv from nxt", from_nxt,
                     values(torch, nxt, seed + 1, 17, torch.int32))
        expect_equal("cpu after cuda on one link", cpu_from_prv, torch.arange(5) + prv)
        # A receive of the wrong size fails naming both sizes; the link goes on.
        dist.send(torch.ones(5, device=dev), dst=nxt, tag=11)
        checks[0] += 1
        try:
            dist.recv(torch.zeros(3, device=dev), src=prv, tag=11)
            failures.append("recv of 3 floats from a 5-float message: no error")
        except RuntimeError as e:
            if "the message has 20 bytes but the receive has 12 bytes" not in str(e):
                failures.append(f"recv of the wrong size: {e}")
        dist.send(torch.full((4,), float(rank), device=dev), dst=nxt, tag=12)
        got = torch.zeros(4, device=dev)
        dist.recv(got, src=prv, tag=12)
        expect_equal("send/recv after a failed receive", got, torch.full((4,), float(prv)))

        # A pipeline of `world` stages, one Linear layer each: activations go
        # forward and gradients back by send/recv, as a GPipe-style schedule
        # does. Each rank's weight gradient is checked against the whole
        # model run on the CPU.
        torch.manual_seed(42)
        layers = [torch.nn.Linear(24, 24) for _ in range(world)]
        batch = torch.randn(8, 24, generator=torch.Generator().manual_seed(3))
        stage = torch.nn.Linear(24, 24).to(dev)
        with torch.no_grad():
            stage.weight.copy_(layers[rank].weight.to(dev, copy=True))
            stage.bias.copy_(layers[rank].bias.to(dev, copy=True))
        if rank == 0:
            inp = batch.to(dev, copy=True)
        else:
            inp = torch.empty(8, 24, device=dev)
            dist.recv(inp, src=rank - 1, tag=100)
            inp.requires_grad_(True)
        out = torch.tanh(stage(inp))
        if rank < world - 1:
            dist.send(out.detach(), dst=rank + 1, tag=100)
            grad_out = torch.empty_like(out)
            dist.recv(grad_out, src=rank + 1, tag=101)
            out.backward(grad_out)
        else:
            out.sum().backward()
        if rank > 0:
            dist.send(inp.grad, dst=rank - 1, tag=101)
        h = batch
        for layer in layers:
            h = torch.tanh(layer(h))
        h.sum().backward()
        checks[0] += 1
        want = layers[rank].weight.grad
        if not torch.allclose(stage.weight.grad.cpu(), want, rtol=1e-4, atol=1e-5):
            failures.append(f"pipeline stage {rank}: weight grad max diff "
                            f"{(stage.weight.grad.cpu() - want).abs().max().item()}")

    dist.destroy_process_group()
    say(f"rank {rank}: {checks[0]} checks, {len(failures)} failed")
    if failures:
        raise AssertionError("\n".join(failures[:20]))


if __name__ == "__main__":
    require_coil_torch()
    import torch
    if not ON_CPU and not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device (torch.cuda.is_available() is False; "
              f"torch {torch.__version__}, built with CUDA {torch.version.cuda})")
        sys.exit(SKIP)
    run_worlds("test_cuda", worker, WORLD_SIZES, timeout=300)
