"""Every c10d operation of the coil backend, for 1 to 4 ranks, against gloo.

Each rank runs the same operation on the same inputs twice: once on the
default group (coil) and once on a gloo group of the same ranks, and the
results must be equal. Inputs are small integers (also in the float types),
so sums are exact whatever order a backend adds in, and equality is bitwise.
Where gloo lacks an operation or dtype (AVG, PREMUL_SUM, unsigned 32/64-bit,
list all-to-all, all_gather into outputs of different sizes), the
reference is gloo on a wider dtype, or computed from
every rank's inputs, which each rank can regenerate from the seeds.

COIL_TORCH_TEST_WORLDS=2,3 picks the world sizes (default 1,2,3,4).
"""
import datetime
import os
import sys
import traceback

from harness import init_env, run_worlds, say

WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "1,2,3,4").split(","))


def make(torch, dtype, shape, rank, seed, lo, hi):
    """Deterministic small-integer tensor of `dtype` for (rank, seed)."""
    g = torch.Generator().manual_seed(1000003 * seed + 7919 * rank + 17)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


# Every argument of a call on the gloo group, kept referenced until the rank
# exits. In torch 2.6 and older a gloo group's destructor joins its worker
# with the GIL held, and a worker dropping a finished call's last reference
# to a tensor Python let go of must take the GIL to free it: a rank of
# world 4 hung there once in CI's oldest-torch leg (gdb: ~ProcessGroupGloo
# in a mutex, the worker in gil_scoped_acquire under ~AsyncAllreduceWork).
_KEPT_FOR_GLOO = []


def keep_what_gloo_is_given(dist, gloo):
    for name in ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
                 "gather", "scatter", "reduce_scatter_tensor", "all_to_all_single"):
        call = getattr(dist, name)

        def keeping(*args, _call=call, **kwargs):
            if kwargs.get("group") is gloo:
                _KEPT_FOR_GLOO.append((args, kwargs))
            return _call(*args, **kwargs)
        setattr(dist, name, keeping)


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401 - registers "coil"

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    keep_what_gloo_is_given(dist, gloo)
    R = dist.ReduceOp
    failures = []
    checks = [0]

    def bits(t):
        # torch.equal does not cover every unsigned type; compare bit patterns.
        if t.dtype == torch.uint32:
            return t.view(torch.int32)
        if t.dtype == torch.uint64:
            return t.view(torch.int64)
        return t

    def expect_equal(name, got, want):
        checks[0] += 1
        if got.dtype != want.dtype or got.shape != want.shape or \
                not torch.equal(bits(got.contiguous()), bits(want.contiguous())):
            failures.append(f"{name}: coil gave {got.flatten()[:8].tolist()}... "
                            f"reference {want.flatten()[:8].tolist()}... "
                            f"({got.dtype}/{want.dtype}, {tuple(got.shape)}/{tuple(want.shape)})")

    def case(name, fn):
        try:
            fn()
        except Exception:  # noqa: BLE001 - collect, keep the ranks in step
            failures.append(f"{name}: raised\n{traceback.format_exc()}")

    def expect_error(name, fn, *needles):
        checks[0] += 1
        try:
            fn()
        except RuntimeError as e:
            text = str(e)
            missing = [n for n in needles if n not in text]
            if missing:
                failures.append(f"{name}: error lacks {missing}: {text}")
            return
        failures.append(f"{name}: no RuntimeError")

    wide = {torch.uint8: torch.int64, torch.int8: torch.int64, torch.int32: torch.int64,
            torch.int64: torch.int64, torch.uint32: torch.int64, torch.uint64: torch.int64,
            torch.float16: torch.float64, torch.bfloat16: torch.float64,
            torch.float32: torch.float64, torch.float64: torch.float64}

    def gloo_all_reduce(x, op):
        """gloo's all_reduce of x; on a dtype gloo refuses, gloo on the wide type."""
        ref = x.clone()
        try:
            dist.all_reduce(ref, op=op, group=gloo)
            return ref
        except (RuntimeError, ValueError):
            ref = x.to(wide[x.dtype])
            dist.all_reduce(ref, op=op, group=gloo)
            return ref.to(x.dtype)

    def gloo_dtype(x):
        """x as gloo can move it (gloo has no int16): int16 widened, others cloned."""
        return x.to(torch.int32) if x.dtype == torch.int16 else x.clone()

    def as_reals(x):
        """A complex tensor as gloo of every torch 2.x can move it: a view of
        pairs of reals (gloo of torch 2.6 and older raises 'Invalid scalar
        type' on complex ones). Other tensors as they are."""
        return torch.view_as_real(x) if x.is_complex() else x

    # ---- all_reduce: every dtype x op ------------------------------------
    dtypes = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.uint32, torch.uint64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]
    for seed, dtype in enumerate(dtypes):
        unsigned = dtype in (torch.uint8, torch.uint32, torch.uint64)
        for op in (R.SUM, R.MIN, R.MAX, R.PRODUCT):
            lo, hi = ((1, 3) if op == R.PRODUCT else (0, 4)) if unsigned else \
                ((-1, 3) if op == R.PRODUCT else (-3, 4))

            def run(dtype=dtype, op=op, lo=lo, hi=hi, seed=seed):
                x = make(torch, dtype, (1037,), rank, seed, lo, hi)
                want = gloo_all_reduce(x, op)
                got = x.clone()
                dist.all_reduce(got, op=op)
                expect_equal(f"all_reduce {dtype} {op}", got, want)
            case(f"all_reduce {dtype} {op}", run)

        def run_avg(dtype=dtype, seed=seed):
            x = make(torch, dtype, (515,), rank, seed + 50, 0, 8)
            total = gloo_all_reduce(x, R.SUM)
            if dtype.is_floating_point:
                want = total / world
            else:
                want = (total.to(torch.int64) // world).to(dtype)  # non-negative: floor == trunc
            got = x.clone()
            dist.all_reduce(got, op=R.AVG)
            expect_equal(f"all_reduce {dtype} AVG", got, want)
        case(f"all_reduce {dtype} AVG", run_avg)

        if dtype.is_floating_point:
            def run_premul(dtype=dtype, seed=seed):
                x = make(torch, dtype, (333,), rank, seed + 90, -4, 5)
                for factor in (0.5, torch.tensor([0.25], dtype=torch.float64)):
                    scale = factor if isinstance(factor, float) else factor.item()
                    want = gloo_all_reduce(x * scale, R.SUM)
                    got = x.clone()
                    dist.all_reduce(got, op=dist._make_nccl_premul_sum(factor))
                    expect_equal(f"all_reduce {dtype} PREMUL_SUM({scale})", got, want)
            case(f"all_reduce {dtype} PREMUL_SUM", run_premul)

        # Bitwise ops on integers (gloo has them): values over the whole
        # width, against the ranks' inputs reduced here (make() is
        # deterministic per rank).
        if not dtype.is_floating_point:
            info = torch.iinfo(dtype)
            lo, hi = max(info.min, -2**62), min(info.max, 2**62) + 1
            bitwise = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or,
                       R.BXOR: torch.bitwise_xor}
            for op, fn in bitwise.items():
                def run_bits(dtype=dtype, op=op, fn=fn, seed=seed, lo=lo, hi=hi):
                    inputs = [make(torch, dtype, (1031,), r, seed + 70, lo, hi)
                              for r in range(world)]
                    want = inputs[0]
                    for x in inputs[1:]:
                        want = fn(want.to(torch.int64), x.to(torch.int64)).to(dtype)
                    got = inputs[rank].clone()
                    dist.all_reduce(got, op=op)
                    expect_equal(f"all_reduce {dtype} {op}", got, want)
                case(f"all_reduce {dtype} {op}", run_bits)

    # bool: SUM/BOR/MAX are OR, PRODUCT/BAND/MIN are AND, BXOR is XOR (gloo's).
    def run_bool_xor():
        inputs = [make(torch, torch.bool, (301,), r, 78, 0, 2) for r in range(world)]
        want = inputs[0]
        for x in inputs[1:]:
            want = want ^ x
        got = inputs[rank].clone()
        dist.all_reduce(got, op=R.BXOR)
        expect_equal("all_reduce bool BXOR", got, want)
    case("all_reduce bool BXOR", run_bool_xor)
    for op, like in ((R.SUM, R.MAX), (R.BOR, R.MAX), (R.MAX, R.MAX),
                     (R.PRODUCT, R.MIN), (R.BAND, R.MIN), (R.MIN, R.MIN)):
        def run_bool(op=op, like=like):
            x = make(torch, torch.bool, (301,), rank, 77, 0, 2)
            want = gloo_all_reduce(x.to(torch.uint8), like).to(torch.bool)
            got = x.clone()
            dist.all_reduce(got, op=op)
            expect_equal(f"all_reduce bool {op}", got, want)
        case(f"all_reduce bool {op}", run_bool)

    # A large one: several chunks per rank, crosses the shm slot size.
    def run_large():
        x = make(torch, torch.float32, (300_001,), rank, 5, -50, 50)
        want = gloo_all_reduce(x, R.SUM)
        got = x.clone()
        dist.all_reduce(got)
        expect_equal("all_reduce float32 300001", got, want)
    case("all_reduce large", run_large)

    def run_noncontig():
        base = make(torch, torch.float32, (64, 48), rank, 6, -9, 9)
        want = gloo_all_reduce(base.t().contiguous(), R.SUM)
        got = base.clone()
        view = got.t()  # not contiguous: staged through a copy, written back
        dist.all_reduce(view)
        expect_equal("all_reduce non-contiguous", view, want)
        expect_equal("all_reduce non-contiguous wrote the base", got, want.t())
    case("all_reduce non-contiguous", run_noncontig)

    def run_async():
        x = make(torch, torch.float32, (1000,), rank, 8, -9, 9)
        want = gloo_all_reduce(x, R.SUM)
        got = x.clone()
        work = dist.all_reduce(got, async_op=True)
        result = work.get_future().wait()
        work.wait()
        checks[0] += 1
        if not work.is_completed():
            failures.append("async all_reduce: not completed after wait()")
        expect_equal("async all_reduce future value", result[0], want)
        expect_equal("async all_reduce tensor", got, want)
    case("async all_reduce", run_async)

    def run_coalesced():
        xs = [make(torch, torch.float32, (n,), rank, 9 + n, -9, 9) for n in (5, 1000, 33)]
        wants = [gloo_all_reduce(x, R.MAX) for x in xs]
        gots = [x.clone() for x in xs]
        opts = dist.AllreduceCoalescedOptions()
        opts.reduceOp = R.MAX
        dist.group.WORLD.allreduce_coalesced(gots, opts).wait()
        for i, (g, w) in enumerate(zip(gots, wants)):
            expect_equal(f"allreduce_coalesced[{i}]", g, w)
        # The coalescing manager with a device: startCoalescing/endCoalescing
        # around the fast-path allreduce_coalesced.
        gots = [x.clone() for x in xs]
        with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
            for g in gots:
                dist.all_reduce(g, op=R.MAX)
        cm.wait()
        for i, (g, w) in enumerate(zip(gots, wants)):
            expect_equal(f"_coalescing_manager all_reduce[{i}]", g, w)
        # Single calls between startCoalescing and endCoalescing (NCCL's
        # batch; gloo has none): an async call's work is waited on after the
        # batch ends; a blocking call inside the open batch fails naming the
        # batch instead of waiting forever, and its operation still runs with
        # the batch.
        pg = dist.group.WORLD
        gots = [x.clone() for x in xs]
        pg._start_coalescing(torch.device("cpu"))
        works = [dist.all_reduce(gots[0], op=R.MAX, async_op=True)]
        checks[0] += 1
        try:
            dist.all_reduce(gots[1], op=R.MAX)
            failures.append("blocking all_reduce inside an open coalesced batch: no error")
        except RuntimeError as e:
            if "open coalesced batch" not in str(e):
                failures.append(f"blocking all_reduce inside an open coalesced batch: {e}")
        works.append(dist.all_reduce(gots[2], op=R.MAX, async_op=True))
        pg._end_coalescing(torch.device("cpu")).wait()
        for work in works:
            work.wait()
        for i, (g, w) in enumerate(zip(gots, wants)):
            expect_equal(f"startCoalescing all_reduce[{i}]", g, w)
    case("allreduce_coalesced", run_coalesced)

    # ---- broadcast / reduce ------------------------------------------------
    for root in range(world):
        for seed, dtype in enumerate((torch.float32, torch.int16, torch.complex64, torch.bool,
                                      torch.bfloat16)):
            def run_bcast(root=root, dtype=dtype, seed=seed):
                if dtype == torch.bool:
                    x = make(torch, dtype, (777,), rank, 200 + seed, 0, 2)
                elif dtype.is_complex:
                    x = torch.complex(make(torch, torch.float32, (777,), rank, 200 + seed, -9, 9),
                                      make(torch, torch.float32, (777,), rank, 250 + seed, -9, 9))
                else:
                    x = make(torch, dtype, (777,), rank, 200 + seed, -99, 99)
                want = gloo_dtype(x)  # gloo has no int16
                dist.broadcast(as_reals(want), src=root, group=gloo)
                want = want.to(dtype)
                got = x.clone()
                dist.broadcast(got, src=root)
                expect_equal(f"broadcast {dtype} root {root}", got, want)
            case(f"broadcast {dtype} root {root}", run_bcast)

        for op in (R.SUM, R.MAX):
            def run_reduce(root=root, op=op):
                x = make(torch, torch.int32, (999,), rank, 300 + root, -9, 9)
                want = x.clone()
                dist.reduce(want, dst=root, op=op, group=gloo)
                got = x.clone()
                dist.reduce(got, dst=root, op=op)
                if rank == root:
                    expect_equal(f"reduce {op} root {root}", got, want)
            case(f"reduce {op} root {root}", run_reduce)

    # ---- gathers and scatters ---------------------------------------------
    for seed, dtype in enumerate((torch.float32, torch.int64, torch.bfloat16, torch.int16)):
        def run_allgather(dtype=dtype, seed=seed):
            x = make(torch, dtype, (3, 41), rank, 400 + seed, -9, 9)
            want = [torch.empty_like(gloo_dtype(x)) for _ in range(world)]
            dist.all_gather(want, gloo_dtype(x), group=gloo)
            want = [w.to(dtype) for w in want]
            got = [torch.full_like(x, 7) for _ in range(world)]
            dist.all_gather(got, x)
            for r in range(world):
                expect_equal(f"all_gather {dtype} [{r}]", got[r], want[r])
            want_t = torch.empty((world * 3, 41), dtype=gloo_dtype(x).dtype)
            dist.all_gather_into_tensor(want_t, gloo_dtype(x), group=gloo)
            want_t = want_t.to(dtype)
            got_t = torch.zeros((world * 3, 41), dtype=dtype)
            dist.all_gather_into_tensor(got_t, x)
            expect_equal(f"all_gather_into_tensor {dtype}", got_t, want_t)
        case(f"all_gather {dtype}", run_allgather)

    # all_gather into outputs of different sizes, as ProcessGroupNCCL allows
    # (gloo refuses): output r gets rank r's input. The reference is every
    # rank's input, made here. Sizes whose padding to the largest costs at
    # most twice the data take one padded all-gather, the others one
    # broadcast per rank; both are here, with empty inputs and a strided
    # output among them.
    uneven_sizes = {"near": lambda r: 5 + 2 * r, "one rank": lambda r: 0 if r else 1000,
                    "empty": lambda r: 0, "last": lambda r: 74 if r == world - 1 else r % 2}
    for seed, (kind, size_of) in enumerate(uneven_sizes.items()):
        for dtype in (torch.float32, torch.int16, torch.complex64):
            def run_allgather_uneven(size_of=size_of, dtype=dtype, seed=seed, kind=kind):
                def data(r):
                    return make(torch, torch.int64, (size_of(r),), r, 450 + seed, -9, 9).to(dtype)
                got = [torch.full((size_of(r),), 7, dtype=dtype) for r in range(world)]
                strided = torch.full((size_of(0), 2), 7, dtype=dtype)
                got[0] = strided[:, 0]
                if size_of(world - 1) == 37 * 2:  # a transposed output, of another shape
                    got[world - 1] = torch.full((2, 37), 7, dtype=dtype).t()
                dist.all_gather(got, data(rank))
                for r in range(world):
                    expect_equal(f"all_gather uneven ({kind}) {dtype} [{r}]",
                                 got[r].reshape(-1), data(r))
                expect_equal(f"all_gather uneven ({kind}) {dtype}: the strided output's gaps",
                             strided[:, 1], torch.full((size_of(0),), 7, dtype=dtype))
            case(f"all_gather uneven ({kind}) {dtype}", run_allgather_uneven)

    for root in range(world):
        def run_gather(root=root):
            x = make(torch, torch.float64, (129,), rank, 500 + root, -9, 9)
            want = [torch.empty_like(x) for _ in range(world)] if rank == root else None
            dist.gather(x, want, dst=root, group=gloo)
            got = [torch.zeros_like(x) for _ in range(world)] if rank == root else None
            dist.gather(x, got, dst=root)
            if rank == root:
                for r in range(world):
                    expect_equal(f"gather root {root} [{r}]", got[r], want[r])
        case(f"gather root {root}", run_gather)

        def run_scatter(root=root):
            parts = [make(torch, torch.int32, (65,), r, 600 + root, -9, 9) for r in range(world)]
            want = torch.zeros(65, dtype=torch.int32)
            dist.scatter(want, parts if rank == root else None, src=root, group=gloo)
            got = torch.full((65,), -1, dtype=torch.int32)
            dist.scatter(got, parts if rank == root else None, src=root)
            expect_equal(f"scatter root {root}", got, want)
        case(f"scatter root {root}", run_scatter)

    for op in (R.SUM, R.MAX):
        def run_reduce_scatter(op=op):
            xs = [make(torch, torch.float32, (257,), rank, 700 + p, -9, 9) for p in range(world)]
            flat = torch.cat(xs)
            full = gloo_all_reduce(flat, op)  # reference: all-reduce, keep my block
            want = full[rank * 257:(rank + 1) * 257]
            got = torch.zeros(257)
            dist.reduce_scatter(got, xs, op=op)
            expect_equal(f"reduce_scatter {op}", got, want)
            got_t = torch.zeros(257)
            dist.reduce_scatter_tensor(got_t, flat, op=op)
            expect_equal(f"reduce_scatter_tensor {op}", got_t, want)
        case(f"reduce_scatter {op}", run_reduce_scatter)

    # ---- complex tensors in the calls torch hands over as they are ---------------
    # torch views complex tensors as pairs of reals itself for all_reduce, but
    # not for reduce, reduce_scatter or ProcessGroup.allreduce: gloo sums and
    # averages them there, and so must coil; other ops raise, on both. The
    # reference is gloo's sum of the values as pairs of reals (as_reals), over
    # the world size for AVG: gloo of torch 2.6 and older has no complex.
    for dtype in (torch.complex64, torch.complex128):
        for op in (R.SUM, R.AVG):
            def run_complex(dtype=dtype, op=op):
                def cx(salt, n):
                    re = make(torch, torch.float64, (n,), rank, salt, -9, 9)
                    im = make(torch, torch.float64, (n,), rank, salt + 1, -9, 9)
                    return torch.complex(re, im).to(dtype) * world  # AVG stays exact
                def averaged(want):
                    if op == R.AVG:
                        as_reals(want).div_(world)
                    return want
                x = cx(1300, 37)
                for root in range(world):
                    want, got = x.clone(), x.clone()
                    dist.reduce(as_reals(want), dst=root, op=R.SUM, group=gloo)
                    dist.reduce(got, dst=root, op=op)
                    if rank == root:
                        expect_equal(f"reduce {dtype} {op} root {root}", got, averaged(want))
                flat = cx(1310, 11 * world)
                want = torch.zeros(11, dtype=dtype)
                dist.reduce_scatter_tensor(as_reals(want), as_reals(flat), op=R.SUM, group=gloo)
                averaged(want)
                got = torch.zeros(11, dtype=dtype)
                dist.reduce_scatter_tensor(got, flat, op=op)
                expect_equal(f"reduce_scatter_tensor {dtype} {op}", got, want)
                got = torch.zeros(11, dtype=dtype)
                dist.reduce_scatter(got, list(flat.split(11)), op=op)
                expect_equal(f"reduce_scatter {dtype} {op}", got, want)
                opts = dist.AllreduceOptions()
                opts.reduceOp = op
                sum_opts = dist.AllreduceOptions()
                sum_opts.reduceOp = R.SUM
                want, got = x.clone(), x.clone()
                gloo.allreduce([as_reals(want)], sum_opts).wait()
                dist.group.WORLD.allreduce([got], opts).wait()
                expect_equal(f"ProcessGroup.allreduce {dtype} {op}", got, averaged(want))
                if op == R.SUM:  # PREMUL_SUM (gloo has none): twice gloo's sum
                    want, got = x.clone(), x.clone()
                    dist.reduce(as_reals(want), dst=0, op=R.SUM, group=gloo)
                    dist.reduce(got, dst=0, op=dist._make_nccl_premul_sum(2.0))
                    if rank == 0:
                        expect_equal(f"reduce {dtype} PREMUL_SUM(2.0)", got, want * 2)
            case(f"complex {dtype} {op}", run_complex)

    # ---- all-to-all ----------------------------------------------------------
    def run_alltoall_even():
        x = make(torch, torch.float32, (world * 6, 5), rank, 800, -99, 99)
        want = torch.empty_like(x)
        dist.all_to_all_single(want, x, group=gloo)
        got = torch.zeros_like(x)
        dist.all_to_all_single(got, x)
        expect_equal("all_to_all_single even", got, want)
    case("all_to_all_single even", run_alltoall_even)

    def rows(src, dst):  # rows rank src sends to rank dst (sometimes 0)
        return (2 * src + dst) % 3

    def run_alltoall_uneven():
        in_splits = [rows(rank, p) for p in range(world)]
        out_splits = [rows(p, rank) for p in range(world)]
        x = make(torch, torch.int64, (sum(in_splits), 3), rank, 801, -99, 99)
        want = torch.empty((sum(out_splits), 3), dtype=torch.int64)
        dist.all_to_all_single(want, x, out_splits, in_splits, group=gloo)
        got = torch.zeros_like(want)
        dist.all_to_all_single(got, x, out_splits, in_splits)
        expect_equal("all_to_all_single uneven", got, want)
    case("all_to_all_single uneven", run_alltoall_uneven)

    def run_alltoall_list():
        # Reference from the inputs: rank p's piece for me is make(p, seed=rank).
        ins = [make(torch, torch.float32, (rows(rank, p) + 1, 2), rank, 900 + p, -9, 9)
               for p in range(world)]
        want = [make(torch, torch.float32, (rows(p, rank) + 1, 2), p, 900 + rank, -9, 9)
                for p in range(world)]
        got = [torch.zeros_like(w) for w in want]
        dist.all_to_all(got, ins)
        for p in range(world):
            expect_equal(f"all_to_all list [{p}]", got[p], want[p])
    case("all_to_all list", run_alltoall_list)

    # ---- point-to-point ---------------------------------------------------------
    if world >= 2:
        def run_ring():
            # Everyone sends before receiving, 400 KB each: only a batch
            # (one coil group) can complete this.
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            x = make(torch, torch.float32, (100_000,), rank, 1000, -9, 9)
            got = torch.zeros_like(x)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt),
                                           dist.P2POp(dist.irecv, got, prv)])
            for r in reqs:
                r.wait()
            expect_equal("batch_isend_irecv ring",
                         got, make(torch, torch.float32, (100_000,), prv, 1000, -9, 9))
        case("batch_isend_irecv ring", run_ring)

        def run_send_recv():
            # Rank 0 sends to each peer; the peer answers with double.
            if rank == 0:
                for p in range(1, world):
                    dist.send(make(torch, torch.int64, (5000,), p, 1100, -9, 9), dst=p)
                    back = torch.zeros(5000, dtype=torch.int64)
                    dist.recv(back, src=p)
                    expect_equal(f"send/recv echo from {p}", back,
                                 2 * make(torch, torch.int64, (5000,), p, 1100, -9, 9))
            else:
                buf = torch.zeros(5000, dtype=torch.int64)
                dist.recv(buf, src=0)
                expect_equal("recv from 0", buf, make(torch, torch.int64, (5000,), rank, 1100,
                                                      -9, 9))
                dist.send(buf * 2, dst=0)
        case("send/recv", run_send_recv)

    case("barrier", lambda: dist.barrier())

    # ---- errors are RuntimeErrors raised at the call, on every rank -------------
    expect_error("int16 all_reduce", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16)),
                 "coil backend", "torch.int16")
    expect_error("float BXOR", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.float32),
                                                       op=R.BXOR),
                 "coil backend", "BXOR", "torch.float32")
    expect_error("bool AVG", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.bool),
                                                     op=R.AVG), "AVG", "torch.bool")
    expect_error("complex MAX", lambda: dist.reduce(torch.zeros(3, dtype=torch.complex64), dst=0,
                                                    op=R.MAX),
                 "coil backend", "MAX", "torch.complex64")
    # What coil does not offer (README "Supported operations") says so by name.
    expect_error("sparse tensor, MAX", lambda: dist.all_reduce(torch.zeros(3).to_sparse(),
                                                               op=R.MAX),
                 "coil backend", "sparse", "SUM only")
    if torch.cuda.is_available() and world > 1:  # CUDA collectives: test_cuda.py
        expect_error("cuda send", lambda: dist.send(torch.zeros(3, device="cuda"),
                                                    dst=(rank + 1) % world),
                     "coil backend: send of CUDA tensors is not supported yet")

    expect_error("all_gather: this rank's output of another size than its input",
                 lambda: dist.all_gather([torch.zeros(4) for _ in range(world)], torch.zeros(3)),
                 "coil backend: allgather: output[", "elements, but this rank's input has 3")

    # The group still works after the refused calls (they never reached coil).
    def run_after_errors():
        x = make(torch, torch.float32, (10,), rank, 1200, -9, 9)
        want = gloo_all_reduce(x, R.SUM)
        dist.all_reduce(x)
        expect_equal("all_reduce after errors", x, want)
    case("all_reduce after errors", run_after_errors)

    dist.destroy_process_group()
    say(f"rank {rank}/{world}: {checks[0]} checks, {len(failures)} failures")
    if failures:
        raise AssertionError(f"{len(failures)} failed checks:\n" + "\n".join(failures))


def main():
    run_worlds("test_ops", worker, WORLD_SIZES)


if __name__ == "__main__":
    sys.exit(main())
