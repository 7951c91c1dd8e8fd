// One rank of a multi-host all-reduce, all-gather, reduce-scatter,
// broadcast, reduce and point-to-point check, started as a launcher starts it (RANK /
// WORLD_SIZE / MASTER_ADDR /
// MASTER_PORT): every dtype (and op) at awkward counts, in and out of place,
// against the independent reference (tests/harness/reference.h), with
// whatever COIL_ALGO says (the runner forces the hierarchical algorithms,
// then lets the tuner choose). Prints one line; the exit status says
// whether every value matched.
#include <coil.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "harness/reference.h"

using namespace coil::test;

int main() {
  coilComm_t comm = nullptr;
  if (coilCommInitFromEnv(&comm) != coilSuccess) {
    std::fprintf(stderr, "init failed: %s\n", coilGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  coilCommUserRank(comm, &rank);
  coilCommCount(comm, &n);
  size_t checked = 0, wrong = 0;
  for (int t = 0; t < coilNumTypes; ++t)
    for (int o = 0; o < coilNumOps; ++o)
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{7}, size_t{1009}, size_t{300007}})
        for (bool inPlace : {false, true}) {
          const auto type = static_cast<coilDataType_t>(t);
          const auto op = static_cast<coilRedOp_t>(o);
          if (!opTakesType(op, type)) continue;  // bitwise on floats: refused
          auto buf = makeInput(type, op, rank, n, count);
          std::vector<uint8_t> out(buf.size());
          void* dst = inPlace ? buf.data() : out.data();
          if (coilAllReduce(buf.data(), dst, count, type, op, comm, nullptr) != coilSuccess) {
            std::fprintf(stderr, "rank %d: all-reduce %s %s count %zu failed: %s\n", rank,
                         nameOf(type), nameOf(op), count, coilGetLastError(comm));
            return 1;
          }
          const auto want = makeExpected(type, op, n, count);
          const size_t at = firstMismatch(type, dst, want.data(), count);
          ++checked;
          if (at != SIZE_MAX) {
            ++wrong;
            if (wrong <= 5)
              std::fprintf(stderr, "rank %d: %s %s count %zu%s: element %zu wrong\n", rank,
                           nameOf(type), nameOf(op), count, inPlace ? " in place" : "", at);
          }
        }
  // All-gather: block q of the output is rank q's input (an all-reduce
  // input of rank q: distinct per rank and element).
  size_t gathered = 0;
  for (int t = 0; t < coilNumTypes; ++t)
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{7}, size_t{1009}, size_t{100003}})
      for (bool inPlace : {false, true}) {
        const auto type = static_cast<coilDataType_t>(t);
        const size_t block = count * sizeOf(type);
        std::vector<uint8_t> want;
        for (int q = 0; q < n; ++q) {
          auto in = makeInput(type, coilSum, q, n, count);  // count elements and a guard byte
          want.insert(want.end(), in.begin(), in.begin() + static_cast<ptrdiff_t>(block));
        }
        std::vector<uint8_t> out(want.size(), 0xA5);
        auto mine = makeInput(type, coilSum, rank, n, count);
        const void* src = mine.data();
        if (inPlace) {
          std::memcpy(out.data() + rank * block, mine.data(), block);
          src = out.data() + rank * block;
        }
        if (coilAllGather(src, out.data(), count, type, comm, nullptr) != coilSuccess) {
          std::fprintf(stderr, "rank %d: all-gather %s count %zu failed: %s\n", rank, nameOf(type),
                       count, coilGetLastError(comm));
          return 1;
        }
        const size_t at = firstMismatch(type, out.data(), want.data(), count * n);
        ++gathered;
        if (at != SIZE_MAX) {
          ++wrong;
          if (wrong <= 5)
            std::fprintf(stderr, "rank %d: all-gather %s count %zu%s: element %zu wrong"
                         " (first byte %02x, want %02x)\n", rank, nameOf(type), count,
                         inPlace ? " in place" : "", at, out[at * sizeOf(type)],
                         want[at * sizeOf(type)]);
        }
      }
  // Reduce-scatter: this rank's block of the all-reduce of n blocks.
  size_t scattered = 0;
  for (int t = 0; t < coilNumTypes; ++t)
    for (int o = 0; o < coilNumOps; ++o)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{30011}})
        for (bool inPlace : {false, true}) {
          const auto type = static_cast<coilDataType_t>(t);
          const auto op = static_cast<coilRedOp_t>(o);
          if (!opTakesType(op, type)) continue;  // bitwise on floats: refused
          const size_t esize = sizeOf(type);
          auto in = makeInput(type, op, rank, n, count * n);
          const auto all = makeExpected(type, op, n, count * n);
          std::vector<uint8_t> out(count * esize + 1, 0xA5);
          void* dst = inPlace ? in.data() + rank * count * esize : out.data();
          if (coilReduceScatter(in.data(), dst, count, type, op, comm, nullptr) != coilSuccess) {
            std::fprintf(stderr, "rank %d: reduce-scatter %s %s count %zu failed: %s\n", rank,
                         nameOf(type), nameOf(op), count, coilGetLastError(comm));
            return 1;
          }
          const size_t at = firstMismatch(type, dst, all.data() + rank * count * esize, count);
          ++scattered;
          if (at != SIZE_MAX) {
            ++wrong;
            if (wrong <= 5)
              std::fprintf(stderr, "rank %d: reduce-scatter %s %s count %zu%s: element %zu wrong\n",
                           rank, nameOf(type), nameOf(op), count, inPlace ? " in place" : "", at);
          }
        }
  // Broadcast from the first and the last rank (its bytes: that rank's
  // all-reduce input) and reduce into them, in and out of place.
  size_t rooted = 0;
  for (int root : {0, n - 1})
    for (int t = 0; t < coilNumTypes; ++t)
      for (int o = 0; o < coilNumOps; ++o)
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{100003}})
          for (bool inPlace : {false, true}) {
            const auto type = static_cast<coilDataType_t>(t);
            const auto op = static_cast<coilRedOp_t>(o);
            if (!opTakesType(op, type)) continue;
            const char* how = inPlace ? " in place" : "";
            auto data = makeInput(type, op, rank, n, count);
            std::vector<uint8_t> out(data.size(), 0xA5);
            void* dst = inPlace ? data.data() : out.data();
            if (o == 0) {  // one broadcast per type and count
              if (coilBroadcast(data.data(), dst, count, type, root, comm, nullptr) != coilSuccess) {
                std::fprintf(stderr, "rank %d: broadcast %s count %zu failed: %s\n", rank,
                             nameOf(type), count, coilGetLastError(comm));
                return 1;
              }
              const auto want = makeInput(type, op, root, n, count);
              const size_t at = firstMismatch(type, dst, want.data(), count);
              ++rooted;
              if (at != SIZE_MAX && ++wrong <= 5)
                std::fprintf(stderr, "rank %d: broadcast %s count %zu root %d%s: element %zu wrong\n",
                             rank, nameOf(type), count, root, how, at);
              const auto fresh = makeInput(type, op, rank, n, count);
              std::copy(fresh.begin(), fresh.end(), data.begin());  // dst stays valid
            }
            if (coilReduce(data.data(), dst, count, type, op, root, comm, nullptr) != coilSuccess) {
              std::fprintf(stderr, "rank %d: reduce %s %s count %zu failed: %s\n", rank,
                           nameOf(type), nameOf(op), count, coilGetLastError(comm));
              return 1;
            }
            ++rooted;
            if (rank != root) continue;
            const auto want = makeExpected(type, op, n, count);
            const size_t at = firstMismatch(type, dst, want.data(), count);
            if (at != SIZE_MAX && ++wrong <= 5)
              std::fprintf(stderr, "rank %d: reduce %s %s count %zu root %d%s: element %zu wrong\n",
                           rank, nameOf(type), nameOf(op), count, root, how, at);
          }
  // Point-to-point: every rank sends to and receives from every other in
  // one group (peers on this host over shm, the others over tcp's
  // caller-driven paths, in one batch), the sends posted first; then the
  // same messages without a group, each pair in turn. Message p -> q of
  // `count` int32 holds p's all-reduce input for the pair's own count.
  size_t messages = 0;
  auto message = [&](int from, int to, size_t count) {
    return makeInput(coilInt32, coilSum, from * n + to, n * n, count);
  };
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{300007}}) {
    std::vector<std::vector<uint8_t>> out(n), in(n);
    coilGroupStart();
    for (int q = 0; q < n; ++q)
      if (q != rank) {
        out[q] = message(rank, q, count);
        coilSend(out[q].data(), count, coilInt32, q, comm, nullptr);
      }
    for (int q = 0; q < n; ++q)
      if (q != rank) {
        in[q].assign(count * 4 + 1, 0xA5);
        coilRecv(in[q].data(), count, coilInt32, q, comm, nullptr);
      }
    if (coilGroupEnd() != coilSuccess) {
      std::fprintf(stderr, "rank %d: exchange of %zu int32 with every rank failed: %s\n", rank,
                   count, coilGetLastError(comm));
      return 1;
    }
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      ++messages;
      const size_t at = firstMismatch(coilInt32, in[q].data(), message(q, rank, count).data(), count);
      if (at != SIZE_MAX && ++wrong <= 5)
        std::fprintf(stderr, "rank %d: message of %zu int32 from rank %d: element %zu wrong\n",
                     rank, count, q, at);
    }
    // Without a group: pair (a, b) with a < b exchanges in turn, a sending
    // first, then receiving; b the other way round.
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        if (rank != a && rank != b) continue;
        const int peer = rank == a ? b : a;
        const coilResult_t first = rank == a ? coilSend(out[peer].data(), count, coilInt32, peer, comm, nullptr)
                                             : coilRecv(in[peer].data(), count, coilInt32, peer, comm, nullptr);
        const coilResult_t second = rank == a ? coilRecv(in[peer].data(), count, coilInt32, peer, comm, nullptr)
                                              : coilSend(out[peer].data(), count, coilInt32, peer, comm, nullptr);
        if (first != coilSuccess || second != coilSuccess) {
          std::fprintf(stderr, "rank %d: send and receive of %zu int32 with rank %d failed: %s\n",
                       rank, count, peer, coilGetLastError(comm));
          return 1;
        }
        ++messages;
        const size_t at =
            firstMismatch(coilInt32, in[peer].data(), message(peer, rank, count).data(), count);
        if (at != SIZE_MAX && ++wrong <= 5)
          std::fprintf(stderr, "rank %d: message of %zu int32 from rank %d (no group): element %zu wrong\n",
                       rank, count, peer, at);
      }
  }
  coilCommDestroy(comm);
  std::printf("rank %d of %d: %zu all-reduces, %zu all-gathers, %zu reduce-scatters, "
              "%zu broadcasts and reduces, %zu messages, %zu wrong\n",
              rank, n, checked, gathered, scattered, rooted, messages, wrong);
  return wrong ? 1 : 0;
}
