"""Asynchronous point-to-point of the coil backend, for 2 and 3 ranks, against gloo.

Each case runs the same isend/irecv pattern on the default group (coil) and on
a gloo group of the same ranks; the received tensors must be equal, and equal
to what the sender made. Covered:
  - tags: two messages sent with tags 1 and 2 and received (by tag) in the
    opposite order, posted together or the second only after the first
    completed (equal sizes, different sizes, large); several messages with
    one tag stay in order;
  - batch_isend_irecv with two sends and two receives on one peer;
  - a blocking send inside an open coalesced batch raises naming it (coil);
  - a work is completed once its future is (coil: gloo's have no future);
  - recv from any source (blocking and irecv), which says who sent;
  - a receive whose message never comes times out after the group's timeout;
  - isend then irecv of the same large tensor (4 Mi float32) on both ranks of a
    pair, then waiting on both (each rank's send can only finish once the
    peer's receive runs, so they must progress together);
  - two isends and two irecvs per pair in mixed orders, small and large;
  - a message whose size differs from the posted receive raises an error.

COIL_TORCH_TEST_WORLDS picks the world sizes (default 2,3).
"""
import datetime
import os
import time
import traceback

from harness import init_env, run_worlds, say

WORLD_SIZES = tuple(int(w) for w in os.environ.get("COIL_TORCH_TEST_WORLDS", "2,3").split(",")
                    if int(w) >= 2)
LARGE = 4 * 1024 * 1024  # float32 elements: 16 MiB


def worker(rank, world, port):
    init_env(rank, world, port)
    import torch
    import torch.distributed as dist

    import coil_torch  # noqa: F401 - registers "coil"

    dist.init_process_group("coil", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    failures = []
    checks = [0]

    def data(src, dst, what, n):
        """What rank src sends to rank dst as message `what`: distinct per message."""
        return torch.arange(n, dtype=torch.float32) * 0 + (1000 * src + 100 * dst + what)

    def expect_equal(name, got, want):
        checks[0] += 1
        if got.shape != want.shape or not torch.equal(got, want):
            failures.append(f"{name}: got {got.flatten()[:4].tolist()}... "
                            f"want {want.flatten()[:4].tolist()}...")

    def case(name, fn):
        for backend, group in (("gloo", gloo), ("coil", None)):
            if os.environ.get("COIL_TORCH_TEST_TRACE"):
                say(f"rank {rank}: {name} [{backend}]")
            try:
                fn(f"{name} [{backend}]", group)
            except Exception:  # noqa: BLE001 - collect, keep the ranks in step
                failures.append(f"{name} [{backend}]: raised\n{traceback.format_exc()}")
            dist.barrier(group=gloo)

    # Pairs (a, b), a < b: every pair exchanges in turn while the other ranks
    # (world 3) wait at the barrier, so the cases also cover ranks that take
    # no part.
    pairs = [(a, b) for a in range(world) for b in range(a + 1, world)]

    def on_pairs(fn):
        def run(name, group):
            for a, b in pairs:
                if rank in (a, b):
                    fn(f"{name} {a}<->{b}", group, b if rank == a else a)
        return run

    # (b) isend then irecv of one large tensor on both ranks, then wait both.
    def large_exchange(name, group, peer):
        u = torch.zeros(LARGE)
        s = dist.isend(data(rank, peer, 7, LARGE), peer, group=group)
        r = dist.irecv(u, peer, group=group)
        s.wait()
        r.wait()
        expect_equal(name, u, data(peer, rank, 7, LARGE))
    case("isend+irecv 4 Mi float32 both ways", on_pairs(large_exchange))

    # Two isends and two irecvs in mixed orders, waited in another order.
    for n in (5, LARGE // 2):
        for mine, theirs in (("ssrr", "ssrr"), ("srsr", "rssr"), ("rrss", "ssrr"),
                             ("srrs", "rsrs")):
            def mixed(name, group, peer, n=n, mine=mine, theirs=theirs):
                order = mine if rank < peer else theirs
                got = [torch.zeros(n), torch.zeros(n)]
                works, si, ri = [], 0, 0
                for op in order:
                    if op == "s":
                        works.append(dist.isend(data(rank, peer, si, n), peer, group=group))
                        si += 1
                    else:
                        works.append(dist.irecv(got[ri], peer, group=group))
                        ri += 1
                for w in reversed(works):
                    w.wait()
                for i in range(2):
                    expect_equal(f"{name} message {i}", got[i], data(peer, rank, i, n))
            case(f"mixed {mine}/{theirs} n={n}", on_pairs(mixed))

    # (a) Tags 1 and 2 received in the opposite order, posted together.
    def tags_swapped(name, group, peer):
        sends = [dist.isend(data(rank, peer, tag, 1), peer, group=group, tag=tag)
                 for tag in (1, 2)]
        got = {tag: torch.zeros(1) for tag in (2, 1)}
        recvs = [dist.irecv(got[tag], peer, group=group, tag=tag) for tag in (2, 1)]
        for w in sends + recvs:
            w.wait()
        for tag in (1, 2):
            expect_equal(f"{name} tag {tag}", got[tag], data(peer, rank, tag, 1))
    case("tags 1,2 received as 2,1", on_pairs(tags_swapped))

    # The receive of tag 2 completes before tag 1 is even posted; the two
    # messages have different sizes, small or large.
    for sizes in ({1: 7, 2: 7}, {1: 7, 2: 1000}, {1: LARGE, 2: LARGE // 2 + 1}):
        def tags_one_by_one(name, group, peer, sizes=sizes):
            sends = [dist.isend(data(rank, peer, tag, sizes[tag]), peer, group=group, tag=tag)
                     for tag in (1, 2)]
            got2 = torch.zeros(sizes[2])
            dist.recv(got2, peer, group=group, tag=2)
            got1 = torch.zeros(sizes[1])
            dist.recv(got1, peer, group=group, tag=1)
            for w in sends:
                w.wait()
            expect_equal(f"{name} tag 2", got2, data(peer, rank, 2, sizes[2]))
            expect_equal(f"{name} tag 1", got1, data(peer, rank, 1, sizes[1]))
        case(f"tags received one by one, reversed, sizes {sizes[1]}/{sizes[2]}",
             on_pairs(tags_one_by_one))

    # In order within a tag: three messages on tag 5 interleaved with tag 6.
    def tags_fifo(name, group, peer):
        order = [(5, 0), (6, 1), (5, 2), (5, 3), (6, 4)]
        sends = [dist.isend(data(rank, peer, what, 3), peer, group=group, tag=tag)
                 for tag, what in order]
        got = [(tag, what, torch.zeros(3)) for tag, what in order]
        recv_order = [g for g in got if g[0] == 6] + [g for g in got if g[0] == 5]
        recvs = [dist.irecv(t, peer, group=group, tag=tag) for tag, _, t in recv_order]
        for w in sends + recvs:
            w.wait()
        for tag, what, t in got:
            expect_equal(f"{name} tag {tag} message {what}", t, data(peer, rank, what, 3))
    case("in order within a tag", on_pairs(tags_fifo))

    # In order within a tag when sizes alternate: a small message sent while
    # a large one before it is still going out must not overtake it (small
    # ones to an idle link leave from the caller's thread, p2p_links.h).
    def sizes_alternate(name, group, peer):
        sizes = [LARGE, 7, 1, LARGE // 2 + 1, 3, 5]
        sends = [dist.isend(data(rank, peer, what, n), peer, group=group, tag=4)
                 for what, n in enumerate(sizes)]
        got = [torch.zeros(n) for n in sizes]
        for t in got:
            dist.recv(t, peer, group=group, tag=4)
        for w in sends:
            w.wait()
        for what, t in enumerate(got):
            expect_equal(f"{name} message {what}", t, data(peer, rank, what, sizes[what]))
    case("in order within a tag, large and small alternating", on_pairs(sizes_alternate))

    # batch_isend_irecv with two sends and two receives on one peer.
    def batch_two_each(name, group, peer):
        got = [torch.zeros(9), torch.zeros(LARGE // 4)]
        ops = [dist.P2POp(dist.isend, data(rank, peer, 0, 9), peer, group, 10),
               dist.P2POp(dist.isend, data(rank, peer, 1, LARGE // 4), peer, group, 11),
               dist.P2POp(dist.irecv, got[1], peer, group, 11),
               dist.P2POp(dist.irecv, got[0], peer, group, 10)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        expect_equal(f"{name} message 0", got[0], data(peer, rank, 0, 9))
        expect_equal(f"{name} message 1", got[1], data(peer, rank, 1, LARGE // 4))
    case("batch_isend_irecv, two each way on one peer", on_pairs(batch_two_each))

    # A blocking send between startCoalescing and endCoalescing (coil only:
    # gloo has no batches) fails at once naming the open batch, instead of
    # waiting out the timeout for a message that goes only when the batch
    # ends; the send still goes with the batch.
    def blocking_send_in_batch(name, group, peer):
        got = torch.zeros(5)
        cpu = torch.device("cpu")
        dist.group.WORLD._start_coalescing(cpu)
        checks[0] += 1
        try:
            dist.send(data(rank, peer, 3, 5), peer, tag=12)
            failures.append(f"{name}: a blocking send in an open batch did not raise")
        except RuntimeError as e:
            if "open coalesced batch" not in str(e):
                failures.append(f"{name}: {e}")
        recv = dist.irecv(got, peer, tag=12)
        dist.group.WORLD._end_coalescing(cpu).wait()
        recv.wait()
        expect_equal(name, got, data(peer, rank, 3, 5))
    try:
        on_pairs(blocking_send_in_batch)("blocking send in an open batch [coil]", None)
    except Exception:  # noqa: BLE001 - collect, keep the ranks in step
        failures.append(f"blocking send in an open batch [coil]: raised\n{traceback.format_exc()}")
    dist.barrier(group=gloo)

    # A work whose future has completed is completed (coil only: gloo's
    # point-to-point works have no future). The future completes a moment
    # before the work itself, on another thread; a caller woken by the
    # future used to find is_completed() still False now and then.
    def completed_after_future(name, group, peer):
        late = 0
        for i in range(300):
            got = torch.zeros(3)
            works = [dist.isend(data(rank, peer, i, 3), peer, group, 13),
                     dist.irecv(got, peer, group, 13)]
            for w in works:
                w.get_future().wait()
                late += 0 if w.is_completed() else 1
            expect_equal(f"{name} message {i}", got, data(peer, rank, i, 3))
        checks[0] += 1
        if late:
            failures.append(f"{name}: {late} of 600 works not completed once their future was")
    try:
        on_pairs(completed_after_future)("completed once the future is [coil]", None)
    except Exception:  # noqa: BLE001 - collect, keep the ranks in step
        failures.append(f"completed once the future is [coil]: raised\n{traceback.format_exc()}")
    dist.barrier(group=gloo)

    # Receives from any source: rank 0 takes one message from every other
    # rank, in whatever order they come, and learns who sent each; a message
    # with another tag is left for the receive of its tag.
    def any_source(name, group):
        if rank == 0:
            seen = []
            for i in range(world - 1):
                t = torch.zeros(5)
                if i % 2 == 0:
                    src = dist.recv(t, group=group, tag=4)
                else:
                    w = dist.irecv(t, group=group, tag=4)
                    w.wait()
                    src = w._source_rank()
                expect_equal(f"{name} from {src}", t, data(src, 0, 4, 5))
                seen.append(src)
            check_sources = sorted(seen) == list(range(1, world))
            checks[0] += 1
            if not check_sources:
                failures.append(f"{name}: senders {seen}, expected each of 1..{world - 1} once")
            other = torch.zeros(2)
            dist.recv(other, src=world - 1, group=group, tag=9)
            expect_equal(f"{name} other tag", other, data(world - 1, 0, 9, 2))
        else:
            first = None
            if rank == world - 1:  # first, another tag (gloo: a send waits for its receive)
                first = dist.isend(data(rank, 0, 9, 2), 0, group=group, tag=9)
            dist.send(data(rank, 0, 4, 5), 0, group=group, tag=4)
            if first is not None:
                first.wait()
    case("recv from any source", any_source)

    # A receive whose message never comes gives up after the group's timeout.
    def recv_timeout():
        group = dist.new_group(backend="coil", timeout=datetime.timedelta(seconds=2))
        if rank == 0:
            checks[0] += 1
            start = time.monotonic()
            try:
                dist.recv(torch.zeros(3), 1, group=group, tag=77)
                failures.append("recv timeout: no error")
            except RuntimeError as e:
                took = time.monotonic() - start
                if " Timed out " not in str(e) or took < 1.9:
                    failures.append(f"recv timeout: after {took:.2f} s: {e}")
        dist.barrier(group=gloo)
        dist.destroy_process_group(group)
    try:
        recv_timeout()
    except Exception:  # noqa: BLE001
        failures.append(f"recv timeout: raised\n{traceback.format_exc()}")

    # A message larger than the posted receive: an error, not truncated data.
    def size_mismatch(name, group, peer):
        if group is not None or {rank, peer} != {0, 1}:
            return  # only coil is checked, on one pair (the error breaks the communicator)
        if rank < peer:
            dist.isend(data(rank, peer, 1, 8), peer, tag=3).wait()
        else:
            checks[0] += 1
            try:
                dist.recv(torch.zeros(4), peer, tag=3)
                failures.append(f"{name}: no error")
            except RuntimeError as e:
                if "32 bytes" not in str(e) or "16 bytes" not in str(e):
                    failures.append(f"{name}: error does not give the sizes: {e}")
    case("size mismatch", on_pairs(size_mismatch))

    dist.destroy_process_group()
    say(f"rank {rank}/{world}: {checks[0]} checks, {len(failures)} failures")
    if failures:
        raise AssertionError(f"{len(failures)} failed checks:\n" + "\n".join(failures))


def main():
    run_worlds("test_p2p", worker, WORLD_SIZES)


if __name__ == "__main__":
    main()
