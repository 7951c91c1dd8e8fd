"""Random programs of torch.distributed calls on the coil backend.

The other torch tests check one operation at a time. Training code mixes
them: an async all_reduce on a subgroup (new_group, or split_group with its
ranks in another order) still in flight while the world
broadcasts, isend and irecv posted in whatever order each rank likes, works
waited out of order or through their futures, object collectives between
tensor ones, coalesced batches, complex tensors, views whose strides leave
gaps. A program here is drawn from a
seed: the same calls on every rank (what each call does, on which group,
with which tensors), while each rank draws on its own whether a call is
async, the order it posts its messages in, and when and in what order it
waits. Every result is checked against a reference computed here from what
every rank contributed (each rank can make any rank's inputs from the seed);
inputs are small integers, also in the float types, so results are exact
whatever order a backend adds in, and equality is bitwise. A view's gaps
must come back untouched.

  COIL_TORCH_TEST_WORLDS     world sizes (default 2,3,4; more ranks than
                             cores is for correctness only)
  COIL_TORCH_PROGRAMS        programs per world size (default 3)
  COIL_TORCH_PROGRAM_SEED    run this one program (a failure names its seed)
  COIL_TORCH_PROGRAM_BACKEND coil (default) or gloo: the same programs on
                             gloo check the test itself, leaving out what
                             gloo lacks or gets wrong (AVG, PREMUL_SUM, int16,
                             complex gather, list all_to_all, uneven
                             reduce_scatter and all_gather, strided tensors, an empty
                             message received from any source)
  COIL_TORCH_PROGRAM_TRACE   1: each rank prints each step before it runs
"""
import datetime
import os
import random

from harness import init_env, run_worlds, say, torch_lacks

WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "2,3,4").split(",")
                    if int(w) >= 2)
BACKEND = os.environ.get("COIL_TORCH_PROGRAM_BACKEND", "coil")
STEPS = 40
COUNTS = (0, 1, 2, 3, 5, 7, 13, 64, 1000, 4099, 65537)


class PreMul:
    """ReduceOp.PREMUL_SUM by `factor`, handed to torch as a number or as a
    0-dim tensor. The factors are powers of two, so results stay exact."""

    def __init__(self, factor, as_tensor):
        self.factor, self.as_tensor = factor, as_tensor

    def __str__(self):
        return f"PREMUL_SUM({self.factor}{' as a tensor' if self.as_tensor else ''})"

    def made(self, torch, dist):
        return dist._make_nccl_premul_sum(torch.tensor(self.factor) if self.as_tensor
                                          else self.factor)


def seeds(world):
    one = os.environ.get("COIL_TORCH_PROGRAM_SEED")
    if one:
        return [int(one)]
    base = int(os.environ.get("COIL_TORCH_PROGRAM_BASE", "20261129"))
    return [base + 1000 * world + k for k in range(int(os.environ.get("COIL_TORCH_PROGRAMS", "3")))]


class Program:
    """One program on one rank. `shared` draws what every rank must agree on;
    `mine` draws what each rank may choose on its own."""

    def __init__(self, torch, dist, seed, rank, world):
        self.torch, self.dist, self.seed, self.rank, self.world = torch, dist, seed, rank, world
        self.shared = random.Random(seed)
        self.mine = random.Random(seed * 7919 + rank)
        self.trace = os.environ.get("COIL_TORCH_PROGRAM_TRACE") == "1"
        self.step = 0
        self.pending = []   # (what, works, check) of async calls not yet waited for
        self.failures = []
        self.checks = 0
        # The world and one or two subgroups; every rank creates every group.
        # A subgroup is made by new_group (its ranks in rank order) or by
        # split_group (in its list's order, the others in a group of their
        # own that the program leaves alone), where torch splits CPU groups.
        self.groups = [(None, list(range(world)))]
        can_split = torch_lacks("split cpu groups") is None
        for _ in range(self.shared.randint(1, 2)):
            members = self.shared.sample(range(world), self.shared.randint(1, world))
            if self.shared.random() < 0.5 and can_split:
                rest = [r for r in range(world) if r not in members]
                child = dist.split_group(split_ranks=[members] + ([rest] if rest else []))
                self.groups.append((child, members))
            else:
                members.sort()
                self.groups.append((dist.new_group(members), members))
        R = dist.ReduceOp
        T = torch
        # gloo has neither AVG nor PREMUL_SUM
        premuls = [PreMul(2.0, False), PreMul(-0.5, True)] if BACKEND != "gloo" else []
        self.float_ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX] + (
            [R.AVG] if BACKEND != "gloo" else []) + premuls
        self.int_ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
        self.bool_ops = [R.BAND, R.BOR, R.BXOR]
        # What calls that reduce take, and what the others move: int16 only
        # moves (NCCL has no int16 reduction either; gloo no int16 at all).
        self.dtypes = [T.float32, T.float64, T.float16, T.bfloat16, T.int8, T.uint8, T.int32,
                       T.int64, T.bool, T.complex64, T.complex128]
        self.moved_dtypes = self.dtypes + ([T.int16] if BACKEND != "gloo" else [])
        # complex tensors reduce as pairs of reals, for these ops only
        self.complex_ops = [R.SUM] + ([R.AVG] if BACKEND != "gloo" else []) + premuls

    # ---- what every rank agrees on ------------------------------------------------
    def pick_group(self):
        if len(self.groups) == 1 or self.shared.random() < 0.6:
            return self.groups[0]
        return self.shared.choice(self.groups[1:])

    def pick_dtype_op(self):
        """A dtype and an op for a call that reduces."""
        dtype = self.shared.choice(self.dtypes)
        if dtype == self.torch.bool:
            return dtype, self.shared.choice(self.bool_ops)
        if dtype.is_complex:
            return dtype, self.shared.choice(self.complex_ops)
        if dtype.is_floating_point:
            return dtype, self.shared.choice(self.float_ops)
        return dtype, self.shared.choice(self.int_ops)

    def pick_count(self):
        return self.shared.choice(COUNTS)

    def pick_shape(self):
        n = self.pick_count()
        if n >= 4 and self.shared.random() < 0.3:  # two dimensions: rows of n // k
            k = self.shared.choice((2, 3, 4))
            return (k, n // k)
        return (n,)

    def pick_layout(self, shape):
        """How the tensor handed to an in-place call lies in memory. Only
        contiguous under gloo: it refuses other tensors to receive into, and
        reduces strided ones wrong (torch 2.15)."""
        choices = ["contiguous", "contiguous", "strided"]
        if len(shape) == 2:
            choices.append("transposed")
        layout = self.shared.choice(choices)
        return layout if BACKEND != "gloo" else "contiguous"

    # ---- inputs and references ----------------------------------------------------
    def data(self, who, dtype, shape, op=None, members=1, salt=0):
        """`who`'s input of this step: small integers that keep every
        reduction exact (AVG's are multiples of the member count)."""
        torch, R = self.torch, self.dist.ReduceOp
        if dtype == torch.bool:
            lo, hi = 0, 2
        elif op == R.PRODUCT:
            lo, hi = (1, 3) if dtype == torch.uint8 else (-1, 3)
        elif op in (R.MIN, R.MAX):
            lo, hi = (0, 100) if dtype == torch.uint8 else (-50, 50)
        elif op in (R.BAND, R.BOR, R.BXOR):
            lo, hi = 0, 64
        else:
            lo, hi = (0, 10) if dtype == torch.uint8 else (-5, 5)
        g = torch.Generator().manual_seed(
            (self.seed * 1000003 + self.step * 7919 + who * 104729 + salt * 31) % (2 ** 63))
        values = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
        if dtype.is_complex:
            imaginary = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
            values = torch.complex(values.double(), imaginary.double())
        if op == R.AVG:
            values = values * members
        return values.to(dtype)

    def reduced(self, tensors, op, dtype):
        torch, R = self.torch, self.dist.ReduceOp
        wide = [t.to(torch.complex128 if dtype.is_complex else
                     torch.float64 if dtype.is_floating_point else torch.int64) for t in tensors]
        acc = wide[0].clone()
        for t in wide[1:]:
            if op in (R.SUM, R.AVG) or isinstance(op, PreMul):
                acc = acc + t
            elif op == R.PRODUCT:
                acc = acc * t
            elif op == R.MIN:
                acc = torch.minimum(acc, t)
            elif op == R.MAX:
                acc = torch.maximum(acc, t)
            elif op == R.BAND:
                acc = acc & t
            elif op == R.BOR:
                acc = acc | t
            elif op == R.BXOR:
                acc = acc ^ t
        if op == R.AVG:
            acc = acc / len(tensors)
        if isinstance(op, PreMul):  # the sum of factor * x, exact for a power of two
            acc = acc * op.factor
        return acc.to(dtype)

    def torch_op(self, op):
        return op.made(self.torch, self.dist) if isinstance(op, PreMul) else op

    def laid_out(self, values, layout):
        """A tensor equal to `values` in `layout`, and a check that the
        memory around it (a strided view's gaps) stays as it was."""
        torch = self.torch
        if layout == "contiguous":
            return values.clone(), lambda: True
        if layout == "transposed":
            base = values.t().contiguous()
            return base.t(), lambda: True
        if values.dim() == 1:  # every other element of a wider buffer
            base = torch.ones(values.numel(), 2, dtype=values.dtype)
            base[:, 0] = values
            return base[:, 0], lambda: bool((base[:, 1] == 1).all())
        rows, cols = values.shape  # every other column
        base = torch.ones(rows, 2 * cols, dtype=values.dtype)
        base[:, 0::2] = values
        return base[:, 0::2], lambda: bool((base[:, 1::2] == 1).all())

    # ---- checking -----------------------------------------------------------------
    def note(self, what):
        if self.trace:
            say(f"rank {self.rank} seed {self.seed} step {self.step}: {what} "
                f"({len(self.pending)} pending)")

    def where(self, what):
        return f"seed {self.seed}, step {self.step} ({what}), rank {self.rank}"

    def expect(self, what, got, want):
        self.checks += 1
        torch = self.torch
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape) or \
                not torch.equal(got.contiguous(), want.contiguous()):
            self.failures.append(
                f"{self.where(what)}: got {got.flatten()[:6].tolist()} ({got.dtype}, "
                f"{tuple(got.shape)}), want {want.flatten()[:6].tolist()} ({want.dtype}, "
                f"{tuple(want.shape)})")

    def expect_true(self, what, ok, detail):
        self.checks += 1
        if not ok:
            self.failures.append(f"{self.where(what)}: {detail}")

    def issued(self, what, work, check):
        """A call has been issued: check it now if it ran blocking, or keep
        its work to wait for later."""
        if work is None:
            check()
        else:
            self.pending.append((what, [work], check))

    def wait_some(self, everything=False):
        if not self.pending:
            return
        if everything:
            chosen = list(self.pending)
        else:
            chosen = self.mine.sample(self.pending, self.mine.randint(1, len(self.pending)))
        self.mine.shuffle(chosen)
        for item in chosen:
            self.wait_for(item)

    def wait_for(self, item):
        what, works, check = item
        futures = BACKEND != "gloo"  # several of gloo's works have no future
        for work in works:
            try:
                if futures and self.mine.random() < 0.3:
                    work.get_future().wait()
                else:
                    work.wait()
            except Exception as e:  # noqa: BLE001 - name the call, then stop the program
                raise RuntimeError(f"{self.where(what)}: waiting: {type(e).__name__}: {e}") from e
            # (gloo's reduce_scatter work stays "not completed" after its wait)
            self.expect_true(what, work.is_completed() or BACKEND == "gloo",
                             "work not completed after its wait")
        check()
        self.pending.remove(item)

    # ---- the steps ----------------------------------------------------------------
    def all_reduce(self):
        group, members = self.pick_group()
        dtype, op = self.pick_dtype_op()
        shape = self.pick_shape()
        layout = self.pick_layout(shape)
        what = f"all_reduce {op} {dtype} {shape} {layout} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        inputs = [self.data(r, dtype, shape, op, len(members)) for r in members]
        want = self.reduced(inputs, op, dtype)
        t, gaps_kept = self.laid_out(self.data(self.rank, dtype, shape, op, len(members)), layout)
        work = self.dist.all_reduce(t, op=self.torch_op(op), group=group,
                                    async_op=self.mine.random() < 0.5)
        self.issued(what, work, lambda: (self.expect(what, t, want),
                                         self.expect_true(what, gaps_kept(), "a gap was written")))

    def broadcast(self):
        group, members = self.pick_group()
        dtype = self.shared.choice(self.moved_dtypes)
        shape = self.pick_shape()
        layout = self.pick_layout(shape)
        src = self.shared.choice(members)
        what = f"broadcast from {src} {dtype} {shape} {layout} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        want = self.data(src, dtype, shape)
        t, gaps_kept = self.laid_out(self.data(self.rank, dtype, shape), layout)
        work = self.dist.broadcast(t, src=src, group=group, async_op=self.mine.random() < 0.5)
        self.issued(what, work, lambda: (self.expect(what, t, want),
                                         self.expect_true(what, gaps_kept(), "a gap was written")))

    def reduce(self):
        group, members = self.pick_group()
        dtype, op = self.pick_dtype_op()
        shape = self.pick_shape()
        dst = self.shared.choice(members)
        what = f"reduce to {dst} {op} {dtype} {shape} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        t = self.data(self.rank, dtype, shape, op, len(members))
        work = self.dist.reduce(t, dst=dst, op=self.torch_op(op), group=group,
                                async_op=self.mine.random() < 0.5)
        if self.rank == dst:
            want = self.reduced([self.data(r, dtype, shape, op, len(members)) for r in members],
                                op, dtype)
            self.issued(what, work, lambda: self.expect(what, t, want))
        else:
            self.issued(what, work, lambda: None)

    def all_gather(self):
        group, members = self.pick_group()
        dtype = self.shared.choice(self.moved_dtypes)
        shape = self.pick_shape()
        into_tensor = self.shared.random() < 0.5
        stacked = self.shared.random() < 0.5 and BACKEND != "gloo"  # gloo takes only concatenated
        # Outputs of different sizes, one per member's input, as NCCL allows
        # (gloo refuses them).
        shapes = [shape] * len(members)
        if not into_tensor and BACKEND != "gloo" and self.shared.random() < 0.4:
            shapes = [(self.pick_count(),) for _ in members]
        what = (f"all_gather{'_into_tensor' if into_tensor else ''} {dtype} "
                f"{shape if len(set(shapes)) == 1 else shapes} on {members}")
        self.note(what)
        if self.rank not in members:
            return
        torch, k = self.torch, len(members)
        mine = self.data(self.rank, dtype, shapes[members.index(self.rank)])
        wants = [self.data(r, dtype, sh) for r, sh in zip(members, shapes)]
        async_op = self.mine.random() < 0.5
        if into_tensor:
            if stacked:
                out = torch.full((k,) + tuple(shape), 7, dtype=dtype)
                want = torch.stack(wants)
            else:
                out = torch.full((k * shape[0],) + tuple(shape[1:]), 7, dtype=dtype)
                want = torch.cat(wants)
            work = self.dist.all_gather_into_tensor(out, mine, group=group, async_op=async_op)
            self.issued(what, work, lambda: self.expect(what, out, want))
        else:
            outs = [torch.full(sh, 7, dtype=dtype) for sh in shapes]
            work = self.dist.all_gather(outs, mine, group=group, async_op=async_op)
            self.issued(what, work,
                        lambda: [self.expect(f"{what} [{i}]", o, w)
                                 for i, (o, w) in enumerate(zip(outs, wants))])

    def reduce_scatter(self):
        group, members = self.pick_group()
        dtype, op = self.pick_dtype_op()
        k = len(members)
        as_list = self.shared.random() < 0.5
        if as_list and BACKEND != "gloo" and self.shared.random() < 0.5:
            blocks = [self.pick_count() for _ in range(k)]  # blocks of different sizes
        else:
            blocks = [self.pick_count()] * k
        what = (f"reduce_scatter{'' if as_list else '_tensor'} {op} {dtype} blocks {blocks} "
                f"on {members}")
        self.note(what)
        if self.rank not in members:
            return
        torch = self.torch
        me = members.index(self.rank)
        inputs = {r: self.data(r, dtype, (sum(blocks),), op, k) for r in members}
        full = self.reduced(list(inputs.values()), op, dtype)
        want = full.split(blocks)[me].clone()
        out = torch.full((blocks[me],), 7, dtype=dtype)
        async_op = self.mine.random() < 0.5
        if as_list:
            work = self.dist.reduce_scatter(out, list(inputs[self.rank].split(blocks)),
                                            op=self.torch_op(op), group=group, async_op=async_op)
        else:
            work = self.dist.reduce_scatter_tensor(out, inputs[self.rank], op=self.torch_op(op),
                                                   group=group, async_op=async_op)
        self.issued(what, work, lambda: self.expect(what, out, want))

    def all_to_all(self):
        group, members = self.pick_group()
        dtype = self.shared.choice(self.moved_dtypes)
        k = len(members)
        as_list = BACKEND != "gloo" and self.shared.random() < 0.3
        even = self.shared.random() < 0.3
        n = self.pick_count()
        # splits[i][j]: how many elements the i-th member sends the j-th
        splits = [[n if even else self.shared.choice(COUNTS[:8]) for _ in range(k)]
                  for _ in range(k)]
        what = f"all_to_all{'' if as_list else '_single'} {dtype} splits {splits} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        torch = self.torch
        me = members.index(self.rank)
        sent = {i: self.data(r, dtype, (sum(splits[i]),)).split(splits[i])
                for i, r in enumerate(members)}
        want = torch.cat([sent[i][me] for i in range(k)])
        async_op = self.mine.random() < 0.5
        if as_list:
            outs = [torch.full((splits[i][me],), 7, dtype=dtype) for i in range(k)]
            work = self.dist.all_to_all(outs, [t.clone() for t in sent[me]], group=group,
                                        async_op=async_op)
            self.issued(what, work, lambda: self.expect(what, torch.cat(outs), want))
            return
        out = torch.full((want.numel(),), 7, dtype=dtype)
        inp = torch.cat(sent[me])
        if even:
            work = self.dist.all_to_all_single(out, inp, group=group, async_op=async_op)
        else:
            work = self.dist.all_to_all_single(out, inp, [splits[i][me] for i in range(k)],
                                               splits[me], group=group, async_op=async_op)
        self.issued(what, work, lambda: self.expect(what, out, want))

    def gather_scatter(self):
        group, members = self.pick_group()
        dtype = self.shared.choice(self.moved_dtypes)
        shape = self.pick_shape()
        root = self.shared.choice(members)
        gather = self.shared.random() < 0.5
        if gather and dtype.is_complex and BACKEND == "gloo":  # "Invalid scalar type"
            dtype = self.torch.float64
        what = f"{'gather to' if gather else 'scatter from'} {root} {dtype} {shape} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        torch = self.torch
        async_op = self.mine.random() < 0.5
        if gather:
            wants = [self.data(r, dtype, shape) for r in members]
            outs = None
            if self.rank == root:
                outs = [torch.full(shape, 7, dtype=dtype) for _ in members]
            work = self.dist.gather(self.data(self.rank, dtype, shape), outs, dst=root, group=group,
                                    async_op=async_op)
            if self.rank == root:
                self.issued(what, work,
                            lambda: [self.expect(what, o, w) for o, w in zip(outs, wants)])
            else:
                self.issued(what, work, lambda: None)
        else:
            pieces = [self.data(root, dtype, shape, salt=i) for i in range(len(members))]
            out = torch.full(shape, 7, dtype=dtype)
            given = [p.clone() for p in pieces] if self.rank == root else None
            work = self.dist.scatter(out, given, src=root, group=group, async_op=async_op)
            want = pieces[members.index(self.rank)]
            self.issued(what, work, lambda: self.expect(what, out, want))

    def barrier(self):
        group, members = self.pick_group()
        if self.rank in members:
            work = self.dist.barrier(group=group, async_op=self.mine.random() < 0.5)
            self.issued(f"barrier on {members}", work, lambda: None)

    def messages(self):
        """Several messages between pairs of ranks, some pairs more than one.
        Each rank posts its sends and receives in an order of its own; only
        the order of the messages from one rank to another is kept."""
        torch, dist = self.torch, self.dist
        batch = self.shared.random() < 0.5
        count = self.shared.randint(1, 2 * self.world)
        plan = []
        for i in range(count):
            src, dst = self.shared.sample(range(self.world), 2)
            plan.append((i, src, dst, self.shared.choice(self.moved_dtypes), self.pick_count(),
                         self.pick_layout((1,))))
        what = f"{'batch_isend_irecv' if batch else 'isend/irecv'} " + \
            ", ".join(f"{s}->{d} {n} {str(t)[6:]}" for _, s, d, t, n, _ in plan)
        self.note(what)
        queues = {}  # (peer, direction) -> this rank's calls in message order
        for i, src, dst, dtype, n, layout in plan:
            if self.rank == src:
                queues.setdefault((dst, "send"), []).append(
                    ("send", dst, self.data(src, dtype, (n,), salt=i)))
            elif self.rank == dst:
                buf, gaps_kept = self.laid_out(torch.full((n,), 7, dtype=dtype), layout)
                want = self.data(src, dtype, (n,), salt=i)
                queues.setdefault((src, "recv"), []).append(("recv", src, (buf, gaps_kept, want)))
        order = []
        for key, calls in queues.items():
            order += [key] * len(calls)
        self.mine.shuffle(order)
        calls = [queues[key].pop(0) for key in order]
        if not calls:
            return
        def check(call):
            kind, src, arg = call
            if kind == "recv":
                buf, gaps_kept, want = arg
                self.expect(f"{what}: message from {src}", buf, want)
                self.expect_true(what, gaps_kept(), "a gap was written")
        if batch:  # a batch is waited for as a whole, at once, as its users do
            works = dist.batch_isend_irecv([
                dist.P2POp(dist.isend if kind == "send" else dist.irecv,
                           arg if kind == "send" else arg[0], peer) for kind, peer, arg in calls])
            self.pending.append((what, works, lambda: [check(c) for c in calls]))
            self.wait_for(self.pending[-1])
            return
        for call in calls:  # each message's work waited for on its own, some later than others
            kind, peer, arg = call
            work = dist.isend(arg, peer) if kind == "send" else dist.irecv(arg[0], peer)
            self.pending.append((what, [work], lambda c=call: check(c)))

    def blocking_message(self):
        src, dst = self.shared.sample(range(self.world), 2)
        dtype = self.shared.choice(self.moved_dtypes)
        n = self.pick_count()
        any_source = self.shared.random() < 0.3
        # A receive from any source takes the first message with its tag from
        # anyone, and a rank ahead in the program may already be sending its
        # next messages (tag 0): this one gets a tag of its own.
        tag = 1000 + self.step if any_source else 0
        if any_source and n == 0 and BACKEND == "gloo":  # gloo fails an empty one ("offset < size")
            n = 1
        how = f" (any source, tag {tag})" if any_source else ""
        what = f"send/recv {src}->{dst} {n} {dtype}{how}"
        self.note(what)
        if self.rank == src:
            self.dist.send(self.data(src, dtype, (n,)), dst, tag=tag)
        elif self.rank == dst:
            buf = self.torch.full((n,), 7, dtype=dtype)
            got_from = self.dist.recv(buf, None if any_source else src, tag=tag)
            self.expect(what, buf, self.data(src, dtype, (n,)))
            self.expect_true(what, got_from == src, f"recv says it came from {got_from}")

    def objects(self):
        group, members = self.pick_group()
        kind = self.shared.choice(("broadcast", "all_gather", "gather", "scatter"))
        root = self.shared.choice(members)
        suffix = "_list" if kind in ("broadcast", "scatter") else ""
        what = f"{kind}_object{suffix} root {root} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        dist = self.dist

        def thing(r, i=0):
            return {"rank": r, "step": self.step, "i": i,
                    "text": "x" * ((r * 37 + self.step + i) % 300),
                    "list": list(range((r + self.step) % 6))}
        if kind == "broadcast":
            objs = [thing(root, i) for i in range(3)] if self.rank == root else [None] * 3
            dist.broadcast_object_list(objs, src=root, group=group)
            self.expect_true(what, objs == [thing(root, i) for i in range(3)], f"got {objs!r:.200}")
        elif kind == "all_gather":
            objs = [None] * len(members)
            dist.all_gather_object(objs, thing(self.rank), group=group)
            self.expect_true(what, objs == [thing(r) for r in members], f"got {objs!r:.200}")
        elif kind == "gather":
            objs = [None] * len(members) if self.rank == root else None
            dist.gather_object(thing(self.rank), objs, dst=root, group=group)
            if self.rank == root:
                self.expect_true(what, objs == [thing(r) for r in members], f"got {objs!r:.200}")
        else:
            out = [None]
            dist.scatter_object_list(out, [thing(root, i) for i in range(len(members))]
                                     if self.rank == root else None, src=root, group=group)
            want = thing(root, members.index(self.rank))
            self.expect_true(what, out[0] == want, f"got {out[0]!r:.200}")

    def coalesced(self):
        """Several calls of one kind in one _coalescing_manager block, as
        FSDP issues its all-gathers and reduce-scatters."""
        group, members = self.pick_group()
        kind = self.shared.choice(("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"))
        dtype, op = self.pick_dtype_op()
        counts = [self.pick_count() for _ in range(self.shared.randint(2, 4))]
        what = f"coalesced {kind} {op} {dtype} {counts} on {members}"
        self.note(what)
        if self.rank not in members:
            return
        torch, dist, k = self.torch, self.dist, len(members)
        me = members.index(self.rank)
        if kind == "all_gather_into_tensor":
            ins = [self.data(self.rank, dtype, (n,), salt=i) for i, n in enumerate(counts)]
            outs = [torch.full((k * n,), 7, dtype=dtype) for n in counts]
            wants = [torch.cat([self.data(r, dtype, (n,), salt=i) for r in members])
                     for i, n in enumerate(counts)]
        else:
            size = k if kind == "reduce_scatter_tensor" else 1
            ins = [self.data(self.rank, dtype, (size * n,), op, k, salt=i)
                   for i, n in enumerate(counts)]
            sums = [self.reduced([self.data(r, dtype, (size * n,), op, k, salt=i) for r in members],
                                 op, dtype) for i, n in enumerate(counts)]
            if kind == "all_reduce":
                outs, wants = ins, sums
            else:
                outs = [torch.full((n,), 7, dtype=dtype) for n in counts]
                wants = [t[me * n:(me + 1) * n] for t, n in zip(sums, counts)]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for t_in, t_out in zip(ins, outs):
                if kind == "all_reduce":
                    dist.all_reduce(t_in, op=self.torch_op(op), group=group)
                elif kind == "all_gather_into_tensor":
                    dist.all_gather_into_tensor(t_out, t_in, group=group)
                else:
                    dist.reduce_scatter_tensor(t_out, t_in, op=self.torch_op(op), group=group)
        self.pending.append((what, cm.works, lambda: [self.expect(f"{what} [{i}]", t, w)
                                                for i, (t, w) in enumerate(zip(outs, wants))]))

    STEP_KINDS = ("all_reduce", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                  "all_to_all", "gather_scatter", "barrier", "messages", "messages",
                  "blocking_message", "objects", "coalesced")

    def run(self):
        for self.step in range(STEPS):
            kind = self.shared.choice(self.STEP_KINDS)
            try:
                getattr(self, kind)()
            except Exception as e:  # noqa: BLE001 - name the step, then stop the program
                earlier = "".join(f"\n  after: {f}" for f in self.failures[:10])
                raise RuntimeError(f"{self.where(kind)}: {type(e).__name__}: {e}{earlier}") from e
            if self.mine.random() < 0.3 or len(self.pending) > 8:
                self.wait_some()
        self.wait_some(everything=True)
        self.dist.barrier()
        for group, _ in self.groups[1:]:
            if group is not None and group != self.dist.GroupMember.NON_GROUP_MEMBER:
                self.dist.destroy_process_group(group)


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    if BACKEND == "coil":
        import coil_torch  # noqa: F401 - registers "coil"

    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    failures, checks = [], 0
    for seed in seeds(world):
        program = Program(torch, dist, seed, rank, world)
        program.run()
        failures += program.failures
        checks += program.checks
    dist.destroy_process_group()
    if rank == 0:
        say(f"world {world}: {len(seeds(world))} programs of {STEPS} steps, "
            f"rank 0 checked {checks} results")
    if failures:
        raise AssertionError(f"{len(failures)} of {checks} checks failed:\n"
                             + "\n".join(failures[:20]))


if __name__ == "__main__":
    run_worlds(f"random programs ({BACKEND})", worker, WORLD_SIZES, timeout=240)
