// coil-sim: watch a collective algorithm run, step by step, without a network.
//
//   coil-sim --ranks 4 --count 8            ring all-reduce of 8 elements on 4 ranks
//   coil-sim --ranks 3 --count 12 --chunk 2 several rounds (chunk = 2 elements)
//   coil-sim --ranks 4 --count 8 --values   also show each element's partial sums
//   coil-sim --algo hier --hosts 2,2 --count 8 --values
//                                           hierarchical all-reduce, 2 hosts of 2 ranks
//
// It runs the same algorithm code the library runs (src/algorithms/ring.cc,
// hierarchical.cc),
// under the tracing executor, and prints one row per step: what every rank
// does in that step. With --values it also replays the messages and shows
// which ranks' inputs each element of every rank's output already contains.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/ring.h"
#include "algorithms/trace_executor.h"

using namespace coil::algo;

namespace {

void usage() {
  std::printf(
      "usage: coil-sim [--algo ring|hier] [--ranks N] [--hosts R,R,...] [--count ELEMENTS]\n"
      "                [--chunk ELEMENTS] [--values]\n"
      "Prints an all-reduce schedule: one row per step, one column per rank.\n"
      "  --algo ring   the ring (default)\n"
      "  --algo hier   the hierarchical all-reduce; --hosts gives the ranks of each host\n"
      "                (ranks numbered host by host; default: 2 hosts sharing --ranks)\n");
}

// Bit set of ranks whose input an element contains, printed as digits.
std::string contributors(unsigned mask, int n) {
  std::string s;
  for (int r = 0; r < n; ++r) s += (mask & (1u << r)) ? static_cast<char>('0' + r % 10) : '.';
  return s;
}

// inPlace: the algorithm reads its input from the output buffer, which
// starts as the rank's own input (hier, as the library's driver arranges).
void replay(const std::vector<std::vector<TraceStep>>& programs, int n, size_t count, bool inPlace) {
  std::vector<std::vector<unsigned>> out(n, std::vector<unsigned>(count, 0));
  if (inPlace)
    for (int r = 0; r < n; ++r) std::fill(out[r].begin(), out[r].end(), 1u << r);
  std::map<std::pair<int, int>, std::deque<std::vector<unsigned>>> links;
  std::vector<size_t> pc(n, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r)
      while (pc[r] < programs[r].size()) {
        const TraceStep& s = programs[r][pc[r]];
        std::vector<unsigned> in(s.count, 0), mine(s.count, 1u << r);
        if (inPlace)
          for (size_t i = 0; i < s.count; ++i) mine[i] = out[r][s.offset + i];
        if (s.from >= 0 && s.count > 0) {
          auto& q = links[{s.from, r}];
          if (q.empty()) break;
          in = q.front();
          q.pop_front();
        }
        std::vector<unsigned> res = in;
        switch (s.kind) {
          case PrimitiveKind::Send:
          case PrimitiveKind::Copy: res = mine; break;
          case PrimitiveKind::RecvReduceSend:
          case PrimitiveKind::RecvReduceCopySend:
          case PrimitiveKind::RecvReduceCopy:
          case PrimitiveKind::RecvReduce:
            for (size_t i = 0; i < s.count; ++i) res[i] |= mine[i];
            break;
          default: break;
        }
        if (s.kind != PrimitiveKind::Send && s.kind != PrimitiveKind::RecvReduceSend)
          for (size_t i = 0; i < s.count; ++i) out[r][s.offset + i] = res[i];
        if (s.to >= 0 && s.count > 0) links[{r, s.to}].push_back(res);
        ++pc[r];
        progress = true;
      }
  }
  std::printf("\nFinal output (digits = ranks whose input each element contains):\n");
  for (int r = 0; r < n; ++r) {
    std::printf("  rank %d:", r);
    for (size_t i = 0; i < count; ++i) std::printf(" %s", contributors(out[r][i], n).c_str());
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 4;
  size_t count = 8, chunk = 0;
  bool values = false, ranksGiven = false;
  std::string algo = "ring", hostsSpec;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--ranks")) n = std::atoi(next()), ranksGiven = true;
    else if (!std::strcmp(argv[i], "--algo")) algo = next();
    else if (!std::strcmp(argv[i], "--hosts")) hostsSpec = next();
    else if (!std::strcmp(argv[i], "--count")) count = std::strtoull(next(), nullptr, 10);
    else if (!std::strcmp(argv[i], "--chunk")) chunk = std::strtoull(next(), nullptr, 10);
    else if (!std::strcmp(argv[i], "--values")) values = true;
    else {
      usage();
      return std::strcmp(argv[i], "-h") && std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  if (algo != "ring" && algo != "hier") {
    std::fprintf(stderr, "coil-sim: --algo must be ring or hier, not '%s'\n", algo.c_str());
    return 2;
  }
  // The host of each rank, for hier: --hosts 3,2 means ranks 0-2 on host 0, 3-4 on host 1.
  std::vector<int> hostOf;
  if (algo == "hier") {
    std::vector<int> perHost;
    if (hostsSpec.empty()) {
      perHost = {n - n / 2, n / 2};
      if (perHost[1] == 0) perHost.pop_back();
    } else {
      for (size_t at = 0; at <= hostsSpec.size();) {
        const size_t comma = std::min(hostsSpec.find(',', at), hostsSpec.size());
        const int k = std::atoi(hostsSpec.substr(at, comma - at).c_str());
        if (k < 1) {
          std::fprintf(stderr, "coil-sim: --hosts wants ranks per host, e.g. 2,2 (got '%s')\n",
                       hostsSpec.c_str());
          return 2;
        }
        perHost.push_back(k);
        at = comma + 1;
      }
    }
    int total = 0;
    for (size_t h = 0; h < perHost.size(); ++h)
      for (int k = 0; k < perHost[h]; ++k, ++total) hostOf.push_back(static_cast<int>(h));
    if (ranksGiven && !hostsSpec.empty() && total != n) {
      std::fprintf(stderr, "coil-sim: --hosts adds up to %d ranks, --ranks says %d\n", total, n);
      return 2;
    }
    n = total;
  } else if (!hostsSpec.empty()) {
    std::fprintf(stderr, "coil-sim: --hosts is for --algo hier\n");
    return 2;
  }
  if (n < 1 || n > 32) {
    std::fprintf(stderr, "coil-sim: --ranks must be in [1, 32]\n");
    return 2;
  }
  if (chunk == 0) chunk = count / static_cast<size_t>(n) + 1;  // one round by default

  std::vector<std::vector<TraceStep>> programs;
  size_t steps = 0;
  for (int r = 0; r < n; ++r) {
    TraceExecutor t;
    if (algo == "hier") hierarchicalAllReduce(t, CallShape{r, n, count, chunk, 0, &hostOf});
    else ringAllReduce(t, CallShape{r, n, count, chunk});
    programs.push_back(t.steps());
    steps = std::max(steps, t.steps().size());
  }
  if (algo == "hier") {
    std::printf("Hierarchical all-reduce: %d ranks on hosts", n);
    for (int r = 0; r < n; ++r) std::printf("%s%d", r ? "," : " ", hostOf[r]);
    std::printf(" (host of each rank), %zu elements, chunk %zu elements\n", count, chunk);
  } else {
    std::printf("Ring all-reduce: %d ranks, %zu elements, chunk %zu elements\n", n, count, chunk);
  }
  std::printf("Each cell: primitive from->rank->to [offset,+count)\n\n");
  for (size_t k = 0; k < steps; ++k) {
    std::printf("step %-3zu", k);
    for (int r = 0; r < n; ++r) {
      std::string cell = k < programs[r].size() ? describe(programs[r][k], r) : "";
      std::printf(" | %-34s", cell.c_str());
    }
    std::printf("\n");
  }
  if (values) {
    if (n > 16) std::fprintf(stderr, "coil-sim: --values supports at most 16 ranks\n");
    else replay(programs, n, count, algo == "hier");
  }
  return 0;
}
